"""RRD's Extend (forks/ssd/rrd.py): each channel repeated orientations times, in place order."""
import numpy as np
import pytest

from caffepy.errors import NetError, ShapeError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer, run_layer

X = np.random.default_rng(0).standard_normal((2, 3, 4, 5))


def test_forward_repeats_each_channel():
    layer = make_layer('type: "Extend" orn_param { orientations: 4 }')
    bottom, top = make_blobs([X]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert y.shape == (2, 12, 4, 5)
    for n in range(2):
        for c in range(3):
            for k in range(4):
                np.testing.assert_array_equal(y[n, c * 4 + k], X[n, c])
    layer.backward(top, [False], bottom)
    with pytest.raises(NetError, match="backward is not implemented"):
        layer.backward(top, [True], bottom)


def test_refusals():
    with pytest.raises(NetError, match="greater than 1, got 1"):
        make_layer('type: "Extend"').setup(make_blobs([X]), make_blobs(1))
    with pytest.raises(ShapeError, match="N x C x H x W"):
        make_layer('type: "Extend" orn_param { orientations: 2 }').setup(
            make_blobs([X[0]]), make_blobs(1))


NET = """
input: "data" input_shape { dim: 1 dim: 3 dim: 6 dim: 6 }
layer {
  name: "extend"
  type: "Extend"
  bottom: "data"
  top: "extend"
  orn_param {
    orientations: 8
  }
}
layer { name: "conv1_1" type: "Convolution" bottom: "extend" top: "conv1_1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
"""


def test_excerpt_net_strict_read():
    param = proto_io.read_net(NET)                  # strict reading: orn_param is computed
    assert param.layer[1].orn_param.orientations == 8
    assert caffe_pb2.ORNParameter().orientations == 1
    net = Net(param, caffe_pb2.TEST)
    net.blobs["data"].data[...] = np.arange(108).reshape(1, 3, 6, 6)
    net.forward()
    assert net.blobs["extend"].shape == (1, 24, 6, 6)
    assert net.blobs["conv1_1"].shape == (1, 4, 6, 6)
    extend = net.blobs["extend"].data
    for c in range(24):
        np.testing.assert_array_equal(extend[0, c], np.arange(36).reshape(6, 6) + 36 * (c // 8))
