import logging

import numpy as np
import pytest

from caffepy.errors import NetError, ProtoError, ShapeError
from caffepy.forks.video.nd import NdConvolutionLayer, NdPoolingLayer, PoolingNdLayer
from caffepy.proto import caffe_pb2, field_label, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

RNG = np.random.default_rng(3)


# -- reading list / repeated kernel_size, stride, pad of PoolingParameter ----------------------

def _pool_params(text):
    return [lp.pooling_param for lp in proto_io.read_net(text).layer]


def test_list_and_repeated_fields_read_into_nd_fields(caplog):
    text = """
layer { name: "a" type: "Pooling" pooling_param { pool: AVE kernel_size: [4, 7, 7] stride: 1 } }
layer { name: "b" type: "Pooling" pooling_param { pool: MAX kernel_size: 1 kernel_size: 2
    kernel_size: 2 stride: 1 stride: 2 stride: 2 pad: [0, 1, 1] } }
layer { name: "c" type: "Pooling" pooling_param { kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "d" type: "Convolution" convolution_param { kernel_size: [3, 3, 3] pad: [1, 1, 1] } }
"""
    with caplog.at_level(logging.INFO):
        a, b, c, _ = _pool_params(text)
    assert list(a.kernel_size_nd) == [4, 7, 7] and not a.HasField("kernel_size")
    assert a.stride == 1 and not len(a.stride_nd)               # a single value stays BVLC's
    assert list(b.kernel_size_nd) == [1, 2, 2] and list(b.stride_nd) == [1, 2, 2]
    assert list(b.pad_nd) == [0, 1, 1]
    assert (c.kernel_size, c.stride, c.pad) == (3, 2, 1) and not len(c.kernel_size_nd)
    lines = [r.getMessage() for r in caplog.records if "as a list or repeatedly" in r.getMessage()]
    assert len(lines) == 1 and "2 block(s)" in lines[0] and "R-C3D" in lines[0]
    assert "PoolingParameter.kernel_size -> kernel_size_nd" in lines[0]


def test_bvlc_pooling_fields_keep_their_schema():
    fields = caffe_pb2.PoolingParameter.DESCRIPTOR.fields_by_name
    for name, number in (("kernel_size", 2), ("stride", 3), ("pad", 4)):
        assert fields[name].number == number and field_label(fields[name]) == "optional"
    for name, number in (("kernel_size_nd", 10600), ("stride_nd", 10601), ("pad_nd", 10602)):
        assert fields[name].number == number and field_label(fields[name]) == "repeated"


def test_later_errors_keep_their_line_and_other_duplicates_stay_errors():
    text = ('layer { name: "p" type: "Pooling"\n pooling_param { kernel_size: [1, 2, 2] } }\n'
            'layer { name: "q" type: "Pooling"\n pooling_param { nonesuch: 1 } }\n')
    with pytest.raises(ProtoError, match=r":4:\d+: no field named \"nonesuch\""):
        proto_io.read_net(text)
    with pytest.raises(ProtoError, match="multiple"):
        proto_io.read_net('layer { name: "p" type: "Pooling" pooling_param { pool: MAX pool: AVE '
                          'kernel_size: [2, 2] } }')


# -- Pooling over N spatial axes (ECO caffe_3d, R-C3D caffe3d) ---------------------------------

def _pool(x, fields, top=1):
    layer = make_layer('type: "Pooling" pooling_param { %s }' % fields)
    return layer, run_layer(layer, make_blobs([x]), make_blobs(top))


def test_pooling_nd_is_the_variant_only_with_nd_fields():
    assert isinstance(make_layer('type: "Pooling" pooling_param { kernel_size_nd: 2 }'),
                      PoolingNdLayer)
    assert not isinstance(make_layer('type: "Pooling" pooling_param { kernel_size: 2 }'),
                          PoolingNdLayer)


