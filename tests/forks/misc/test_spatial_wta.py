import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.forks.nets import forward, train_step


def test_spatial_wta_param_parses():
    lp = proto_io.read_net('layer { name: "w" type: "SpatialWta" bottom: "x" top: "y" '
                           'spatial_wta_param { kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 '
                           'pad: 1 engine: CAFFE global_wta: false } }').layer[0]
    p = lp.spatial_wta_param
    assert (p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad, p.global_wta) == (2, 3, 1, 2, 1,
                                                                                      False)
    assert p.engine == caffe_pb2.SpatialWtaParameter.CAFFE
    assert caffe_pb2.SpatialWtaParameter().stride == 1


def test_global_wta_keeps_the_largest_magnitude_of_each_map():
    x = np.array([[[[1.0, -5.0, 2.0], [3.0, 0.5, -4.0]],
                   [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]])
    y, mask = run_layer(make_layer('type: "SpatialWta" spatial_wta_param { global_wta: true }'),
                        make_blobs([x]), make_blobs(2))
    ref = np.zeros_like(x)
    ref[0, 0, 0, 1] = -5.0
    np.testing.assert_array_equal(y, ref)
    # an all-zero map: its first element wins (strict >), its value stays 0
    assert mask[0, 1, 0, 0] == 1 and mask[0, 1].sum() == 1 and mask[0, 0, 0, 1] == 1


def test_windows_with_stride_keep_one_winner_each():
    x = np.array([[[[1.0, 2.0, 0.0, 7.0],
                    [-3.0, 0.0, 1.0, 1.0],
                    [0.0, 4.0, 4.0, 0.0]]]])
    # 2 x 2 windows at stride 1 x 2: starts (0, 0), (0, 2), (1, 0), (1, 2)
    (y,) = run_layer(make_layer('type: "SpatialWta" spatial_wta_param { kernel_size: 2 '
                                'stride_h: 1 stride_w: 2 }'), make_blobs([x]), make_blobs(1))
    ref = np.zeros_like(x)
    ref[0, 0, 1, 0] = -3.0      # window (0, 0)
    ref[0, 0, 0, 3] = 7.0       # window (0, 2)
    ref[0, 0, 2, 1] = 4.0       # window (1, 0): 4 at (2, 1) before the tie at (2, 2)
    ref[0, 0, 2, 2] = 4.0       # window (1, 2): 4 at (2, 2)
    np.testing.assert_array_equal(y, ref)


def test_kernel_larger_than_the_map_keeps_nothing():
    (y,) = run_layer(make_layer('type: "SpatialWta" spatial_wta_param { kernel_size: 5 }'),
                     make_blobs([np.ones((1, 1, 3, 3))]), make_blobs(1))
    assert not y.any()


@pytest.mark.parametrize("param", ["global_wta: true", "kernel_size: 2 stride: 2",
                                   "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1"])
def test_spatial_wta_gradient(param):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 5, 4))
    check_layer_gradient(make_layer('type: "SpatialWta" spatial_wta_param { %s }' % param),
                         make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("param,message", [
    ("global_wta: true kernel_size: 2", "cannot be specified"),
    ("kernel_size: 2 kernel_h: 2 kernel_w: 2", "not both"),
    ("kernel_h: 2", "required"),
    ("kernel_size: 2 stride: 2 stride_h: 1 stride_w: 1", "stride"),
    ("global_wta: true stride: 2", "stride must be 1")])
def test_spatial_wta_bad_parameters(param, message):
    with pytest.raises(NetError, match=message):
        run_layer(make_layer('type: "SpatialWta" spatial_wta_param { %s }' % param),
                  make_blobs([np.ones((1, 1, 4, 4))]), make_blobs(1))


NET = """
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1
                            weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "wta" type: "SpatialWta" bottom: "conv" top: "wta"
        spatial_wta_param { global_wta: true } }
layer { name: "deconv" type: "Deconvolution" bottom: "wta" top: "deconv"
        convolution_param { num_output: 1 kernel_size: 3 pad: 1
                            weight_filler { type: "xavier" } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "deconv" bottom: "data" top: "loss" }
"""


def test_wta_autoencoder_excerpt_runs_and_trains():
    net = forward(NET, batch=2)
    wta = net.blobs["wta"].data
    assert ((wta != 0).reshape(2, 4, -1).sum(axis=2) <= 1).all()
    train_step(NET, batch=2)
