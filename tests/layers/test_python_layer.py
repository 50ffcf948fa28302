import os
import sys
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


FAILING = textwrap.dedent('''
    import numpy as np
    from caffepy.layers.python_layer import Layer
    %s

    class Reader(Layer):
        def setup(self, bottom, top):
            %s

        def reshape(self, bottom, top):
            top[0].reshape(1, 3, 4, 4)

        def forward(self, bottom, top):
            %s
''')

CLI_NET = ('layer { name: "data" type: "Python" top: "data" '
           'python_param { module: "%s" layer: "Reader" } }\n'
           'layer { name: "relu" type: "ReLU" bottom: "data" top: "out" }\n')


def _failing_module(tmp_path, monkeypatch, name, at_import="", in_setup="pass",
                    in_forward="top[0].data[...] = 1"):
    (tmp_path / (name + ".py")).write_text(FAILING % (at_import, in_setup, in_forward))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _line_of(tmp_path, name, text):
    lines = (tmp_path / (name + ".py")).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.mark.parametrize("where, phase, raised, message, code", [
    ("at_import", "import", "NameError", "name 'image_table' is not defined",
     "N = len(image_table(3))"),
    ("in_setup", "setup", "TypeError", "load() missing 1 required positional argument: 'Loader'",
     "raise TypeError(\"load() missing 1 required positional argument: 'Loader'\")"),
    ("in_forward", "forward", "AttributeError", "module 'numpy' has no attribute 'no_such_alias'",
     "top[0].data[...] = np.no_such_alias(2)"),
])
def test_user_code_errors_are_one_line_naming_layer_call_and_place(tmp_path, monkeypatch, where,
                                                                   phase, raised, message, code):
    name = _failing_module(tmp_path, monkeypatch, "pyl_fail_" + where, **{where: code})
    line = _line_of(tmp_path, name, code)
    with pytest.raises(NetError) as e:
        layer = _layer(name, "Reader")
        run_layer(layer, [], make_blobs(1))
    text = str(e.value)
    assert "\n" not in text and text.startswith(
        "layer 'L' (Python): python_param.module '%s' (class Reader) raised %s in %s: %s"
        % (name, raised, phase, message))
    assert text.endswith("(%s.py:%d)" % (name, line))
    assert e.value.phase == phase and type(e.value.original).__name__ == raised


def test_an_error_inside_a_library_is_placed_at_the_users_call(tmp_path, monkeypatch):
    code = "np.zeros(3).reshape(2, 2)"
    name = _failing_module(tmp_path, monkeypatch, "pyl_fail_numpy", in_setup=code)
    with pytest.raises(NetError, match=r"raised ValueError in setup: cannot reshape .*\(%s\.py:%d\)$"
                       % (name, _line_of(tmp_path, name, code))):
        run_layer(_layer(name, "Reader"), [], make_blobs(1))


def test_cli_prints_a_python_layers_error_in_one_line(tmp_path, monkeypatch, capsys):
    from caffepy.cli import main
    code = "for i in xrange_(3): pass"
    name = _failing_module(tmp_path, monkeypatch, "pyl_fail_cli", in_forward=code)
    path = tmp_path / "net.prototxt"
    path.write_text(CLI_NET % name)
    assert main(["time", "--model", str(path), "--iterations", "1"]) == 1
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("I")]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert err[0].endswith(
        "layer 'data' (Python): python_param.module '%s' (class Reader) raised "
        "NameError in forward: name 'xrange_' is not defined (%s.py:%d)"
        % (name, name, _line_of(tmp_path, name, code)))


@pytest.mark.parametrize("where, code", [("at_import", "N = len(image_table(3))"),
                                         ("in_setup", "raise KeyError('image_list')")])
def test_summary_strict_prints_a_python_layers_error_in_one_line(tmp_path, monkeypatch, capsys,
                                                                 where, code):
    from caffepy.cli import main
    name = _failing_module(tmp_path, monkeypatch, "pyl_fail_sum_" + where, **{where: code})
    path = tmp_path / "net.prototxt"
    path.write_text('layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }\n'
                    + CLI_NET.replace('top: "data" ', 'bottom: "x" top: "data" ', 1) % name)
    assert main(["summary", "--strict", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert ("layer 'data' (Python): python_param.module '%s' (class Reader) raised" % name) in err[0]
    assert err[0].endswith("(%s.py:%d)" % (name, _line_of(tmp_path, name, code)))


FORK_PYCAFFE = '''from ._caffe import Net, Layer
def _Net_blobs(self):
    return {}
Net.blobs = property(_Net_blobs)
'''
LAYER_MODULE = '''import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import caffe


class Double(caffe.Layer):
    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = 2 * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = 2 * top[0].diff
'''
FORK_NET = '''name: "n"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "double" type: "Python" bottom: "data" top: "out"
        python_param { module: "double_layer" layer: "Double" } }
'''
RUN = '''import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from caffepy.cli import main
rc = main(["summary", sys.argv[2]])
import caffepy
net = caffepy.Net(sys.argv[2], caffepy.TEST)
net.blobs["data"].data[...] = 1.5
assert np.all(net.forward()["out"] == 3.0)
print("caffe is caffepy's:", sys.modules["caffe"].__file__.startswith(sys.argv[3]), rc)
'''


def test_a_forks_pycaffe_sources_on_sys_path_do_not_replace_caffepys_caffe(tmp_path):
    """A fork's checkout holds pycaffe's sources (python/caffe) without the compiled _caffe, and
    its layer modules put that directory first on sys.path before ``import caffe``; caffepy's
    ``caffe`` is in sys.modules first, so the sources neither fail to import nor patch caffepy's
    Net (the summary builds, the net runs)."""
    import subprocess
    import caffe as caffepy_caffe
    root = os.path.dirname(os.path.dirname(os.path.abspath(caffepy_caffe.__file__)))
    (tmp_path / "python" / "caffe").mkdir(parents=True)
    (tmp_path / "python" / "caffe" / "__init__.py").write_text(FORK_PYCAFFE)
    (tmp_path / "pylayers").mkdir()
    (tmp_path / "pylayers" / "double_layer.py").write_text(LAYER_MODULE)
    (tmp_path / "net.prototxt").write_text(FORK_NET)
    out = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / "pylayers"),
                          str(tmp_path / "net.prototxt"), os.path.join(root, "caffe")],
                         capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "caffe is caffepy's: True 0" in out.stdout