def test_pooling_nd_max_and_ave_by_hand():
    x = np.arange(18.0).reshape(1, 1, 2, 3, 3)
    # every 2x2x2 window: max is its last element x[1, i+1, j+1] = 9 + 3 (i+1) + (j+1)
    _, (y,) = _pool(x, "pool: MAX kernel_size_nd: [2, 2, 2] stride: 1")
    np.testing.assert_array_equal(y[0, 0, 0], [[13, 14], [16, 17]])
    _, (y,) = _pool(x, "pool: AVE kernel_size_nd: 2")
    np.testing.assert_allclose(y[0, 0, 0], [[6.5, 7.5], [9.5, 10.5]])
    # the mask: flat index of the maximum in the 2x3x3 volume
    _, (y, mask) = _pool(x, "pool: MAX kernel_size_nd: [2, 2, 2]", top=2)
    np.testing.assert_array_equal(mask[0, 0, 0], [[13, 14], [16, 17]])


def test_pooling_nd_ceil_and_padded_divisor():
    # H = 3, k 2, stride 2, pad 1: O = ceil(3 / 2) + 1 = 3, minus 1 (4 >= 3 + 1) = 2;
    # windows [-1, 1) and [1, 3): AVE (0 + 1) / 2 and (2 + 3) / 2, MAX 1 and 3
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 1, 1, 3, 1)
    fields = "kernel_size_nd: [1, 2, 1] stride_nd: [1, 2, 1] pad_nd: [0, 1, 0]"
    _, (y,) = _pool(x, "pool: AVE " + fields)
    np.testing.assert_allclose(y.ravel(), [0.5, 2.5])
    _, (y,) = _pool(x, "pool: MAX " + fields)
    np.testing.assert_allclose(y.ravel(), [1.0, 3.0])
    # W = 4, k 3, stride 2, no pad: O = ceil(1 / 2) + 1 = 2; the second window [2, 5) is cut
    # at 4 and divides by 2
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 1, 1, 4)
    _, (y,) = _pool(x, "pool: AVE kernel_size_nd: [1, 1, 3] stride: 2")
    np.testing.assert_allclose(y.ravel(), [2.0, 3.5])
    _, (y,) = _pool(x, "pool: AVE kernel_size_nd: [1, 1, 3] stride: 2 round_mode: FLOOR")
    np.testing.assert_allclose(y.ravel(), [2.0])


def test_pooling_nd_global_and_shapes():
    x = RNG.standard_normal((2, 3, 4, 7, 7))
    _, (y,) = _pool(x, "pool: AVE global_pooling: true stride_nd: 1")
    np.testing.assert_allclose(y[..., 0, 0, 0], x.mean(axis=(2, 3, 4)), rtol=1e-12)
    _, (y,) = _pool(x, "pool: AVE kernel_size_nd: [4, 7, 7] stride: 1")      # ECO's global pool
    np.testing.assert_allclose(y[..., 0, 0, 0], x.mean(axis=(2, 3, 4)), rtol=1e-12)
    _, (y,) = _pool(x, "pool: MAX kernel_size_nd: [1, 3, 3] stride_nd: [1, 2, 2] "
                       "pad_nd: [0, 1, 1]")
    assert y.shape == (2, 3, 4, 4, 4)
    with pytest.raises(NetError, match="smaller than the kernel"):
        _pool(x, "pool: MAX kernel_size_nd: [1, 3, 3] pad: 1")  # the forks' CHECK_LT(pad, k)
    with pytest.raises(NetError):
        _pool(x, "pool: MAX kernel_size_nd: [2, 2]")           # 2 values, 3 spatial axes
    with pytest.raises(NetError, match="one way"):
        _pool(x, "pool: MAX kernel_size_nd: [2, 2, 2] kernel_size: 2")


