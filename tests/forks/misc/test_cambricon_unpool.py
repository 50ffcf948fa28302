import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _ref(x, k, s, p, method):
    """A transcription of the fork's FillMask and Forward_cpu loops (one channel)."""
    h, w = x.shape
    uh, uw = (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k
    y = np.zeros((uh, uw))
    mask = np.zeros((uh, uw))
    for i in range(h):
        for j in range(w):
            hs, ws = i * s - p, j * s - p
            mask[max(hs, 0):min(hs + k, uh), max(ws, 0):min(ws + k, uw)] += 1
    for i in range(h):
        for j in range(w):
            hs, ws = i * s - p, j * s - p
            if method == "FIXED":
                mh = min(max(int((hs + hs + k - 1) / 2), 0), uh - 1)
                mw = min(max(int((ws + ws + k - 1) / 2), 0), uw - 1)
                y[mh, mw] = x[i, j]
                continue
            he, we = min(hs + k, uh + p), min(ws + k, uw + p)
            area = (he - hs) * (we - ws)
            for a in range(max(hs, 0), min(he, uh)):
                for b in range(max(ws, 0), min(we, uw)):
                    v = x[i, j] / area if method == "DIV" else x[i, j]
                    y[a, b] += v / mask[a, b]
    return y


@pytest.mark.parametrize("method", ["FIXED", "DIV", "REP"])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1)])
def test_unpooling_matches_the_fork_loops(method, k, s, p):
    x = np.random.default_rng(0).standard_normal((2, 2, 3, 4))
    text = ('type: "UnPooling" unpooling_param { unpool: %s out_kernel_size: %d out_stride: %d '
            'out_pad: %d }' % (method, k, s, p))
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    for n in range(2):
        for c in range(2):
            np.testing.assert_allclose(y[n, c], _ref(x[n, c], k, s, p, method))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_unpooling_takes_its_geometry_from_a_second_bottom():
    x = np.random.default_rng(1).standard_normal((1, 1, 3, 3))
    like = np.zeros((1, 1, 6, 5))
    text = 'type: "UnPooling" unpooling_param { unpool: REP out_kernel_size: 1 }'
    y, = run_layer(make_layer(text), make_blobs([x, like]), make_blobs(1))
    # k = s = 2 both ways; pad (4 + 2 - 6) / 2 = 0 rows, floor((4 + 2 - 5) / 2) = 0 columns
    assert y.shape == (1, 1, 6, 6)
