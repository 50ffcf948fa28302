import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _att_ref(f, a, k, pad, stride, dil, global_):
    n, c, h, w = f.shape
    fp = np.pad(f, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h1, w1 = a.shape[2:]
    y = np.zeros((n, c, h1, w1))
    for i in range(h1):
        for j in range(w1):
            oi, oj = (0, 0) if global_ else (i * stride, j * stride)
            win = fp[:, :, oi:oi + dil * (k - 1) + 1:dil, oj:oj + dil * (k - 1) + 1:dil]
            y[:, :, i, j] = np.einsum("ncab,nab->nc", win, a[:, :, i, j].reshape(n, k, k))
    return y


@pytest.mark.parametrize("kind,field", [("AttPooling", "att_pooling_param"),
                                        ("PwAttend", "pw_attend_param")])
def test_local_attention_values_and_gradient(kind, field):
    rng = np.random.default_rng(0)
    f = rng.standard_normal((2, 3, 5, 4))
    a = rng.standard_normal((2, 9, 5, 4))
    text = 'type: "%s" %s { att_mode: LOCAL kernel_size: 3 pad: 1 }' % (kind, field)
    (y,) = run_layer(make_layer(text), make_blobs([f, a]), make_blobs(1))
    np.testing.assert_allclose(y, _att_ref(f, a, 3, 1, 1, 1, False), atol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([f, a]), make_blobs(1))


def test_local_attention_strided_dilated():
    rng = np.random.default_rng(1)
    f = rng.standard_normal((1, 2, 7, 7))
    a = rng.standard_normal((1, 4, 3, 3))
    text = ('type: "AttPooling" att_pooling_param { att_mode: LOCAL kernel_size: 2 pad: 1 '
            'stride: 3 dilation: 2 }')
    (y,) = run_layer(make_layer(text), make_blobs([f, a]), make_blobs(1))
    np.testing.assert_allclose(y, _att_ref(f, a, 2, 1, 3, 2, False), atol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([f, a]), make_blobs(1))


def test_global_attention_values_and_gradient():
    rng = np.random.default_rng(2)
    f = rng.standard_normal((2, 3, 7, 7))
    a = rng.standard_normal((2, 9, 7, 7))
    text = 'type: "AttPooling" att_pooling_param { att_mode: GLOBAL kernel_size: 3 dilation: 3 }'
    (y,) = run_layer(make_layer(text), make_blobs([f, a]), make_blobs(1))
    np.testing.assert_allclose(y, _att_ref(f, a, 3, 0, 1, 3, True), atol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([f, a]), make_blobs(1))
    # without kernel_size the window is the whole map
    a2 = rng.standard_normal((1, 16, 2, 3))
    f2 = rng.standard_normal((1, 2, 4, 4))
    (y2,) = run_layer(make_layer('type: "AttPooling" att_pooling_param { att_mode: GLOBAL }'),
                      make_blobs([f2, a2]), make_blobs(1))
    ref = np.einsum("ncj,njp->ncp", f2.reshape(1, 2, 16), a2.reshape(1, 16, 6))
    np.testing.assert_allclose(y2, ref.reshape(1, 2, 2, 3))


def test_attention_geometry_is_checked():
    with pytest.raises(NetError, match="attention"):
        run_layer(make_layer('type: "AttPooling" att_pooling_param { kernel_size: 3 }'),
                  make_blobs([np.zeros((1, 2, 5, 5)), np.zeros((1, 9, 4, 4))]), make_blobs(1))


def _lstm_ref(x, blobs, out, x_dir, peephole):
    """Per-patch loop over rows (X_DIR) or columns (Y_DIR), 1 x 1 patches."""
    n, c, h, w = x.shape
    top = np.zeros((n, 2 * out, h, w))
    sig = lambda v: 1 / (1 + np.exp(-v))      # noqa: E731
    lines, steps = (h, w) if x_dir else (w, h)
    for d in range(2):
        wi, wc, wo, wf, wic, woc, wfc, bi, bc, bo, bf = blobs[d * 11:(d + 1) * 11]
        for b in range(n):
            for r in range(lines):
                hh, s = np.zeros(out), np.zeros(out)
                order = range(steps) if d == 0 else reversed(range(steps))
                for t in order:
                    yx = (r, t) if x_dir else (t, r)
                    z = np.concatenate([x[b, :, yx[0], yx[1]], hh])
                    i = sig(wi @ z + bi + (wic @ s if peephole else 0))
                    f = sig(wf @ z + bf + (wfc @ s if peephole else 0))
                    s = np.tanh(wc @ z + bc) * i + f * s
                    o = sig(wo @ z + bo + (woc @ s if peephole else 0))
                    hh = o * np.tanh(s)
                    top[b, d * out:(d + 1) * out, yx[0], yx[1]] = hh
    return top


@pytest.mark.parametrize("direction,peephole", [("X_DIR", "true"), ("Y_DIR", "false")])
def test_renet_lstm_values_and_gradient(direction, peephole):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 3, 4))
    text = ('type: "ReNetLSTM" renet_lstm_param { direction: %s num_output: 2 peephole: %s '
            'general_weight_filler { type: "uniform" min: -0.5 max: 0.5 } '
            'general_bias_filler { type: "uniform" min: -0.5 max: 0.5 } '
            'forget_gate_bias_filler { type: "constant" value: 1 } '
            'input_gate_bias_filler { type: "uniform" min: -0.5 max: 0.5 } }'
            % (direction, peephole))
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert len(layer.blobs) == 22 and layer.blobs[0].shape == (2, 4)
    np.testing.assert_array_equal(layer.blobs[10].data, 1)
    ref = _lstm_ref(x, [b.data for b in layer.blobs], 2, direction == "X_DIR",
                    peephole == "true")
    np.testing.assert_allclose(y, ref, atol=1e-12)
    if peephole == "false":
        np.testing.assert_array_equal(layer.blobs[4].data, 0)     # unfilled, as the fork
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_renet_lstm_patches():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 4, 6))
    text = ('type: "ReNetLSTM" renet_lstm_param { direction: Y_DIR num_output: 3 patch_height: 2 '
            'patch_width: 3 general_weight_filler { type: "gaussian" std: 0.3 } }')
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 6, 2, 2) and layer.blobs[0].shape == (3, 12 + 3)
    # the top-left patch starts the forward sweep of column 0: h = o tanh(c~ i)
    wi, wc, wo = (layer.blobs[k].data for k in range(3))
    z = np.concatenate([x[0, :, :2, :3].reshape(-1), np.zeros(3)])
    sig = lambda v: 1 / (1 + np.exp(-v))      # noqa: E731
    s = np.tanh(wc @ z) * sig(wi @ z)
    np.testing.assert_allclose(y[0, :3, 0, 0], sig(wo @ z + layer.blobs[5].data @ s) * np.tanh(s))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