@pytest.mark.parametrize("fields", [
    "pool: MAX kernel_size_nd: [2, 2, 3] stride_nd: [1, 2, 2]",
    "pool: AVE kernel_size_nd: [2, 3, 3] stride_nd: [1, 2, 2] pad_nd: [0, 1, 1]",
    "pool: AVE kernel_size_nd: [3, 2] stride: 2",
])
def test_pooling_nd_gradient(fields):
    shape = (2, 2, 5, 5) if "[3, 2]" in fields else (2, 2, 3, 5, 5)
    x = RNG.permutation(int(np.prod(shape))).reshape(shape) / 10.0     # no ties
    check_layer_gradient(make_layer('type: "Pooling" pooling_param { %s }' % fields),
                         make_blobs([x]), make_blobs(1))


def test_plain_pooling_of_a_5d_bottom_is_nd_pooling():
    """The OpenCL branch's PoolingLayer is N-d with BVLC's fields: ``kernel_size: 2 stride: 2``
    on N x C x D x H x W pools every spatial axis (BVLC refuses the 5-d bottom)."""
    x = RNG.permutation(2 * 2 * 4 * 5 * 6).reshape(2, 2, 4, 5, 6) / 10.0
    for pool in ("MAX", "AVE"):
        layer, (y,) = _pool(x, "pool: %s kernel_size: 2 stride: 2" % pool)
        _, (ref,) = _pool(x, "pool: %s kernel_size_nd: [2, 2, 2] stride_nd: [2, 2, 2]" % pool)
        assert isinstance(layer, PoolingNdLayer) and y.shape == (2, 2, 2, 3, 3)
        np.testing.assert_array_equal(y, ref)
    check_layer_gradient(make_layer('type: "Pooling" pooling_param { pool: MAX kernel_size: 2 '
                                    'stride: 2 }'), make_blobs([x]), make_blobs(1))
    layer, (y,) = _pool(x[:, :, 0], "pool: MAX kernel_size: 2 stride: 2")     # 4-d: BVLC's
    assert not isinstance(layer, PoolingNdLayer) and y.shape == (2, 2, 3, 3)


# -- NdPooling / NdConvolution (chuckcho/video-caffe, R-C3D caffe3d) ---------------------------

def test_nd_pooling_matches_pooling_nd():
    x = RNG.standard_normal((1, 2, 5, 6, 6))
    nd = make_layer('type: "NdPooling" pooling_param { pool: MAX kernel_shape { dim: 2 dim: 3 '
                    'dim: 3 } stride_shape { dim: 1 dim: 2 dim: 2 } pad_shape { dim: 0 dim: 1 '
                    'dim: 1 } }')
    assert isinstance(nd, NdPoolingLayer)
    (y,) = run_layer(nd, make_blobs([x]), make_blobs(1))
    _, (want,) = _pool(x, "pool: MAX kernel_size_nd: [2, 3, 3] stride_nd: [1, 2, 2] "
                          "pad_nd: [0, 1, 1]")
    np.testing.assert_array_equal(y, want)
    assert y.shape == (1, 2, 4, 4, 4)          # H: ceil((6 + 2 - 3) / 2) + 1 = 4
    with pytest.raises(ShapeError):
        make_layer('type: "NdPooling" pooling_param { kernel_shape { dim: 2 dim: 2 } }').setup(
            make_blobs([x]), make_blobs(1))
    with pytest.raises(NetError, match="kernel_shape is required"):
        make_layer('type: "NdPooling" pooling_param { pool: MAX }').setup(
            make_blobs([x]), make_blobs(1))


def conv_nd_ref(x, w, b, pad, stride):
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - k[i]) // stride[i] + 1 for i in range(3)]
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(out))
    for l in range(out[0]):
        for h in range(out[1]):
            for v in range(out[2]):
                l0, h0, v0 = l * stride[0], h * stride[1], v * stride[2]
                patch = xp[:, :, l0:l0 + k[0], h0:h0 + k[1], v0:v0 + k[2]]
                y[:, :, l, h, v] = np.einsum("ncijk,ocijk->no", patch, w) + b
    return y


NDCONV = ('type: "NdConvolution" convolution_param { num_output: 4 kernel_shape { dim: 3 dim: 2 '
          'dim: 3 } stride_shape { dim: 1 dim: 2 dim: 1 } pad_shape { dim: 1 dim: 0 dim: 1 } '
          'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } %s }')


