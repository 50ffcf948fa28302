"""xavigibert/caffe's ParamSpec.lr_pre_mult (forks/misc/xavigibert.py)."""
import numpy as np

from caffepy.forks.misc.xavigibert import PreMultipliedConvolutionLayer
from caffepy.layers.conv import ConvolutionLayer
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text
from caffepy.testing import make_blobs, make_layer

CONV = ('type: "%s" %s convolution_param { num_output: 3 kernel_size: 2 '
        'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }')


def _grads(layer_type, params, x, dy_seed=5):
    layer = make_layer(CONV % (layer_type, params))
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    for b in layer.blobs:
        b.data[...] = np.linspace(-1, 1, b.count).reshape(b.shape)
        b.diff[...] = 0.5                                  # an earlier layer's share
    layer.forward(bottom, top)
    top[0].diff[...] = np.random.default_rng(dy_seed).standard_normal(top[0].shape)
    layer.backward(top, [True], bottom)
    return layer, [b.diff.copy() for b in layer.blobs], bottom[0].diff.copy()


def test_parse_and_variant():
    p = parse_text('param { lr_mult: 1 lr_pre_mult: 0.5 }', caffe_pb2.LayerParameter())
    assert p.param[0].lr_pre_mult == 0.5
    assert caffe_pb2.ParamSpec().lr_pre_mult == 1.0
    assert type(make_layer(CONV % ("Convolution", ""))) is ConvolutionLayer


def test_lr_pre_mult_scales_this_layers_share_of_the_param_gradients():
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 4))
    for kind in ("Convolution", "Deconvolution"):
        _, (dw, db), dx = _grads(kind, "", x)
        layer, (dw2, db2), dx2 = _grads(kind, "param { lr_pre_mult: 0.5 } "
                                        "param { lr_pre_mult: 0.25 }", x)
        if kind == "Convolution":
            assert isinstance(layer, PreMultipliedConvolutionLayer)
        np.testing.assert_allclose(dw2, 0.5 + 0.5 * (dw - 0.5))
        np.testing.assert_allclose(db2, 0.5 + 0.25 * (db - 0.5))
        np.testing.assert_allclose(dx2, dx)                  # the bottom gradient is unchanged
        _, (dw3, db3), _ = _grads(kind, "param { lr_pre_mult: 2 }", x)
        np.testing.assert_allclose(dw3, 0.5 + 2 * (dw - 0.5))
        np.testing.assert_allclose(db3, db)
