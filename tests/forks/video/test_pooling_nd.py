import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.video.pooling_nd import output_size
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _layer(body):
    return make_layer('type: "PoolingND" pooling_nd_param { %s }' % body)


def test_output_size_ceil_and_padding_correction():
    assert output_size((5, 6, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0)) == (3, 3, 4)
    # padded: O = ceil((4 + 2 - 2) / 2) + 1 = 3, and (3 - 1) * 2 = 4 >= 4 + 1? no: kept
    assert output_size((4,), (2,), (2,), (1,)) == (3,)
    # any pad corrects every axis: axis 0 (pad 0) loses its window starting at 4 >= 4
    assert output_size((4, 4), (1, 3), (2, 1), (0, 1)) == (2, 4)
    assert output_size((4, 4), (1, 3), (2, 1), (0, 0)) == (3, 2)


def test_max_and_ave_3d_hand_checked():
    x = np.arange(2 * 3 * 2, dtype=float).reshape(1, 1, 2, 3, 2)
    y, mask = run_layer(_layer("pool: MAX kernel_size: 2 stride: 2"), make_blobs([x]),
                        make_blobs(2))
    # windows along axis 1 (size 3, ceil): [0, 2) and [2, 3)
    assert y.shape == (1, 1, 1, 2, 1)
    np.testing.assert_array_equal(y.ravel(), [9, 11])
    np.testing.assert_array_equal(mask.ravel(), [9, 11])      # flat index in the 2x3x2 volume
    y, = run_layer(_layer("pool: AVE kernel_size: 2 stride: 2"), make_blobs([x]), make_blobs(1))
    # second window: 4 elements over a window of 2 x 1 x 2 inside the input (no padding)
    np.testing.assert_allclose(y.ravel(), [np.mean([0, 1, 2, 3, 6, 7, 8, 9]),
                                           np.mean([4, 5, 10, 11])])
    # pad 1 on each axis, kernel 3, stride 3: the divisor counts the padding, 3^3 = 27
    x = np.ones((1, 1, 2, 2, 2))
    y, = run_layer(_layer("pool: AVE kernel_size: 3 stride: 3 pad: 1"), make_blobs([x]),
                   make_blobs(1))
    np.testing.assert_allclose(y.ravel(), [8 / 27.0])


def test_per_axis_values_axis_and_global():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 6))
    y, = run_layer(_layer("pool: MAX kernel_size: 2 kernel_size: 3 stride: 2 stride: 3"),
                   make_blobs([x]), make_blobs(1))
    want = x.reshape(2, 3, 2, 2, 2, 3).max(axis=(3, 5))
    np.testing.assert_array_equal(y, want)
    y, = run_layer(_layer("pool: MAX kernel_h: 2 kernel_w: 3 stride_h: 2 stride_w: 3"),
                   make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, want)
    y, = run_layer(_layer("pool: AVE global_pooling: true"), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x.mean(axis=(2, 3), keepdims=True))
    # axis 2: axes 0-1 are batch axes, 3-4 spatial
    x5 = np.random.default_rng(1).standard_normal((2, 2, 3, 4, 4))
    y, = run_layer(_layer("pool: MAX kernel_size: 2 stride: 2 axis: 2"), make_blobs([x5]),
                   make_blobs(1))
    np.testing.assert_array_equal(y, x5.reshape(2, 2, 3, 2, 2, 2, 2).max(axis=(4, 6)))


def test_gradients():
    rng = np.random.default_rng(2)
    x3 = rng.standard_normal((1, 2, 3, 4, 3))
    check_layer_gradient(_layer("pool: MAX kernel_size: 2 stride: 1"), make_blobs([x3]),
                         make_blobs(1))
    check_layer_gradient(_layer("pool: AVE kernel_size: 2 stride: 2 pad: 1"),
                         make_blobs([x3]), make_blobs(1))
    x2 = rng.standard_normal((2, 2, 5, 4))
    check_layer_gradient(_layer("pool: AVE kernel_size: 3 stride: 2"), make_blobs([x2]),
                         make_blobs(1))
    check_layer_gradient(_layer("pool: MAX kernel_size: 3 stride: 2 pad: 1"),
                         make_blobs([x2]), make_blobs(1))


def test_refusals():
    x = np.zeros((1, 1, 4, 4, 4))
    for body, message in [("pool: STOCHASTIC kernel_size: 2", "STOCHASTIC"),
                          ("kernel_size: 2 kernel_size: 2", "once per spatial dimension"),
                          ("kernel_h: 2 kernel_w: 2", "2 spatial axes"),
                          ("kernel_size: 2 pad: 2", "smaller than the kernel"),
                          ("global_pooling: true kernel_size: 2", "cannot be specified")]:
        with pytest.raises(CaffeError, match=message):
            run_layer(_layer(body), make_blobs([x]), make_blobs(1))


NET = '''
name: "unet3d_down"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 1 dim: 6 dim: 6 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 2 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "pool" type: "PoolingND" bottom: "conv" top: "pool"
  pooling_nd_param { pool: MAX pad: 0 kernel_size: 2 stride: 2 engine: CAFFE } }
'''


def test_pooling_nd_in_a_net():
    net = Net(proto_io.read_net(NET), caffe_pb2.TEST)
    net.blobs["data"].data[...] = np.random.default_rng(3).standard_normal((1, 1, 6, 6, 4))
    net.forward()
    conv = net.blobs["conv"].data
    np.testing.assert_array_equal(net.blobs["pool"].data,
                                  conv.reshape(1, 2, 3, 2, 3, 2, 2, 2).max(axis=(3, 5, 7)))