def test_nd_convolution_numbers():
    x = RNG.standard_normal((2, 3, 4, 5, 6))
    layer = make_layer(NDCONV % "")
    assert isinstance(layer, NdConvolutionLayer)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w, b = layer.blobs[0].data, layer.blobs[1].data
    assert w.shape == (4, 3, 3, 2, 3) and b.shape == (4,)
    assert y.shape == (2, 4, 4, 2, 6)
    np.testing.assert_allclose(y, conv_nd_ref(x, w, b, (1, 0, 1), (1, 2, 1)), rtol=1e-10)
    # a 1x1x1 kernel is a per-voxel matrix product
    one = make_layer('type: "NdConvolution" convolution_param { num_output: 2 bias_term: false '
                     'kernel_shape { dim: 1 dim: 1 dim: 1 } weight_filler { type: "gaussian" } }')
    (y,) = run_layer(one, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, np.einsum("oc,nclhw->nolhw", one.blobs[0].data[..., 0, 0, 0], x),
                               rtol=1e-10)


def test_nd_convolution_gradient_and_group():
    x = RNG.standard_normal((2, 4, 3, 4, 4))
    check_layer_gradient(make_layer(NDCONV % "group: 2"), make_blobs([x]), make_blobs(1))
    with pytest.raises(NetError, match="kernel_shape is required"):
        make_layer('type: "NdConvolution" convolution_param { num_output: 2 kernel_size: 3 }'
                   ).setup(make_blobs([x]), make_blobs(1))


# -- nets in the forks' spelling -----------------------------------------------------------------

VIDEO_CAFFE_NET = """
name: "c3d-mini"
input: "data" input_shape { dim: 1 dim: 3 dim: 4 dim: 8 dim: 8 }
input: "label" input_shape { dim: 1 }
layer { name: "conv1a" type: "NdConvolution" bottom: "data" top: "conv1a"
  convolution_param { num_output: 4 kernel_shape { dim: 3 dim: 3 dim: 3 }
    pad_shape { dim: 1 dim: 1 dim: 1 } weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1a" type: "ReLU" bottom: "conv1a" top: "conv1a" }
layer { name: "pool1" type: "NdPooling" bottom: "conv1a" top: "pool1"
  pooling_param { pool: MAX kernel_shape { dim: 1 dim: 2 dim: 2 }
    stride_shape { dim: 1 dim: 2 dim: 2 } } }
layer { name: "conv2a" type: "Convolution" bottom: "pool1" top: "conv2a"
  convolution_param { num_output: 6 kernel_size: [3, 3, 3] pad: [1, 1, 1]
    weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "bn2a" type: "BN" bottom: "conv2a" top: "conv2a"
  bn_param { slope_filler { type: "constant" value: 1 } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2a" top: "pool2"
  pooling_param { pool: AVE kernel_size: 2 kernel_size: 2 kernel_size: 2 stride: [2, 2, 2] } }
layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
  inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.05 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def test_fork_spelled_net_forward_and_train_step():
    net = forward(VIDEO_CAFFE_NET, labels=5)
    assert net.blobs["pool1"].shape == (1, 4, 4, 4, 4)
    assert net.blobs["pool2"].shape == (1, 6, 2, 2, 2)
    train_step(VIDEO_CAFFE_NET, labels=5)


def test_bn_normalises_five_axis_blobs():
    # ECO caffe_3d's BN (cuDNN spatial batch norm) on N x C x L x H x W
    x = RNG.standard_normal((2, 3, 2, 3, 3)) * 2 + 1
    layer = make_layer('type: "BN" bn_param { slope_filler { type: "constant" value: 1 } }',
                       phase=caffe_pb2.TRAIN)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    mu = x.mean(axis=(0, 2, 3, 4), keepdims=True)
    var = x.var(axis=(0, 2, 3, 4), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10)
