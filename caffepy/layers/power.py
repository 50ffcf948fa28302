"""Parameterised exponential neuron layers: Power, Exp, Log (element-wise, in-place allowed).

Exp and Log follow Caffe's CPU layers step by step when numba is installed (their constants in
the blob's type from the C library's ``log`` / ``pow`` / ``exp``, each scaling a separate
rounding, :mod:`caffepy.math._numba_libm`): BVLC Caffe's values bit for bit."""
import numpy as np

from .neuron import ElementwiseLayer
from .base import register_layer


@register_layer("Power")
class PowerLayer(ElementwiseLayer):
    """y = (shift + scale * x) ^ power.

    dL/dx = dL/dy * power * scale * (shift + scale * x) ^ (power - 1)  (0 when power * scale = 0).
    prototxt: ``power_param { power: 1 scale: 1 shift: 0 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.power_param
        self.power, self.scale, self.shift = p.power, p.scale, p.shift
        self.diff_scale = self.power * self.scale

    def f(self, x):
        if self.diff_scale == 0:
            return np.full_like(x, 1.0 if self.power == 0 else self.shift ** self.power)
        base = self.shift + self.scale * x
        return base if self.power == 1 else np.power(base, self.power)

    def df(self, x, y):
        if self.diff_scale == 0:
            return np.zeros_like(x)
        if self.power == 1:
            return np.full_like(x, self.diff_scale)
        return self.diff_scale * np.power(self.shift + self.scale * x, self.power - 1)

    def c_forward(self, k, x, y):
        t = x.dtype.type
        if t(self.power) * t(self.scale) == 0:
            y[...] = t(1) if self.power == 0 else _c_scalar(k.powx, t(self.shift), t(self.power))
            return True
        _scaled_shifted(self, x, y)
        if self.power != 1:
            k.powx(y, t(self.power), y)
        return True

    def c_backward(self, k, x, y, dy, dx):
        """Caffe's cases: diff_scale (power 1; 0 when diff_scale is 0, dy unused); power 2:
        diff_scale * scale * x (+ diff_scale * shift); shift 0: power * (y / x); else
        diff_scale * (y / (scale x + shift)); then times dy."""
        t = x.dtype.type
        diff_scale = t(self.power) * t(self.scale)
        if diff_scale == 0:
            dx[...] = 0
            return True
        if self.power == 1:
            dx[...] = diff_scale
        elif self.power == 2:
            g = np.multiply(x, diff_scale * t(self.scale))
            if self.shift != 0:
                g += diff_scale * t(self.shift)
            dx[...] = g
        elif self.shift == 0:
            g = np.divide(y, x)
            g *= t(self.power)
            dx[...] = g
        else:
            g = np.divide(y, _scaled_shifted(self, x, np.empty_like(x)))
            if diff_scale != 1:
                g *= diff_scale
            dx[...] = g
        np.multiply(dy, dx, out=dx)
        return True


def _log_base(layer, base):
    if base == -1:
        return 1.0
    if base <= 0:
        raise layer.error("base must be strictly positive (or -1 for e), got %g" % base)
    return float(np.log(base))


def _c_scalar(fn, value, *args):
    """The flat kernel ``fn`` (exp_c, log_c, powx with its exponent in ``args``) of one scalar
    ``value`` of the blob's type."""
    out = np.empty(1, value.dtype)
    fn(np.array([value]), *args, out)
    return out[0]


def _scaled_shifted(layer, x, out):
    """out = x, times ``layer.scale`` where it is not 1, plus ``layer.shift`` where it is not 0,
    each step rounded in x's type: Caffe's copy, caffe_scal, caffe_add_scalar (Power, Log)."""
    t = x.dtype.type
    out[...] = x
    if layer.scale != 1:
        out *= t(layer.scale)
    if layer.shift != 0:
        out += t(layer.shift)
    return out


def _c_log_base(k, t, base):
    """Caffe's ``log_base``: 1 for base -1, else log(base) in the blob's type ``t``."""
    return t(1) if base == -1 else _c_scalar(k.log_c, t(base))


