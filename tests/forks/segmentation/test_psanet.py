"""PSANet's PointwiseSpatialAttention (hszhao/PSANet; forks/segmentation/psanet.py)."""
import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _psa(kind, extra=""):
    return make_layer('type: "PointwiseSpatialAttention" bottom: "x" bottom: "m" top: "y" '
                      'pointwise_spatial_attention_param { psa_type: %s %s }' % (kind, extra))


def test_numbers_1x2_map_by_hand():
    """H = 1, W = 2: the default window is 1 x 3 (a = 0, b = 1), normalisation 3."""
    x = np.array([[[[1.0, 2.0]], [[-1.0, 0.5]]]])                 # N=1, C=2, H=1, W=2
    m = np.arange(1.0, 7.0).reshape(1, 3, 1, 2)                    # M[j, w]
    M = m[0, :, 0, :]
    X = x[0, :, 0, :]
    # COLLECT: A[p, q] = M[j, q] for p = q + j - 1 inside the map
    A = np.array([[M[1, 0], M[0, 1]], [M[2, 0], M[1, 1]]])
    y, = run_layer(_psa("COLLECT"), make_blobs([x, m]), make_blobs(1))
    np.testing.assert_allclose(y[0, :, 0, :], X @ A / 3)
    # DISTRIBUTE: A[q, p] = M[j, q]
    A = np.array([[M[1, 0], M[2, 0]], [M[0, 1], M[1, 1]]])
    y, = run_layer(_psa("DISTRIBUTE"), make_blobs([x, m]), make_blobs(1))
    np.testing.assert_allclose(y[0, :, 0, :], X @ A / 3)
    # softmax over axis 1 of the buffer, the zero cells included (none here), factor 1
    y, = run_layer(_psa("COLLECT", "is_softmax: true normalization_factor: 1"),
                   make_blobs([x, m]), make_blobs(1))
    A = np.array([[M[1, 0], M[0, 1]], [M[2, 0], M[1, 1]]])
    S = np.exp(A) / np.exp(A).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(y[0, :, 0, :], X @ S)


@pytest.mark.parametrize("kind, extra", [("COLLECT", ""), ("DISTRIBUTE", "is_softmax: true"),
                                         ("COLLECT", "is_softmax: true attention_mask_height: 3 "
                                                     "attention_mask_width: 3")])
def test_gradient(kind, extra):
    rng = np.random.default_rng(4)
    H, W = 2, 3
    mh, mw = (3, 3) if "height" in extra else (2 * H - 1, 2 * W - 1)
    x, m = rng.standard_normal((2, 3, H, W)), rng.standard_normal((2, mh * mw, H, W))
    check_layer_gradient(_psa(kind, extra), make_blobs([x, m]), make_blobs(1))


def test_mask_channels_checked():
    with pytest.raises(ShapeError, match="expected attention_mask_height"):
        run_layer(_psa("COLLECT"), make_blobs([np.zeros((1, 2, 2, 2)), np.zeros((1, 8, 2, 2))]),
                  make_blobs(1))
