"""The behaviours of pycaffe's test_python_layer.py and test_python_layer_with_param_str.py."""
import numpy as np
import pytest

import caffepy as caffe
from tests.pycaffe.nets import write

MODULE = "tests.pycaffe.test_python_layer"


class SimpleLayer(caffe.Layer):
    """Multiplies by ten."""

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = 10 * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = 10 * top[0].diff


class ExceptionLayer(caffe.Layer):
    def setup(self, bottom, top):
        raise RuntimeError("this layer refuses to be set up")


class ParameterLayer(caffe.Layer):
    """Adds a learnable per-element parameter blob."""

    def setup(self, bottom, top):
        self.blobs.add_blob(1)
        self.blobs[0].data[0] = 0

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = bottom[0].data + self.blobs[0].data[0]

    def backward(self, top, propagate_down, bottom):
        self.blobs[0].diff[0] += top[0].diff.sum()


class SimpleParamLayer(caffe.Layer):
    """Multiplies by the float in param_str."""

    def setup(self, bottom, top):
        try:
            self.value = float(self.param_str)
        except ValueError:
            raise ValueError("Parameter string must be a legible float")

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        top[0].data[...] = self.value * bottom[0].data

    def backward(self, top, propagate_down, bottom):
        bottom[0].diff[...] = self.value * top[0].diff


DATA_MAX, DATA_BATCH = 1000, 10


class SimpleDataLayer(caffe.Layer):
    """Counts 0, 1, 2 ... DATA_MAX - 1, 0, 1 ... in batches."""

    def setup(self, bottom, top):
        top[0].reshape(DATA_BATCH)
        self.current = 0

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        top[0].data[...] = [x % DATA_MAX for x in range(self.current, self.current + DATA_BATCH)]
        self.current = (self.current + DATA_BATCH) % DATA_MAX


def three_layer_net(tmp_path, layer="SimpleLayer"):
    body = "".join("layer { type: 'Python' name: '%s' bottom: '%s' top: '%s' python_param { module: '%s' "
                   "layer: '%s' } }\n" % (t, b, t, MODULE, layer)
                   for b, t in (("data", "one"), ("one", "two"), ("two", "three")))
    return caffe.Net(write(tmp_path, "py.prototxt", "name: 'pythonnet' force_backward: true\n"
                           "input: 'data' input_shape { dim: 10 dim: 9 dim: 8 }\n" + body), caffe.TRAIN)


def test_forward_backward_and_reshape(tmp_path):
    net = three_layer_net(tmp_path)
    net.blobs["data"].data[...] = 8
    net.forward()
    assert (net.blobs["three"].data == 8000).all()
    net.blobs["three"].diff[...] = 7
    net.backward()
    assert (net.blobs["data"].diff == 7000).all()
    net.blobs["data"].reshape(4, 4, 4, 4)
    net.forward()
    assert all(b.data.shape == (4, 4, 4, 4) for b in net.blobs.values())


def test_setup_exception_propagates(tmp_path):
    with pytest.raises(Exception, match="refuses to be set up"):
        three_layer_net(tmp_path, "ExceptionLayer")


def test_parameter_blobs_train_and_save(tmp_path):
    text = ("name: 'p' force_backward: true input: 'data' input_shape { dim: 10 dim: 9 dim: 8 }\n"
            "layer { type: 'Python' name: 'layer' bottom: 'data' top: 'out' "
            "python_param { module: '%s' layer: 'ParameterLayer' } }\n"
            "layer { type: 'EuclideanLoss' name: 'loss' bottom: 'out' bottom: 'data' top: 'loss' }\n" % MODULE)
    net_file = write(tmp_path, "param.prototxt", text)
    solver_file = write(tmp_path, "solver.prototxt", "net: '%s' base_lr: 1 lr_policy: 'fixed' momentum: 0 "
                        "max_iter: 1 snapshot_after_train: false display: 0\n" % net_file)
    solver = caffe.get_solver(solver_file)
    layer = solver.net.layer_dict["layer"]
    assert layer.type == "Python" and len(layer.blobs) == 1
    solver.net.blobs["data"].data[...] = 0
    layer.blobs[0].data[0] = 1
    solver.step(1)
    assert layer.blobs[0].data[0] < 1
    weights = str(tmp_path / "p.caffemodel")
    solver.net.save(weights)
    net2 = caffe.Net(net_file, caffe.TRAIN, weights=weights)
    assert net2.layer_dict["layer"].blobs[0].data[0] == layer.blobs[0].data[0]


def test_param_str(tmp_path):
    text = ("name: 'pythonnet' force_backward: true input: 'data' input_shape { dim: 10 dim: 9 dim: 8 }\n"
            "layer { type: 'Python' name: 'mul10' bottom: 'data' top: 'mul10' python_param { "
            "module: '%s' layer: 'SimpleParamLayer' param_str: '10' } }\n"
            "layer { type: 'Python' name: 'mul2' bottom: 'mul10' top: 'mul2' python_param { "
            "module: '%s' layer: 'SimpleParamLayer' param_str: '2' } }\n" % (MODULE, MODULE))
    net = caffe.Net(write(tmp_path, "ps.prototxt", text), caffe.TRAIN)
    net.blobs["data"].data[...] = 1
    net.forward()
    assert (net.blobs["mul2"].data == 20).all()
    net.blobs["mul2"].diff[...] = 1
    net.backward()
    assert (net.blobs["data"].diff == 20).all()


def test_data_layer_sequence(tmp_path):
    text = ("name: 'pythondatanet' layer { type: 'Python' name: 'pythondata' top: 'pythondata' "
            "python_param { module: '%s' layer: 'SimpleDataLayer' } }" % MODULE)
    net = caffe.Net(write(tmp_path, "d.prototxt", text), caffe.TRAIN)
    for it in range(150):
        net.forward()
        start = (it * DATA_BATCH) % DATA_MAX
        assert np.array_equal(net.blobs["pythondata"].data, np.arange(start, start + DATA_BATCH) % DATA_MAX)


def test_python_layer_from_netspec(tmp_path):
    from caffepy import layers as L
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3]))
    n.out = L.Python(n.data, module=MODULE, layer="SimpleParamLayer", param_str="3")
    net = caffe.Net(n.to_proto(), caffe.TEST)
    net.blobs["data"].data[...] = 2
    assert (net.forward()["out"] == 6).all()
