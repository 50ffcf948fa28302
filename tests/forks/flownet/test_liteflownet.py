import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def warp_ref(img, coords):
    """LiteFlowNet's WarpLayer::Forward_cpu as loops."""
    N, C, H, W = img.shape
    out = np.zeros(img.shape)

    def get(n, c, x, y):
        return 0.0 if x < 0 or x > W - 1 or y < 0 or y > H - 1 else img[n, c, y, x]
    for n in range(N):
        for h in range(H):
            for w in range(W):
                x, y = coords[n, 0, h, w], coords[n, 1, h, w]
                x0, y0 = int(np.floor(x)), int(np.floor(y))
                wx, wy = x - x0, y - y0
                for c in range(C):
                    out[n, c, h, w] = ((1 - wx) * (1 - wy) * get(n, c, x0, y0)
                                       + (1 - wx) * wy * get(n, c, x0, y0 + 1)
                                       + wx * (1 - wy) * get(n, c, x0 + 1, y0)
                                       + wx * wy * get(n, c, x0 + 1, y0 + 1))
    return out


def test_warp_forward_matches_fork_loops():
    rng = np.random.default_rng(0)
    img = rng.standard_normal((2, 3, 4, 5))
    coords = rng.uniform(-1.5, 5.5, (2, 2, 4, 5))
    (y,) = run_layer(make_layer('type: "Warp"'), make_blobs([img, coords]), make_blobs(1))
    np.testing.assert_allclose(y, warp_ref(img, coords), rtol=1e-12)
    # the identity grid gives the image back
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(4.0)))[None].repeat(2, 0)
    (y,) = run_layer(make_layer('type: "Warp"'), make_blobs([img, grid]), make_blobs(1))
    np.testing.assert_allclose(y, img)


def test_warp_gradient():
    rng = np.random.default_rng(1)
    img = rng.standard_normal((1, 2, 3, 4))
    coords = rng.integers(-1, 4, (1, 2, 3, 4)) + rng.uniform(0.2, 0.8, (1, 2, 3, 4))
    check_layer_gradient(make_layer('type: "Warp"'), make_blobs([img, coords]), make_blobs(1),
                         stepsize=1e-4)


def test_warp_shape_check():
    with pytest.raises(ShapeError, match="coords"):
        run_layer(make_layer('type: "Warp"'),
                  make_blobs([np.ones((1, 3, 4, 5)), np.ones((1, 2, 4, 4))]), make_blobs(1))
