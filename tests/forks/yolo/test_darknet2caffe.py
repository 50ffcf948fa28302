"""The darknet2caffe Caffe's Pooling (forks/yolo/darknet2caffe.py): one more output when
kernel - stride is odd, for the Pooling layers that converter names ``layer<N>-maxpool``."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.yolo.darknet2caffe import Darknet2CaffePoolingLayer
from caffepy.layers.pooling import PoolingLayer
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _pool(kernel, stride, pad=0, method="MAX", name="layer12-maxpool"):
    return make_layer('name: "%s" type: "Pooling" pooling_param { pool: %s kernel_size: %d '
                      'stride: %d pad: %d }' % (name, method, kernel, stride, pad))


def _windows(x, k, reduce):
    """darknet's maxpool of size k, stride 1: windows [i, i + k) clipped to the image."""
    h, w = x.shape[2:]
    return np.array([[reduce(x[..., i:i + k, j:j + k], axis=(-2, -1)) for j in range(w)]
                     for i in range(h)]).transpose(2, 3, 0, 1)


def test_variant_only_for_the_converters_names():
    assert type(_pool(2, 1)) is Darknet2CaffePoolingLayer
    assert type(_pool(2, 1, name="pool5")) is PoolingLayer
    assert type(_pool(2, 1, name="layer12-maxpool_extra")) is PoolingLayer


@pytest.mark.parametrize("kernel, stride, pad, size, out", [
    (2, 1, 0, 13, 13),      # yolov3-tiny's sixth maxpool: BVLC gives 12
    (2, 2, 0, 13, 7),       # kernel - stride even: BVLC's ceil((13 - 2) / 2) + 1
    (4, 1, 0, 6, 4),        # 3 + 1
    (3, 2, 1, 7, 4),        # 4 + 1, then the last window would start at H + pad: 4
    (1, 2, 0, 5, 3),        # kernel - stride = -1: nothing added (C++'s -1 % 2 is -1)
])
def test_output_size(kernel, stride, pad, size, out):
    y, = run_layer(_pool(kernel, stride, pad), make_blobs([np.zeros((1, 1, size, size))]),
                   make_blobs(1))
    assert y.shape == (1, 1, out, out)


def test_values_are_darknets_maxpool_and_clipped_average():
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5))
    y, = run_layer(_pool(2, 1), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, _windows(x, 2, np.max))
    # AVE divides by the window clipped to the image (pad 0): the last row averages 2 values
    y, = run_layer(_pool(2, 1, method="AVE"), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, _windows(x, 2, np.mean), rtol=1e-12)


@pytest.mark.parametrize("method", ["MAX", "AVE"])
def test_gradient(method):
    x = np.random.default_rng(1).permutation(2 * 2 * 5 * 5).reshape(2, 2, 5, 5) / 10.0
    check_layer_gradient(_pool(2, 1, method=method), make_blobs([x]), make_blobs(1))


NET = """
name: "Darkent2Caffe"
input: "data" input_shape { dim: 1 dim: 2 dim: 13 dim: 13 }
layer { bottom: "data" top: "layer12-maxpool" name: "layer12-maxpool" type: "Pooling"
  pooling_param { stride: 1 pool: MAX kernel_size: 2 pad: 0 } }
layer { bottom: "layer12-maxpool" bottom: "data" top: "layer13-route" name: "layer13-route"
  type: "Concat" }
"""


def test_excerpt_builds_and_bvlc_names_keep_bvlc_sizes():
    net = Net(proto_io.read_net(NET), caffe_pb2.TEST)
    assert net.blobs["layer13-route"].shape == (1, 4, 13, 13)
    net.blobs["data"].data[...] = np.random.default_rng(2).standard_normal((1, 2, 13, 13))
    net.forward()
    np.testing.assert_array_equal(net.blobs["layer13-route"].data[:, :2],
                                  _windows(net.blobs["data"].data, 2, np.max))
    with pytest.raises(CaffeError, match="does not match"):
        Net(proto_io.read_net(NET.replace('name: "layer12-maxpool"', 'name: "pool6"')),
            caffe_pb2.TEST)
