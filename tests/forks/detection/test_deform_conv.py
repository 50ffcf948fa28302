"""makefile/frcnn's DeformableConvolution (forks/detection/deform_conv.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = ('type: "DeformableConvolution" deformable_convolution_param { num_output: 2 '
        'kernel_size: 3 %s deformable_group: 2 weight_filler { type: "gaussian" std: 0.5 } '
        'bias_filler { type: "constant" value: 0.1 } }')


def _ref(x, off, w, b, pad, dg=2):
    """Direct loops: every tap sampled bilinearly at its offset position (0 outside)."""
    N, C, H, W = x.shape
    O = w.shape[0]
    Ho, Wo = H + 2 * pad - 2, W + 2 * pad - 2
    out = np.zeros((N, O, Ho, Wo))
    for n in range(N):
        o = off[n].reshape(dg, 18, Ho, Wo)
        for c in range(C):
            g = c // (C // dg)
            for i in range(3):
                for j in range(3):
                    for y in range(Ho):
                        for xx in range(Wo):
                            h = y - pad + i + o[g, 2 * (3 * i + j), y, xx]
                            ww = xx - pad + j + o[g, 2 * (3 * i + j) + 1, y, xx]
                            if not (0 <= h < H and 0 <= ww < W):
                                continue
                            h0, w0 = int(np.floor(h)), int(np.floor(ww))
                            h1, w1 = min(h0 + 1, H - 1), min(w0 + 1, W - 1)
                            lh, lw = (h - h0, ww - w0)
                            if h0 >= H - 1:
                                lh = 0.0
                            if w0 >= W - 1:
                                lw = 0.0
                            v = ((1 - lh) * (1 - lw) * x[n, c, h0, w0] + (1 - lh) * lw * x[n, c, h0, w1]
                                 + lh * (1 - lw) * x[n, c, h1, w0] + lh * lw * x[n, c, h1, w1])
                            out[n, :, y, xx] += w[:, c, i, j] * v
    return out + b[None, :, None, None]


def test_forward_matches_direct_sampling():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 5))
    off = rng.uniform(-1.5, 1.5, (2, 36, 5, 5))
    layer = make_layer(TEXT % "pad: 1")
    (y,) = run_layer(layer, make_blobs([x, off]), make_blobs(1))
    np.testing.assert_allclose(y, _ref(x, off, layer.blobs[0].data, layer.blobs[1].data, 1))


def test_gradients_with_a_one_by_one_output():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 3, 3))
    off = rng.uniform(-0.4, 0.4, (1, 36, 3, 3))
    check_layer_gradient(make_layer(TEXT % ""), make_blobs([x, off]), make_blobs(1))


def test_offset_and_param_gradients_with_padding():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 4, 4))
    off = rng.uniform(-0.4, 0.4, (1, 36, 4, 4))
    check_layer_gradient(make_layer(TEXT % "pad: 1"), make_blobs([x, off]), make_blobs(1),
                         check_bottom=[])
    # the offsets' gradient comes with propagate_down[0] (the fork's backward reads only it)
    layer, bottom, top = make_layer(TEXT % "pad: 1"), make_blobs([x, off]), make_blobs(1)
    run_layer(layer, bottom, top)
    dy = rng.standard_normal(top[0].shape)
    top[0].diff[...] = dy
    layer.backward(top, [True, True], bottom)
    w, b = layer.blobs[0].data, layer.blobs[1].data
    for idx in [(0, 0, 1, 1), (0, 7, 2, 3), (0, 20, 0, 2), (0, 35, 3, 0)]:
        e = np.zeros_like(off)
        e[idx] = 1e-6
        num = ((_ref(x, off + e, w, b, 1) - _ref(x, off - e, w, b, 1)) * dy).sum() / 2e-6
        assert bottom[1].diff[idx] == pytest.approx(num, rel=1e-4, abs=1e-6)


def test_feature_gradient_covers_the_first_columns_only():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 4, 4))
    off = np.zeros((1, 36, 4, 4))
    layer, bottom, top = make_layer(TEXT % "pad: 1"), make_blobs([x, off]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    # 36 column entries: channel 0, tap (0, 0), output positions 0 .. 15, which read the pixels
    # up and to the left of each output: rows and columns 0 .. 2 of channel 0
    assert bottom[0].diff[0, 0, :3, :3].all() and not bottom[0].diff[0, 0, 3].any()
    assert not bottom[0].diff[0, 1:].any()


def test_bad_offsets_give_one_line():
    with pytest.raises(CaffeError, match="offsets must be"):
        run_layer(make_layer(TEXT % ""), make_blobs([np.zeros((1, 4, 3, 3)),
                                                     np.zeros((1, 18, 3, 3))]), make_blobs(1))
