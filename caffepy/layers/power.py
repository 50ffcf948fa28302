"""Parameterised exponential neuron layers: Power, Exp, Log (element-wise, in-place allowed)."""
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


def _log_base(layer, base):
    if base == -1:
        return 1.0
    if base <= 0:
        raise layer.error("base must be strictly positive (or -1 for e), got %g" % base)
    return float(np.log(base))


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

    def f(self, x):
        return self.outer_scale * np.exp(self.inner_scale * x)

    def df(self, x, y):
        return y * self.inner_scale


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

    def f(self, x):
        return np.log(self.shift + self.scale * x) * self.base_scale

    def df(self, x, y):
        return self.scale * self.base_scale / (self.shift + self.scale * x)
