"""ReLU's numpy passes (caffepy.math.cpu.relu_into below PARALLEL_MIN elements) against Caffe's
``std::max(x, 0) + negative_slope * std::min(x, 0)``, byte for byte: signed zeros, infinities
(-inf at slope 0 gives Caffe's NaN), NaN, subnormals, both float types, in place or not."""
import numpy as np
import pytest

from caffepy.math import cpu


def caffe_relu(x, slope):
    """std::max(a, b) is (a < b) ? b : a and std::min(a, b) is (b < a) ? b : a, written out."""
    t = x.dtype.type
    hi = np.array([t(0) if v < 0 else v for v in x.ravel()], x.dtype)
    lo = np.array([t(0) if t(0) < v else v for v in x.ravel()], x.dtype)
    with np.errstate(all="ignore"):
        return (hi + t(slope) * lo).reshape(x.shape)


def special_values(dtype, n, seed):
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.5, -2.5, info.max, -info.max,
                         info.tiny, -info.tiny, info.smallest_subnormal,
                         -info.smallest_subnormal], dtype)
    x = rng.standard_normal(n).astype(dtype)
    pick = rng.random(n) < 0.4
    x[pick] = specials[rng.integers(0, len(specials), n)[pick]]
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.0, 0.1, -0.5])
@pytest.mark.parametrize("neg_inf", [True, False])
@pytest.mark.parametrize("in_place", [True, False])
def test_numpy_relu_writes_caffes_bytes(dtype, slope, neg_inf, in_place):
    x = special_values(dtype, 301, seed=int(slope * 10) + 5 + 7 * neg_inf)
    if not neg_inf:
        x[x == -np.inf] = -1.0
    assert x.size < cpu.PARALLEL_MIN and (np.isneginf(x).any() == neg_inf)
    want = caffe_relu(x, slope)
    y = x if in_place else np.empty_like(x)
    with np.errstate(all="ignore"):
        cpu.relu_into(x, slope, y)
    assert y.tobytes() == want.tobytes()


def test_slope_zero_keeps_negative_zero_and_makes_positive_zeros():
    x = np.array([-0.0, -3.0, 0.0, -np.inf, np.nan], np.float32)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        cpu.relu_into(x, 0.0, y)
    assert np.signbit(y[0]) and not np.signbit(y[1]) and y[1] == 0 and not np.signbit(y[2])
    assert np.isnan(y[3]) and np.isnan(y[4])


def test_empty_blob():
    x = np.empty((0, 3), np.float32)
    cpu.relu_into(x, 0.0, x)
    assert x.shape == (0, 3)
