import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.wino_conv import transforms
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.forks.nets import forward, train_step


def test_wino_tile_fields_parse():
    p = caffe_pb2.ConvolutionParameter()
    assert (p.wino_tile, p.wino_zero_idx) == (2, 0)
    lp = proto_io.read_net('layer { name: "c" type: "WinoConvolution" bottom: "x" top: "y" '
                           'convolution_param { num_output: 2 kernel_size: 3 wino_tile: 6 '
                           'wino_zero_idx: 1 } }').layer[0]
    assert (lp.convolution_param.wino_tile, lp.convolution_param.wino_zero_idx) == (6, 1)


def test_f23_matrices_are_lavins():
    at, g, bt = transforms(2)
    # F(2, 3) at 0, 1, -1: the rows of Lavin & Gray up to the sign of the first point's
    np.testing.assert_array_equal(np.abs(bt), [[1, 0, 1, 0], [0, 1, 1, 0], [0, 1, 1, 0],
                                               [0, 1, 0, 1]])
    np.testing.assert_array_equal(at, [[1, 1, 1, 0], [0, 1, -1, 1]])


@pytest.mark.parametrize("m", [2, 4, 6])
def test_transforms_compute_a_correlation(m):
    at, g, bt = transforms(m)
    rng = np.random.default_rng(m)
    d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
    np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)),
                               [d[i:i + 3] @ w for i in range(m)], atol=1e-12)


def _conv(text, x, blobs):
    layer = make_layer(text)
    layer.blobs = make_blobs(blobs)
    return run_layer(layer, make_blobs([x]), make_blobs(1))[0]


@pytest.mark.parametrize("tile,pad,group", [(2, 1, 1), (4, 0, 2), (6, 2, 1), (14, 1, 1)])
def test_wino_convolution_equals_the_direct_convolution(tile, pad, group):
    rng = np.random.default_rng(tile)
    x = rng.standard_normal((2, 4, 9, 7))
    w, b = rng.standard_normal((6, 4 // group, 3, 3)), rng.standard_normal(6)
    geometry = 'num_output: 6 kernel_size: 3 pad: %d group: %d' % (pad, group)
    y = _conv('type: "WinoConvolution" convolution_param { %s wino_tile: %d }'
              % (geometry, tile), x, [w, b])
    ref = _conv('type: "Convolution" convolution_param { %s }' % geometry, x, [w, b])
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-11)


def test_a_hand_checked_tile():
    # one 1 x 1 x 4 x 4 input of ones, a kernel of ones, no pad: every output is 9
    y = _conv('type: "WinoConvolution" convolution_param { num_output: 1 kernel_size: 3 '
              'wino_tile: 4 bias_term: false }', np.ones((1, 1, 4, 4)), [np.ones((1, 1, 3, 3))])
    np.testing.assert_allclose(y, np.full((1, 1, 2, 2), 9.0), atol=1e-12)


def test_other_geometries_are_the_direct_convolution():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 8, 8))
    w, b = rng.standard_normal((3, 2, 5, 5)), rng.standard_normal(3)
    geometry = 'num_output: 3 kernel_size: 5 stride: 2 pad: 1'
    np.testing.assert_array_equal(
        _conv('type: "WinoConvolution" convolution_param { %s wino_tile: 6 }' % geometry, x,
              [w, b]),
        _conv('type: "Convolution" convolution_param { %s }' % geometry, x, [w, b]))


@pytest.mark.parametrize("tile", [2, 6])
def test_wino_convolution_gradient(tile):
    rng = np.random.default_rng(1)
    layer = make_layer('type: "WinoConvolution" convolution_param { num_output: 3 kernel_size: 3 '
                       'pad: 1 wino_tile: %d weight_filler { type: "gaussian" std: 0.5 } '
                       'bias_filler { type: "gaussian" std: 0.5 } }' % tile)
    check_layer_gradient(layer, make_blobs([rng.standard_normal((2, 2, 5, 6))]), make_blobs(1))


def test_bad_wino_tile():
    with pytest.raises(NetError, match="wino_tile"):
        run_layer(make_layer('type: "WinoConvolution" convolution_param { num_output: 1 '
                             'kernel_size: 3 wino_tile: 3 }'),
                  make_blobs([np.ones((1, 1, 5, 5))]), make_blobs(1))


NET = """
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv1a" type: "WinoConvolution" bottom: "data" top: "conv1a"
        convolution_param { num_output: 4 pad: 1 kernel_size: 3 stride: 1 wino_tile: 6
                            weight_filler { type: "gaussian" std: 0.1 }
                            bias_filler { type: "constant" } } }
layer { name: "relu1a" type: "ReLU" bottom: "conv1a" top: "conv1a" }
layer { name: "pool" type: "Pooling" bottom: "conv1a" top: "pool"
        pooling_param { pool: AVE global_pooling: true } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
        inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def test_cifar_practice_excerpt_runs_and_trains():
    forward(NET, batch=2)
    train_step(NET, batch=2)
