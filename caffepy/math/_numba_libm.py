"""numba kernels of the element-wise layers whose values come from the C math library, written in
BVLC Caffe's order of operations so that the CPU results are Caffe's bit for bit (imported through
:mod:`caffepy.math._numba_kernels`).

Caffe's CPU layers call ``exp``, ``log``, ``tanh`` and ``pow`` per element; with a float blob
these are the C library's float functions (``expf``, ``logf``, ``tanhf``, ``powf``) and with a
double blob the double ones. numpy's float32 ``exp`` / ``log`` / ``tanh`` are its own SIMD
approximations, which differ from the C library's in the last place for a large share of inputs
(measured: ``exp`` on 39%, ``tanh`` on 35% of N(0, 25) samples). Inside these kernels
``math.exp`` of a float32 is LLVM's ``exp.f32``, a call to ``expf`` (no fast-math). Where Caffe
writes a double constant (``0.5 * tanh(0.5 * x) + 0.5``, ``log(1. + exp(x))``,
``1. - sigmoid_x``) the expression is evaluated in double and rounded once to the blob's type, as
C++ does. Every kernel takes flat arrays; the output may be the input (in place)."""
import math

import numpy as np
from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def exp_c(x, y):
    """y = exp(x): Caffe's ``caffe_exp`` (``vsExp`` without MKL: ``exp`` per element)."""
    for i in prange(x.shape[0]):
        y[i] = math.exp(x[i])


@njit(**_opts)
def log_c(x, y):
    """y = log(x): Caffe's ``caffe_log``."""
    for i in prange(x.shape[0]):
        y[i] = math.log(x[i])


@njit(**_opts)
def powx_libm(a, b, out):
    """out = a ** b, b a scalar of their type: ``std::pow`` per element, the C library's."""
    for i in prange(a.shape[0]):
        out[i] = a[i] ** b


_powf_choice = {}


def _powf_variant(b):
    """The kernel of :mod:`caffepy.math._numba_powf` that gives the C library's bytes for
    exponent ``b`` (float32) on a fixed sample of 4,096 inputs (every exponent range, specials
    among them), or None: tried once per exponent value."""
    key = np.float32(b).tobytes()
    if key not in _powf_choice:
        from llvmlite import binding
        from . import _numba_powf
        rng = np.random.default_rng(20281)
        bits = rng.integers(0x00800000, 0x7f800000, 4088, dtype=np.uint32)
        a = np.concatenate([bits.view(np.float32), np.array(
            [0.0, -0.0, 1e-45, 1.0, -2.0, np.inf, np.nan, 3.0], np.float32)])
        want = np.empty_like(a)
        powx_libm(a, np.float32(b), want)
        fma = binding.get_host_cpu_features().get("fma", True)  # x86 names it; AArch64 has it
        _powf_choice[key] = None
        for name, fn in _numba_powf.VARIANTS.items():
            if name == "fused" and not fma:
                continue
            got = np.empty_like(a)
            fn(a, np.float32(b), got)
            if got.tobytes() == want.tobytes():
                _powf_choice[key] = fn
                break
    return _powf_choice[key]


def powx(a, b, out):
    """out = a ** b, b a scalar of their type (flat arrays, ``out`` may be ``a``): Caffe's
    ``caffe_powx`` (``std::pow`` per element; LRN's scale^-beta, the Power layer, Log's
    backward). A float32 blob with a finite non-zero exponent runs the C library's ``powf``
    arithmetic 8 elements at a time (:mod:`caffepy.math._numba_powf`) where that variant gave the
    C library's bytes (:func:`_powf_variant`), else the C library per element."""
    if a.dtype == np.float32 and a.shape[0] >= 64 and np.isfinite(b) and b != 0:
        fn = _powf_variant(b)
        if fn is not None:
            return fn(a, np.float32(b), out)
    powx_libm(a, b, out)


@njit(**_opts)
def tanh_c(x, y):
    """y = tanh(x): TanHLayer::Forward_cpu."""
    for i in prange(x.shape[0]):
        y[i] = math.tanh(x[i])


@njit(**_opts)
def sigmoid_c(x, y):
    """y = 0.5 * tanh(0.5 * x) + 0.5 in double, rounded once: SigmoidLayer's ``sigmoid``."""
    for i in prange(x.shape[0]):
        y[i] = 0.5 * math.tanh(0.5 * np.float64(x[i])) + 0.5


@njit(**_opts)
def sigmoid_c_backward(y, dy, dx):
    """dx = (dy * y) * (1. - y): the product of the blob's type, then the double factor."""
    for i in prange(y.shape[0]):
        s = y[i]
        dx[i] = np.float64(dy[i] * s) * (1.0 - np.float64(s))


@njit(**_opts)
def bnll_c(x, y):
    """BNLLLayer: x > 0 ? x + log(1. + exp(-x)) : log(1. + exp(x)); exp of the blob's type, the
    rest in double."""
    for i in prange(x.shape[0]):
        v = x[i]
        if v > 0:
            y[i] = np.float64(v) + math.log(1.0 + np.float64(math.exp(-v)))
        else:
            y[i] = math.log(1.0 + np.float64(math.exp(v)))


