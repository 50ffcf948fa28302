import textwrap

import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

MODULE = textwrap.dedent('''
    import numpy as np
    from caffepy.layers.python_layer import Layer

    class ScaleByParam(Layer):
        """y = w * x with one learnable scalar w; param_str gives its initial value."""
        def setup(self, bottom, top):
            self.blobs.add_blob(1)
            self.blobs[0].data[...] = float(self.param_str or 1)
            self.seen_phase = self.phase

        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)

        def forward(self, bottom, top):
            top[0].data[...] = self.blobs[0].data[0] * bottom[0].data

        def backward(self, top, propagate_down, bottom):
            self.blobs[0].diff[0] += np.sum(top[0].diff * bottom[0].data)
            if propagate_down[0]:
                bottom[0].diff[...] = self.blobs[0].data[0] * top[0].diff
''')


@pytest.fixture
def pymodule(tmp_path, monkeypatch):
    (tmp_path / "caffepy_test_pylayers.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "caffepy_test_pylayers"


def _layer(module, cls, param_str="", dtype=np.float64):
    return make_layer('type: "Python" python_param { module: "%s" layer: "%s" param_str: "%s" }'
                      % (module, cls, param_str), dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_layer_forward(pymodule, dtype):
    x = np.random.default_rng(0).standard_normal((2, 3))
    layer = _layer(pymodule, "ScaleByParam", "2.5", dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, 2.5 * x, rtol=1e-6)
    assert len(layer.blobs) == 1 and layer.py_layer.seen_phase == caffepy.TEST
    assert layer.py_layer.param_str == "2.5"


def test_net_layers_answer_for_the_user_object(pymodule):
    """pycaffe's net.layers[i] is the user's object (py-faster-rcnn: layers[0].set_roidb)."""
    layer = _layer(pymodule, "ScaleByParam", "2")
    run_layer(layer, make_blobs([np.ones((1, 2))]), make_blobs(1))
    assert layer.seen_phase == caffepy.TEST and layer.type == "Python"
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        layer.nothing_here


def test_python_layer_gradient(pymodule):
    x = np.random.default_rng(1).standard_normal((2, 3))
    check_layer_gradient(_layer(pymodule, "ScaleByParam", "0.7"), make_blobs([x]), make_blobs(1))


def test_python_loss_layer_in_net(pymodule, user_pyloss):
    from caffepy.net import Net
    text = '''
    layer { name: "x" type: "Input" top: "x" top: "y"
            input_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 3 } } }
    layer { name: "s" type: "Python" bottom: "x" top: "sx"
            python_param { module: "%s" layer: "ScaleByParam" param_str: "2" } }
    layer { name: "loss" type: "Python" bottom: "sx" bottom: "y" top: "loss" loss_weight: 1
            python_param { module: "%s" layer: "EuclideanLossLayer" } }
    ''' % (pymodule, user_pyloss)
    net = Net(text, caffepy.TRAIN)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    net.blobs["x"].data[...] = x
    net.blobs["y"].data[...] = y
    out = net.forward()
    np.testing.assert_allclose(out["loss"], np.sum((2 * x - y) ** 2) / 8, rtol=1e-5)
    net.backward()
    np.testing.assert_allclose(net.params["s"][0].diff[0], np.sum((2 * x - y) / 4 * x), rtol=1e-4)


def test_missing_module_is_one_line_error():
    with pytest.raises(NetError) as e:
        _layer("no_such_module_xyz.sub", "Foo")
    msg = str(e.value)
    assert "\n" not in msg and "no_such_module_xyz.sub" in msg and "'L'" in msg and "Foo" in msg


def test_missing_class_is_one_line_error(pymodule):
    with pytest.raises(NetError) as e:
        _layer(pymodule, "NoSuchLayer")
    assert "NoSuchLayer" in str(e.value) and pymodule in str(e.value)


def test_solver_never_calls_a_python_layers_set_iter(tmp_path, monkeypatch):
    """The solver calls set_iter only on layer classes that define it (MobileNet-YOLO's C++
    layers), not on a Python layer's user object that happens to have one (pycaffe does not)."""
    (tmp_path / "caffepy_test_setiter.py").write_text(
        "import caffe\n"
        "class Twice(caffe.Layer):\n"
        "    def setup(self, bottom, top): pass\n"
        "    def reshape(self, bottom, top): top[0].reshape(*bottom[0].data.shape)\n"
        "    def forward(self, bottom, top): top[0].data[...] = 2 * bottom[0].data\n"
        "    def backward(self, top, propagate_down, bottom):\n"
        "        bottom[0].diff[...] = 2 * top[0].diff\n"
        "    def set_iter(self, *args): raise RuntimeError('set_iter called')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from caffepy.solvers import get_solver
    net = '''layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
              inner_product_param { num_output: 3 weight_filler { type: "gaussian" } } }
      layer { name: "t" type: "Python" bottom: "ip" top: "t"
              python_param { module: "caffepy_test_setiter" layer: "Twice" } }
      layer { name: "loss" type: "Reduction" bottom: "t" top: "loss" loss_weight: 1 }'''
    solver = get_solver('net_param { %s } base_lr: 0.1 lr_policy: "fixed" max_iter: 2 display: 0 '
                        'snapshot_after_train: false'
                        % net)
    solver.solve()
    assert solver.iter == 2 and solver.net.layers[2].set_iter is not None
