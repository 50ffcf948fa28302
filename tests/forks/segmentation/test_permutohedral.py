"""The permutohedral lattice of CRF-as-RNN's caffe (forks/segmentation/permutohedral.py)."""
import numpy as np
import pytest

from caffepy.forks.segmentation.crfasrnn import _gaussian_kernel
from caffepy.forks.segmentation.permutohedral import Lattice
from caffepy.math import kernels


def _features(H, W):
    # 5-d bilateral-like features: positions / 1.5 and three colour channels / 60
    p = np.arange(H * W)
    y, x = np.divmod(p, W)
    rgb = np.stack([(7 * p) % 11, (5 * p + 3) % 13, (p * p) % 7], axis=1) * 10.0
    return np.concatenate([np.stack([x, y], axis=1) / 1.5, rgb / 60.0], axis=1).astype(np.float32)


# torrvision/caffe's ModifiedPermutohedral (init + compute, the x86-64 SSE build) on
# _features(3, 5) and the values below: 67 lattice vertices (15 points are not a multiple of 4,
# so the fork's last SSE block adds the vertices of one point at feature 0), and these outputs
# (float32, printed to 7 digits)
FORK_M = 67
FORK_OUT = [[0.6918092, 0.263607, 0.3202536, 0.3863041, 0.637201, 0.2786982, 0.3074959,
             0.6054589, 0.6508576, 0.5906518, 0.1372554, 0.2788428, 0.6331488, 0.558422,
             0.3260236],
            [0.2276289, 0.6412426, 0.5242353, 0.77573, 0.6745266, 0.7398596, 0.845563,
             1.0411341, 1.080572, 1.0419735, 0.7513818, 0.8817454, 0.9885151, 1.2620635,
             0.9400707]]
FORK_BACK = [[0.7256301, 0.1889929, 0.2293001, 0.2584067, 0.6800071, 0.3517609, 0.2243254,
              0.4952101, 0.5896833, 0.5411558, 0.1315762, 0.3125262, 0.617696, 0.5171565,
              0.1718944],
             [0.3275129, 0.559476, 0.4288678, 0.6344675, 0.8986789, 0.8890771, 0.7243979,
              1.0721145, 1.0699812, 1.160496, 0.8060668, 0.8922521, 1.0233029, 1.2360281,
              0.7858083]]


@pytest.mark.parametrize("numba", [True, False])
def test_lattice_matches_the_fork(numba):
    if numba and not kernels.available():
        pytest.skip("numba is not installed")
    values = np.stack([(np.arange(15) % 4 == 0).astype(np.float32),
                       np.linspace(0, 1, 15, dtype=np.float32)])
    lat = Lattice(_features(3, 5))
    assert lat.M == FORK_M
    np.testing.assert_allclose(lat.bary.sum(axis=1), 1, atol=2e-7)
    with kernels.disabled() if not numba else _nothing():
        np.testing.assert_allclose(lat.compute(values), FORK_OUT, atol=1e-6)
        np.testing.assert_allclose(lat.compute(values, reverse=True), FORK_BACK, atol=1e-6)
        # float64 values: the same numbers to float32 rounding
        np.testing.assert_allclose(lat.compute(values.astype(np.float64)), FORK_OUT, atol=1e-6)


class _nothing(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_lattice_reverse_is_the_transpose():
    rng = np.random.default_rng(0)
    H, W = 9, 11
    feat = np.concatenate([_features(H, W), rng.normal(0, 1, (H * W, 1))], axis=1)
    lat = Lattice(feat)
    u, w = rng.standard_normal((2, 3, H * W))
    for numba in (True, False):
        with kernels.disabled() if not numba else _nothing():
            lhs = np.sum(w * lat.compute(u))
            rhs = np.sum(u * lat.compute(w, reverse=True))
            assert abs(lhs - rhs) <= 1e-10 * abs(lhs)


def _scene(rng, H, W):
    """A natural-image-like RGB picture: a horizontal ramp, four flat discs, noise (sd 3)."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    img = np.zeros((3, H, W)) + (x / W * 60)[None] + np.array([20.0, 40, 60])[:, None, None]
    for _ in range(4):
        cy, cx, r = rng.uniform(0, H), rng.uniform(0, W), rng.uniform(4, H / 2)
        img[:, (y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)[:, None]
    return img + rng.normal(0, 3, img.shape)


@pytest.mark.parametrize("theta", [(3, None, None), (10, 10, "b"), (20, 13, "b"), (80, 13, "b")])
def test_lattice_approximates_the_dense_gaussian(theta):
    # The normalised filters (K p) / (K 1) of the mean-field step, on class probabilities p of a
    # 40 x 48 scene, lattice vs the exact dense kernel exp(-|f_p - f_q|^2 / 2). The lattice
    # interpolates each point onto the d + 1 vertices of its simplex and blurs with the 3-tap
    # [1/2, 1, 1/2] kernel along each of the d + 1 lattice axes: an approximation of the Gaussian
    # whose error, measured over six scenes, is at most 0.015 (spatial, theta 3) / 0.022
    # (bilateral) with means under 0.002 (probabilities in [0, 1]). Tolerances: twice those.
    # (Points isolated in feature space -- a lone noisy pixel at theta_beta 3 -- are worse, up to
    # ~0.25: the exact filter returns p there, the lattice still mixes in its vertices' values.)
    rng = np.random.default_rng(7)
    H, W = 40, 48
    y, x = np.divmod(np.arange(H * W, dtype=np.float64), W)
    pos = np.stack([x, y], axis=1)
    alpha, beta, kind = theta
    feat = pos / alpha
    if kind:
        feat = np.concatenate([feat, _scene(rng, H, W).reshape(3, -1).T / beta], axis=1)
    feat = feat.astype(np.float32)
    q = rng.standard_normal((5, H * W)) * 2
    prob = np.exp(q) / np.exp(q).sum(axis=0)
    k = _gaussian_kernel(feat.astype(np.float64))
    exact = (k @ prob.T).T / k.sum(axis=1)
    lat = Lattice(feat)
    approx = lat.compute(prob) / lat.compute(np.ones(H * W))
    err = np.abs(approx - exact)
    assert err.max() < 0.045 and err.mean() < 0.004, (err.max(), err.mean())
