"""caffe_powx on float32 blobs: the vector kernels of caffepy.math._numba_powf against the C
library's ``powf`` element by element (Caffe's ``std::pow``), byte for byte: a sweep over the
whole float range, special inputs in and out of 8-element blocks, lengths that are not a multiple
of 8, in place; and the choice of variant, which falls back to the C library when a kernel does
not give its bytes."""
import numpy as np
import pytest

from caffepy.math import kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")
EXPONENTS = [-0.75, 0.5, 2.0, -1.0, -1.0 / 3, 1.7, -0.9, 3.0]


def _libm():
    from caffepy.math import _numba_libm
    return _numba_libm


def _sweep(step, offset):
    """Every ``step``-th bit pattern of the 2^32 floats: all signs, exponents, NaNs."""
    return (np.arange(offset, 1 << 32, step, dtype=np.uint64).astype(np.uint32)).view(np.float32)


@needs_numba
@pytest.mark.parametrize("i", range(len(EXPONENTS)))
def test_each_variant_is_the_c_librarys_powf_where_chosen(i):
    from caffepy.math import _numba_powf
    libm = _libm()
    b = EXPONENTS[i]
    a = _sweep(4099, 517 * i)
    want = np.empty_like(a)
    libm.powx_libm(a, np.float32(b), want)
    chosen = libm._powf_variant(b)
    for name, fn in _numba_powf.VARIANTS.items():
        got = np.empty_like(a)
        fn(a, np.float32(b), got)
        same = got.view(np.uint32) == want.view(np.uint32)
        both_nan = np.isnan(got) & np.isnan(want)
        if fn is chosen:
            assert np.all(same | both_nan), (name, a[~(same | both_nan)][:5])
        # whichever variant: ordinary inputs differ from the C library in at most a few
        # rounding cases (none at all for the variant glibc's build matches)
        assert np.count_nonzero(~(same | both_nan)) <= 4, name


@needs_numba
@pytest.mark.parametrize("n", [1, 7, 8, 9, 63, 64, 65, 1001])
def test_powx_blocks_with_special_inputs_and_tails(n):
    """Zero, subnormal, negative, infinite and NaN inputs anywhere, in place or not."""
    libm = _libm()
    rng = np.random.default_rng(n)
    a = (rng.random(n) * 10).astype(np.float32)
    specials = np.array([0.0, -0.0, 1e-45, 1e-40, -3.0, -2.0, np.inf, -np.inf, np.nan,
                         np.finfo(np.float32).max, np.finfo(np.float32).tiny], np.float32)
    pick = rng.random(n) < 0.1
    a[pick] = specials[rng.integers(0, len(specials), n)[pick]]
    for b in (-0.75, 2.0, 3.0, -1.0):
        want = np.empty_like(a)
        libm.powx_libm(a, np.float32(b), want)
        out = np.empty_like(a)
        kernels.get().powx(a, np.float32(b), out)
        assert out.tobytes() == want.tobytes()
        inplace = a.copy()
        kernels.get().powx(inplace, np.float32(b), inplace)
        assert inplace.tobytes() == want.tobytes()


@needs_numba
def test_overflow_and_underflow_as_the_c_library():
    """y log2 x past the float range: +inf above, +0 at or below -150, subnormals between."""
    libm = _libm()
    a = np.geomspace(1e-30, 3e38, 4000).astype(np.float32)
    seen = np.zeros(3, bool)
    for b in (5.0, -5.0, 1.3, -1.3, 0.01):
        want = np.empty_like(a)
        libm.powx_libm(a, np.float32(b), want)
        out = np.empty_like(a)
        kernels.get().powx(a, np.float32(b), out)
        assert out.tobytes() == want.tobytes(), b
        tiny = (want > 0) & (want < np.finfo(np.float32).tiny)
        seen |= [np.isinf(want).any(), (want == 0).any(), tiny.any()]
    assert seen.all()


@needs_numba
def test_a_variant_that_differs_is_not_chosen(monkeypatch):
    """A kernel whose bytes are not the C library's on the check sample is passed over; with
    none left the C library runs."""
    from caffepy.math import _numba_powf
    libm = _libm()

    def off_by_one_ulp(a, b, out):
        libm.powx_libm(a, b, out)
        out.view(np.uint32)[::97] += 1

    monkeypatch.setattr(_numba_powf, "VARIANTS", {"fused": off_by_one_ulp,
                                                  "plain": off_by_one_ulp})
    monkeypatch.setattr(libm, "_powf_choice", {})
    assert libm._powf_variant(-0.8125) is None
    a = np.linspace(1, 9, 1000, dtype=np.float32)
    want = np.empty_like(a)
    libm.powx_libm(a, np.float32(-0.8125), want)
    out = np.empty_like(a)
    libm.powx(a, np.float32(-0.8125), out)
    assert out.tobytes() == want.tobytes()


@needs_numba
def test_float64_and_zero_exponent_take_the_c_library():
    libm = _libm()
    a = np.linspace(0.5, 4, 300)
    out = np.empty_like(a)
    libm.powx(a, -0.75, out)
    want = np.empty_like(a)
    libm.powx_libm(a, -0.75, want)
    assert out.tobytes() == want.tobytes()
    f = np.linspace(0.5, 4, 300, dtype=np.float32)
    out32 = np.empty_like(f)
    libm.powx(f, np.float32(0), out32)
    assert np.all(out32 == 1)
