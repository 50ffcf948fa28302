"""Sigmoid, TanH, BNLL, ELU, Swish, Exp, Log, Power, SigmoidCrossEntropyLoss and LSTMUnit on
float32 blobs are BVLC Caffe's CPU values bit for bit: each formula evaluated element by element
with the C library's functions (ctypes) in the order, and the precision, of Caffe's C++ (the
recorded BVLC Caffe cases of these layers are compared byte for byte in
tests/test_reference_cases.py)."""
import ctypes
import ctypes.util

import numpy as np
import pytest

from caffepy.math import kernels
from caffepy.testing import make_blobs, make_layer

pytestmark = pytest.mark.skipif(not kernels.available() or not ctypes.util.find_library("m"),
                                reason="numba not installed or off, or no C math library")
F = np.float32


def _libm():
    m = ctypes.CDLL(ctypes.util.find_library("m"))
    out = {}
    for name, c in (("expf", ctypes.c_float), ("logf", ctypes.c_float),
                    ("tanhf", ctypes.c_float), ("tanh", ctypes.c_double),
                    ("log", ctypes.c_double), ("powf", ctypes.c_float)):
        fn = getattr(m, name)
        fn.restype = c
        fn.argtypes = [c, c] if name == "powf" else [c]
        out[name] = fn
    return out


C = _libm() if ctypes.util.find_library("m") else {}


def _x(positive=False, n=3000):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(n) * rng.choice([0.01, 1.0, 4.0, 30.0], n)).astype(F)
    x[:6] = [0.0, -0.0, 1e-30, -1e-30, 60.0, -60.0]
    return np.abs(x) + F(0.01) if positive else x


def _run(text, x, dy):
    layer = make_layer(text, dtype=F)
    bottom, top = make_blobs([x.reshape(3, -1)], dtype=F), make_blobs(1, dtype=F)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    top[0].diff[...] = dy.reshape(top[0].shape)
    layer.backward(top, [True], bottom)
    return top[0].data.ravel().copy(), bottom[0].diff.ravel().copy()


def _each(fn, *arrays):
    return np.array([fn(*vals) for vals in zip(*arrays)], F)


def _sig(v):
    return 0.5 * C["tanh"](0.5 * float(v)) + 0.5


