import numpy as np
import pytest

from caffepy.testing import make_blobs, make_layer

FLT_MIN = float(np.finfo(np.float32).tiny)


def _ref(x, sp, k, method):
    """A transcription of the fork's Forward_cpu / Backward_cpu loops (top diff = dy)."""
    n, c, h, w = x.shape
    hs, ws = sp.shape[2:]
    flat_sp = sp.reshape(-1)
    out = np.zeros((n, c, k))
    acc = np.zeros((n, c, k))
    mask = np.zeros((n, c, h * w), dtype=int)
    if method == "MAX":
        out[...] = FLT_MIN
    for b in range(n):
        for ch in range(c):
            for i in range(h):
                for j in range(w):
                    hc = int(np.floor(np.float32(hs) / np.float32(h) * (i + 0.5) + 0.5))
                    wc = int(np.floor(np.float32(ws) / np.float32(w) * (j + 0.5) + 0.5))
                    o = int(flat_sp[b * hs * ws + hc * ws + wc])
                    v = x[b, ch, i, j]
                    if method == "AVE":
                        out[b, ch, o] += v
                        acc[b, ch, o] += 1
                        mask[b, ch, i * w + j] = o
                    elif out[b, ch, o] < v:
                        out[b, ch, o] = v
                        acc[b, ch, o] = i * w + j
    if method == "AVE":
        for b in range(n):
            for ch in range(c):
                for q in range(1, k - 1):
                    if acc[b, ch, q] == 0:
                        out[b, ch, q] = out[b, ch, q + 1] + out[b, ch, q - 1]
                        acc[b, ch, q] = acc[b, ch, q + 1] + acc[b, ch, q - 1]
        acc[acc == 0] = 1
        out /= acc
    return out, acc, mask


@pytest.mark.parametrize("method", ["AVE", "MAX"])
def test_superpixel_pooling_matches_the_fork_loops(method):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3, 4))
    sp = rng.integers(0, 4, (2, 1, 6, 8)).astype(float)
    sp[:, :, :, :] = np.where(sp == 2, 1, sp)          # label 2 empty: filled from 1 and 3
    text = ('type: "SuperpixelPooling" superpixel_pooling_param { num_output: 5 pool: %s }'
            % method)
    layer = make_layer(text)
    bottom, top = make_blobs([x, sp]), make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    out, acc, mask = _ref(x, sp, 5, method)
    np.testing.assert_allclose(top[0].data[..., 0], out)
    dy = rng.standard_normal((2, 2, 5))
    top[0].diff[...] = dy[..., None]
    layer.backward(top, [True, False], bottom)
    want = np.zeros((2, 2, 12))
    for b in range(2):
        for ch in range(2):
            if method == "AVE":
                want[b, ch] = dy[b, ch, mask[b, ch]]
            else:
                for q in range(5):
                    want[b, ch, int(acc[b, ch, q])] = dy[b, ch, q]
    np.testing.assert_allclose(bottom[0].diff.reshape(2, 2, 12), want)
