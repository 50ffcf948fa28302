import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer


def _im2parity_ref(im, kh, kw, ph, pw, sh, sw, dh, dw, ignore):
    """A transcription of the fork's im2parity_cpu for one image."""
    c, h, w = im.shape
    ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wo = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    col = np.zeros((kh * kw, ho, wo))
    for c_col in range(c * kh * kw):
        wof, hof, c_im = c_col % kw, (c_col // kw) % kh, c_col // kh // kw
        for u in range(ho):
            for v in range(wo):
                hi, wi = u * sh - ph + hof * dh, v * sw - pw + wof * dw
                chi, cwi = u * sh - ph + (kh // 2) * dh, v * sw - pw + (kw // 2) * dw
                k = c_col % (kh * kw)
                if 0 <= chi < h and 0 <= cwi < w:
                    centre = int(im[c_im, chi, cwi])
                    here = int(im[c_im, hi, wi]) if 0 <= hi < h and 0 <= wi < w else 0
                    if ignore is not None and (here == ignore or centre == ignore):
                        col[k, u, v] = ignore
                    else:
                        col[k, u, v] = here == centre
                else:
                    col[k, u, v] = ignore
    return col


@pytest.mark.parametrize("conv,geom,ignore", [
    ("kernel_size: 3 pad: 1", (3, 3, 1, 1, 1, 1, 1, 1), None),
    ("kernel_h: 3 kernel_w: 2 pad: 2 stride: 2 dilation: 2", (3, 2, 2, 2, 2, 2, 2, 2), 255),
])
def test_im2parity_matches_the_fork_loops(conv, geom, ignore):
    rng = np.random.default_rng(0)
    lab = rng.integers(0, 3, (2, 2, 6, 7)).astype(float)
    if ignore is not None:
        lab[0, 1, 2, 3] = ignore
    text = 'type: "Im2parity" convolution_param { %s }' % conv
    if ignore is not None:
        text += ' im2parity_param { ignore_label: %d }' % ignore
    y, = run_layer(make_layer(text), make_blobs([lab]), make_blobs(1))
    for n in range(2):
        np.testing.assert_array_equal(y[n], _im2parity_ref(lab[n], *geom, ignore))


def test_im2parity_needs_an_ignore_label_for_centres_outside():
    text = 'type: "Im2parity" convolution_param { kernel_size: 3 pad: 3 }'
    with pytest.raises(CaffeError, match="ignore_label"):
        run_layer(make_layer(text), make_blobs([np.zeros((1, 1, 4, 4))]), make_blobs(1))


def test_dist_loss_matches_the_fork_loops():
    rng = np.random.default_rng(1)
    d = rng.random((2, 9, 3, 3)) * 3
    q = rng.integers(0, 2, (2, 9, 3, 3)).astype(float)
    q[1, 0, 0, :] = 255
    text = ('type: "DistLoss" convolution_param { kernel_size: 3 } '
            'dist_loss_param { alpha: 0.5 beta: 2 ignore_label: 255 }')
    layer = make_layer(text)
    bottom, top = make_blobs([d, q]), make_blobs(1)
    loss, = run_layer(layer, bottom, top)
    want_loss, want_diff = 0.0, np.zeros(d.shape)
    for idx in np.ndindex(d.shape):
        p = int(q[idx])
        if p == 255:
            continue
        m = max(d[idx] - 0.5, 0) if p else max(2 - d[idx], 0)
        want_diff[idx] = m if p else -m
        want_loss += m
    np.testing.assert_allclose(loss, want_loss / d.size)
    top[0].diff[...] = 7.0                     # the fork's backward ignores the top's diff
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_diff / d.size)
    with pytest.raises(CaffeError, match="alpha < beta"):
        make_layer('type: "DistLoss" convolution_param { kernel_size: 3 } '
                   'dist_loss_param { alpha: 2 beta: 1 }').setup(make_blobs([d, q]),
                                                                  make_blobs(1))
