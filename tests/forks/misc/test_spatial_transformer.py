import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _reference(u, theta, kind, ho, wo):
    n, c, h, w = u.shape
    out = np.zeros((n, c, ho, wo))
    for b in range(n):
        t = theta[b].ravel()
        for i in range(ho):
            for j in range(wo):
                xt, yt = j / (wo - 1) * 2 - 1, i / (ho - 1) * 2 - 1
                x = t[0] * xt + t[1] * yt + t[2]
                y = t[3] * xt + t[4] * yt + t[5]
                if kind == "projective":
                    z = 1 / (t[6] * xt + t[7] * yt + 1)
                    x, y = x * z, y * z
                x = min(max((x + 1) / 2 * (w - 1), 0), w - 1)
                y = min(max((y + 1) / 2 * (h - 1), 0), h - 1)
                for hh in range(int(np.floor(y)), int(np.ceil(y)) + 1):
                    for ww in range(int(np.floor(x)), int(np.ceil(x)) + 1):
                        out[b, :, i, j] += u[b, :, hh, ww] * (1 - abs(x - ww)) * (1 - abs(y - hh))
    return out


def _theta(kind, n, rng):
    base = [1, 0, 0, 0, 1, 0] + ([0, 0] if kind == "projective" else [])
    return np.array(base) + 0.15 * rng.randn(n, len(base))


@pytest.mark.parametrize("kind", ["affine", "projective"])
def test_forward_matches_reference(kind):
    rng = np.random.RandomState(0)
    u, theta = rng.randn(2, 3, 5, 6), _theta(kind, 2, rng)
    theta[1, 2] = 1.5  # partly outside: border values
    layer = make_layer('type: "SpatialTransformer" st_param { transform_type: "%s" output_H: 4 '
                       'output_W: 7 }' % kind)
    (v,) = run_layer(layer, make_blobs([u, theta]), make_blobs(1))
    np.testing.assert_allclose(v, _reference(u, theta, kind, 4, 7), atol=1e-12)


def test_identity_and_default_size():
    u = np.random.RandomState(1).randn(1, 2, 4, 5)
    (v,) = run_layer(make_layer('type: "SpatialTransformer"'),
                     make_blobs([u, np.array([[1.0, 0, 0, 0, 1, 0]])]), make_blobs(1))
    np.testing.assert_allclose(v, u, atol=1e-12)


@pytest.mark.parametrize("kind", ["affine", "projective"])
def test_gradient(kind):
    rng = np.random.RandomState(2)
    u, theta = rng.randn(2, 2, 4, 5), _theta(kind, 2, rng)
    layer = make_layer('type: "SpatialTransformer" st_param { transform_type: "%s" output_H: 3 '
                       'output_W: 4 }' % kind)
    check_layer_gradient(layer, make_blobs([u, theta]), make_blobs(1), stepsize=1e-5)


def test_refusals():
    with pytest.raises(CaffeError, match="similarity"):
        run_layer(make_layer('type: "SpatialTransformer" st_param { transform_type: "similarity" }'),
                  make_blobs([np.ones((1, 1, 3, 3)), np.ones((1, 4))]), make_blobs(1))
    with pytest.raises(CaffeError, match="8 projective"):
        run_layer(make_layer('type: "SpatialTransformer" st_param { transform_type: "projective" }'),
                  make_blobs([np.ones((1, 1, 3, 3)), np.ones((1, 6))]), make_blobs(1))