@njit(**_opts)
def bnll_c_backward(x, dy, threshold, dx):
    """e = exp(min(x, threshold)); dx = (dy * e) / (e + 1.) (the division in double)."""
    for i in prange(x.shape[0]):
        e = math.exp(min(x[i], threshold))
        dx[i] = np.float64(dy[i] * e) / (np.float64(e) + 1.0)


@njit(**_opts)
def elu_c(x, alpha, zero, one, y):
    """ELULayer: max(x, 0) + alpha * (exp(min(x, 0)) - 1), all in the blob's type (``zero``,
    ``one``, ``alpha`` are of it)."""
    for i in prange(x.shape[0]):
        v = x[i]
        y[i] = max(v, zero) + alpha * (math.exp(min(v, zero)) - one)


@njit(**_opts)
def swish_c_backward(y, s, dy, beta, dx):
    """SwishLayer: dx = dy * (beta * y + s * (1. - beta * y)); beta * y of the blob's type, the
    rest in double."""
    for i in prange(y.shape[0]):
        by = beta * y[i]
        dx[i] = np.float64(dy[i]) * (np.float64(by) + np.float64(s[i]) * (1.0 - np.float64(by)))


@njit(cache=True, nogil=True, fastmath=False)
def sigmoid_ce_loss_c(x, t, has_ignore, ignore, one):
    """SigmoidCrossEntropyLossLayer's sum, in its order: loss -= x * (t - (x >= 0)) -
    log(1 + exp(x - 2 x (x >= 0))) over the elements whose int(t) is not ``ignore`` (when
    ``has_ignore``), accumulated one element after another in the blob's type (``one`` is 1 of
    it). Returns (loss, valid count)."""
    zero = one - one
    two = one + one
    loss = zero
    valid = 0
    for i in range(x.shape[0]):
        if has_ignore and int(t[i]) == ignore:
            continue
        v = x[i]
        pos = one if v >= zero else zero
        loss -= v * (t[i] - pos) - math.log(one + math.exp(v - two * v * pos))
        valid += 1
    return loss, valid


@njit(cache=True, inline="always")
def _unit_sigmoid(x):
    """LSTMUnitLayer's sigmoid<float>: 1. / (1. + exp(-x)), exp of the float, rest in double,
    rounded once."""
    return np.float32(1.0 / (1.0 + np.float64(math.exp(-x))))


@njit(cache=True, inline="always")
def _unit_tanh(x):
    """LSTMUnitLayer's tanh<float>: 2. * sigmoid(2. * x) - 1., the sigmoid's of a double (double
    exp), rounded once."""
    return np.float32(2.0 * (1.0 / (1.0 + math.exp(-(2.0 * np.float64(x))))) - 1.0)


@njit(cache=True, inline="always")
def _unit_gates(x, t, j, d, k):
    """LSTMUnit's gates of unit j of row t: i, o = sigmoid, f = k * sigmoid (0 where the row's
    cont k is 0), g = tanh (their own forms above)."""
    i = _unit_sigmoid(x[t, j])
    f = np.float32(0) if k == 0 else k * _unit_sigmoid(x[t, d + j])
    o = _unit_sigmoid(x[t, 2 * d + j])
    return i, f, o, _unit_tanh(x[t, 3 * d + j])


@njit(**_opts)
def lstm_unit_c(c_prev, x, cont, c, h):
    """LSTMUnitLayer::Forward_cpu on float32 (N, D) c_prev, (N, 4D) gates x, (N,) cont:
    i, o = sigmoid, f = cont * sigmoid (0 where cont is 0), g = tanh (its own forms above);
    c = f c_prev + i g; h = o tanh(c)."""
    n, d = c_prev.shape
    for t in prange(n):
        k = cont[t]
        for j in range(d):
            i, f, o, g = _unit_gates(x, t, j, d, k)
            cc = f * c_prev[t, j] + i * g
            c[t, j] = cc
            h[t, j] = o * _unit_tanh(cc)


@njit(**_opts)
def lstm_unit_c_backward(c_prev, x, cont, c, dc, dh, dc_prev, dx):
    """LSTMUnitLayer::Backward_cpu (float32), in its order of float operations."""
    n, d = c_prev.shape
    one = np.float32(1)
    for t in prange(n):
        k = cont[t]
        for j in range(d):
            i, f, o, g = _unit_gates(x, t, j, d, k)
            cp = c_prev[t, j]
            tc = _unit_tanh(c[t, j])
            ct = dc[t, j] + dh[t, j] * o * (one - tc * tc)
            dc_prev[t, j] = ct * f
            dx[t, j] = ct * g * i * (one - i)
            dx[t, d + j] = ct * cp * f * (one - f)
            dx[t, 2 * d + j] = dh[t, j] * tc * o * (one - o)
            dx[t, 3 * d + j] = ct * i * (one - g * g)