CASES = {
    "Sigmoid": ('type: "Sigmoid"', False,
                lambda x: _each(_sig, x),
                lambda x, y, dy: _each(lambda s, g: float(F(g) * F(s)) * (1.0 - float(s)), y, dy)),
    "TanH": ('type: "TanH"', False,
             lambda x: _each(lambda v: C["tanhf"](float(v)), x),
             lambda x, y, dy: (dy * (F(1) - y * y)).astype(F)),
    "BNLL": ('type: "BNLL"', False,
             lambda x: _each(lambda v: float(v) + C["log"](1.0 + C["expf"](-float(v))) if v > 0
                             else C["log"](1.0 + C["expf"](float(v))), x),
             lambda x, y, dy: _each(lambda v, g: float(F(g) * F(C["expf"](min(float(v), 50.0))))
                                    / (C["expf"](min(float(v), 50.0)) + 1.0), x, dy)),
    "ELU": ('type: "ELU" elu_param { alpha: 0.3 }', False,
            lambda x: _each(lambda v: F(max(v, F(0)))
                            + F(0.3) * (F(C["expf"](float(min(v, F(0))))) - F(1)), x),
            lambda x, y, dy: (dy * np.where(x > 0, F(1), F(0.3) + y)).astype(F)),
    "Swish": ('type: "Swish" swish_param { beta: 1.5 }', False,
              lambda x: (x * _each(_sig, x * F(1.5))).astype(F),
              lambda x, y, dy: _each(lambda g, t, s: float(g) * (float(F(1.5) * t) + float(s) * (
                  1.0 - float(F(1.5) * t))), dy, y, _each(_sig, x * F(1.5)))),
    "Exp": ('type: "Exp" exp_param { base: 3 scale: 0.5 shift: -0.2 }', False,
            lambda x: (_each(C["expf"], x * (F(C["logf"](3.0)) * F(0.5)))
                       * F(C["powf"](3.0, F(-0.2)))),
            lambda x, y, dy: (y * dy) * (F(C["logf"](3.0)) * F(0.5))),
    "Log": ('type: "Log" log_param { base: 10 scale: 2 shift: 0.5 }', True,
            lambda x: _each(C["logf"], x * F(2) + F(0.5)) * (F(1) / F(C["logf"](10.0))),
            lambda x, y, dy: dy * (_each(lambda v: C["powf"](float(v), -1.0), x * F(2) + F(0.5))
                                   * (F(2) / F(C["logf"](10.0))))),
    "Power": ('type: "Power" power_param { power: 2.5 scale: 0.8 shift: 0.3 }', True,
              lambda x: _each(lambda v: C["powf"](float(v), 2.5), x * F(0.8) + F(0.3)),
              lambda x, y, dy: dy * ((y / (x * F(0.8) + F(0.3))) * (F(2.5) * F(0.8)))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_backward_are_caffes_arithmetic_bit_for_bit(name):
    text, positive, forward, backward = CASES[name]
    x = _x(positive)
    dy = np.random.default_rng(4).standard_normal(x.size).astype(F)
    y, dx = _run(text, x, dy)
    want_y = forward(x).astype(F)
    assert y.tobytes() == want_y.tobytes()
    want_dx = backward(x, want_y, dy).astype(F)
    with np.errstate(invalid="ignore"):
        same = (dx == want_dx) | (np.isnan(dx) & np.isnan(want_dx))
    assert same.all(), (name, np.flatnonzero(~same)[:5])


@pytest.mark.parametrize("ignore", [None, -1])
def test_sigmoid_cross_entropy_loss_sums_in_caffes_order(ignore):
    """loss -= x (t - (x >= 0)) - logf(1 + expf(x - 2 x (x >= 0))), one float32 after another,
    over the targets not ignored; / the normalizer; the gradient (sigmoid(x) - t) * (dl / n)."""
    x = _x(n=600)
    t = (np.random.default_rng(5).random(600) > 0.5).astype(F)
    if ignore is not None:
        t[::7] = ignore
    text = 'type: "SigmoidCrossEntropyLoss"' + (
        "" if ignore is None else " loss_param { ignore_label: %d }" % ignore)
    layer = make_layer(text, dtype=F)
    bottom = make_blobs([x.reshape(6, -1), t.reshape(6, -1)], dtype=F)
    top = make_blobs(1, dtype=F)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    loss, valid = F(0), 0
    for v, g in zip(x, t):
        if ignore is not None and int(g) == ignore:
            continue
        pos = F(1) if v >= 0 else F(0)
        loss = F(loss - F(F(v * F(g - pos)) - F(C["logf"](float(F(1) + F(C["expf"](float(
            v - F(2) * v * pos))))))))
        valid += 1
    assert top[0].data.reshape(-1)[0].tobytes() == F(loss / F(6)).tobytes()
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    d = _each(_sig, x) - t
    if ignore is not None:
        d[t == ignore] = 0
    assert bottom[0].diff.ravel().tobytes() == (d * (F(2) / F(6))).astype(F).tobytes()


def _unit_sig(v):
    return F(1.0 / (1.0 + C["expf"](-float(v))))


def _unit_tanh(v):
    import math
    return F(2.0 * (1.0 / (1.0 + math.exp(-(2.0 * float(v))))) - 1.0)


def test_lstm_unit_is_caffes_per_element_arithmetic():
    """LSTMUnit's own sigmoid 1. / (1. + expf(-x)) and tanh 2. * sigmoid(2. * x) - 1. (a double
    exp), the cell and hidden state and every gradient in Caffe's order of float operations."""
    n, d = 3, 5
    rng = np.random.default_rng(8)
    c_prev = (rng.standard_normal((1, n, d)) * 2).astype(F)
    x = (rng.standard_normal((1, n, 4 * d)) * 3).astype(F)
    cont = np.array([[1, 0, 1]], F)
    layer = make_layer('type: "LSTMUnit"', dtype=F)
    bottom = make_blobs([c_prev, x, cont], dtype=F)
    top = make_blobs(2, dtype=F)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    dc = rng.standard_normal((1, n, d)).astype(F)
    dh = rng.standard_normal((1, n, d)).astype(F)
    top[0].diff[...], top[1].diff[...] = dc, dh
    layer.backward(top, [True, True, False], bottom)
    X, Cp, K = x.reshape(n, 4 * d), c_prev.reshape(n, d), cont.reshape(n)
    one = F(1)
    for t in range(n):
        for j in range(d):
            i, o = _unit_sig(X[t, j]), _unit_sig(X[t, 2 * d + j])
            f = F(0) if K[t] == 0 else F(K[t] * _unit_sig(X[t, d + j]))
            g = _unit_tanh(X[t, 3 * d + j])
            c = F(F(f * Cp[t, j]) + F(i * g))
            tc = _unit_tanh(c)
            assert top[0].data[0, t, j].tobytes() == c.tobytes()
            assert top[1].data[0, t, j].tobytes() == F(o * tc).tobytes()
            ct = F(dc[0, t, j] + F(F(dh[0, t, j] * o) * F(one - F(tc * tc))))
            assert bottom[0].diff[0, t, j].tobytes() == F(ct * f).tobytes()
            want = [F(F(F(ct * g) * i) * F(one - i)), F(F(F(ct * Cp[t, j]) * f) * F(one - f)),
                    F(F(F(dh[0, t, j] * tc) * o) * F(one - o)), F(F(ct * i) * F(one - g * g))]
            got = [bottom[1].diff[0, t, q * d + j] for q in range(4)]
            assert [a.tobytes() for a in got] == [b.tobytes() for b in want], (t, j)