@register_layer("Exp")
class ExpLayer(ElementwiseLayer):
    """y = base ^ (shift + scale * x)  (base -1 means e).

    dL/dx = dL/dy * y * scale * ln(base).
    prototxt: ``exp_param { base: -1 scale: 1 shift: 0 }``.
    """
    needs_input = False

    def layer_setup(self, bottom, top):
        p = self.layer_param.exp_param
        ln_base = _log_base(self, p.base)
        self.inner_scale = ln_base * p.scale
        self.outer_scale = 1.0 if p.shift == 0 else float(np.exp(ln_base * p.shift))
        self._c_consts = {}                 # the blob type's constants (_c_scales)

    def f(self, x):
        return self.outer_scale * np.exp(self.inner_scale * x)

    def df(self, x, y):
        return y * self.inner_scale

    def _c_scales(self, k, t):
        """Caffe's inner_scale_ = log_base * scale and outer_scale_ = 1 (shift 0), else
        pow(base, shift) or exp(shift) (base -1), all of the blob's type ``t`` (computed once
        per type, as Caffe does in LayerSetUp)."""
        cache = self._c_consts
        if t not in cache:
            p = self.layer_param.exp_param
            inner = _c_log_base(k, t, p.base) * t(p.scale)
            if p.shift == 0:
                outer = t(1)
            elif p.base == -1:
                outer = _c_scalar(k.exp_c, t(p.shift))
            else:
                outer = _c_scalar(k.powx, t(p.base), t(p.shift))
            cache[t] = inner, outer
        return cache[t]

    def c_forward(self, k, x, y):
        inner, outer = self._c_scales(k, x.dtype.type)
        if inner == 1:
            k.exp_c(x, y)
        else:
            np.multiply(x, inner, out=y)
            k.exp_c(y, y)
        if outer != 1:
            y *= outer
        return True

    def c_backward(self, k, x, y, dy, dx):
        inner, _ = self._c_scales(k, y.dtype.type)
        np.multiply(y, dy, out=dx)
        if inner != 1:
            dx *= inner
        return True


@register_layer("Log")
class LogLayer(ElementwiseLayer):
    """y = log_base(shift + scale * x)  (base -1 means e).

    dL/dx = dL/dy * scale / ((shift + scale * x) * ln(base)).
    prototxt: ``log_param { base: -1 scale: 1 shift: 0 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.log_param
        self.base_scale = 1.0 / _log_base(self, p.base)
        self.scale, self.shift = p.scale, p.shift
        self._c_consts = {}                 # the blob type's constants (_c_scales)

    def f(self, x):
        return np.log(self.shift + self.scale * x) * self.base_scale

    def df(self, x, y):
        return self.scale * self.base_scale / (self.shift + self.scale * x)

    def _c_scales(self, k, t):
        """Caffe's base_scale_ = 1 / log_base and backward_num_scale_ = scale / log_base, of the
        blob's type ``t`` (computed once per type, as Caffe does in LayerSetUp)."""
        cache = self._c_consts
        if t not in cache:
            log_base = _c_log_base(k, t, self.layer_param.log_param.base)
            cache[t] = t(1) / log_base, t(self.scale) / log_base
        return cache[t]

    def c_forward(self, k, x, y):
        base_scale, _ = self._c_scales(k, x.dtype.type)
        k.log_c(_scaled_shifted(self, x, np.empty_like(x)), y)
        if base_scale != 1:
            y *= base_scale
        return True

    def c_backward(self, k, x, y, dy, dx):
        """Caffe's: (scale x + shift) ^ -1 (caffe_powx), times scale / log_base where that is not
        1, times dy."""
        t = x.dtype.type
        _, num_scale = self._c_scales(k, t)
        inv = _scaled_shifted(self, x, np.empty_like(x))
        k.powx(inv, t(-1), inv)
        if num_scale != 1:
            inv *= num_scale
        np.multiply(dy, inv, out=dx)
        return True
