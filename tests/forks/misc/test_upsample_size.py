"""The YOLOv5 ports' Upsample (to a size or by factors, nearest or bilinear) and Reorg's Focus
form (a channel count its stride's square does not divide)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.upsample_size import SizeScaleUpsampleLayer
from caffepy.forks.misc.vision import ReorgLayer, UpsampleLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(4)


def _fork_bilinear(x, ho, wo):
    """Wulingtian/yolov5_caffe's Forward_cpu_bilinear, loop for loop, in float32."""
    f = np.float32
    n, c, h, w = x.shape
    rh = f(h - 1) / f(ho - 1) if ho > 1 else f(0)
    rw = f(w - 1) / f(wo - 1) if wo > 1 else f(0)
    y = np.zeros((n, c, ho, wo), np.float32)
    for h2 in range(ho):
        h1r = f(rh * f(h2))
        h1 = int(h1r)
        h1p = 1 if h1 < h - 1 else 0
        l1 = f(h1r - f(h1))
        l0 = f(1) - l1
        for w2 in range(wo):
            w1r = f(rw * f(w2))
            w1 = int(w1r)
            w1p = 1 if w1 < w - 1 else 0
            m1 = f(w1r - f(w1))
            m0 = f(1) - m1
            y[:, :, h2, w2] = (l0 * (m0 * x[:, :, h1, w1] + m1 * x[:, :, h1, w1 + w1p])
                               + l1 * (m0 * x[:, :, h1 + h1p, w1]
                                       + m1 * x[:, :, h1 + h1p, w1 + w1p]))
    return y


def test_bilinear_to_a_size_is_the_forks_loop():
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    layer = make_layer('type: "Upsample" upsample_param { height: 9 width: 4 }', dtype=np.float32)
    assert isinstance(layer, SizeScaleUpsampleLayer)
    (y,) = run_layer(layer, make_blobs([x], dtype=np.float32), make_blobs(1, dtype=np.float32))
    np.testing.assert_allclose(y, _fork_bilinear(x, 9, 4), rtol=1e-6, atol=1e-6)


def test_nearest_by_factors_and_by_size():
    x = RNG.standard_normal((1, 2, 3, 4))
    (y,) = run_layer(make_layer('type: "Upsample" upsample_param { height_scale: 2 '
                                'width_scale: 3 mode: NEAREST }'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(3, axis=3))
    (z,) = run_layer(make_layer('type: "Upsample" upsample_param { height: 5 width: 6 '
                                'mode: NEAREST }'), make_blobs([x]), make_blobs(1))
    rows, cols = np.arange(5) * 3 // 5, np.arange(6) * 4 // 6
    np.testing.assert_array_equal(z, x[:, :, rows][:, :, :, cols])


def test_variant_choice_and_refusals():
    assert type(make_layer('type: "Upsample" upsample_param { scale: 2 }')) is UpsampleLayer
    assert type(make_layer('type: "Upsample" upsample_param { mode: NEAREST height_scale: 2 '
                           'width_scale: 2 }')) is SizeScaleUpsampleLayer
    x = make_blobs([np.zeros((1, 1, 3, 3))])
    with pytest.raises(NetError, match="height and width, or height_scale"):
        make_layer('type: "Upsample" upsample_param { height: 4 }').setup(x, make_blobs(1))
    with pytest.raises(NetError, match=">= 2"):
        make_layer('type: "Upsample" upsample_param { height_scale: 1 width_scale: 2 }').setup(
            x, make_blobs(1))


@pytest.mark.parametrize("params", ["height: 7 width: 5", "height_scale: 2 width_scale: 3 "
                                    "mode: NEAREST", "height_scale: 3 width_scale: 2"])
def test_upsample_gradient(params):
    check_layer_gradient(make_layer('type: "Upsample" upsample_param { %s }' % params),
                         make_blobs([RNG.standard_normal((2, 2, 3, 4))]), make_blobs(1))


def test_reorg_focus_is_the_ports_channel_major_space_to_depth():
    x = RNG.standard_normal((2, 3, 4, 6))
    layer = make_layer('type: "Reorg" reorg_param { stride: 2 }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert isinstance(layer, ReorgLayer) and layer.focus and y.shape == (2, 12, 2, 3)
    for oc in range(12):                       # the fork's reorg_kernel index arithmetic
        c, inner = oc // 4, oc % 4
        np.testing.assert_array_equal(y[:, oc], x[:, c, inner // 2::2, inner % 2::2])
    check_layer_gradient(make_layer('type: "Reorg" reorg_param { stride: 2 }'),
                         make_blobs([x]), make_blobs(1))
    four = make_layer('type: "Reorg" reorg_param { stride: 2 }')      # 4 channels: darknet's
    run_layer(four, make_blobs([RNG.standard_normal((1, 4, 4, 4))]), make_blobs(1))
    assert not four.focus


def test_onnx_export_of_both():
    pytest.importorskip("onnxruntime")
    from tests.test_onnx import make_net, roundtrip
    roundtrip(make_net('layer { name: "u" type: "Upsample" bottom: "data" top: "u" '
                       'upsample_param { height: 11 width: 5 } }'))
    roundtrip(make_net('layer { name: "u" type: "Upsample" bottom: "data" top: "u" '
                       'upsample_param { height_scale: 2 width_scale: 2 mode: NEAREST } }'))
    roundtrip(make_net('layer { name: "f" type: "Reorg" bottom: "data" top: "f" '
                       'reorg_param { stride: 2 } }', shapes=("data", (2, 3, 6, 8))))
