"""Adaptive update rules: AdaGrad, RMSProp, AdaDelta, Adam (Caffe's exact arithmetic).

Each class overrides only ``update_rule(g, hist, local_rate, param, t)`` of the SGD template
(``g`` the normalized, regularized gradient, rewritten in place into the step that ``w -= g``
applies; ``delta`` = param.delta, default 1e-8)::

    AdaGrad    h += g^2;                          g = local_rate * g / (sqrt(h) + delta)
    RMSProp    h = rms_decay * h + (1 - rms_decay) * g^2
               g = local_rate * g / (sqrt(h) + delta)
    AdaDelta   h1 = m * h1 + (1 - m) * g^2                        (m = momentum)
               g  = g * sqrt((h2 + delta) / (h1 + delta))
               h2 = m * h2 + (1 - m) * g^2
               g  = local_rate * g
    Adam       m1 = b1 * m1 + (1 - b1) * g;   v = b2 * v + (1 - b2) * g^2   (b1 = momentum,
               g  = local_rate * sqrt(1 - b2^t) / (1 - b1^t) * m1 / (sqrt(v) + delta)   b2 = momentum2)

with ``t = iter + 1``. AdaGrad and RMSProp refuse a momentum (as Caffe); RMSProp needs
0 <= rms_decay < 1. AdaDelta and Adam keep two history blobs per param (in the .solverstate: all
first-moment blobs, then all second-moment blobs).
"""
import math

import numpy as np

from ..errors import SolverError
from .sgd import SGDSolver


class AdaGradSolver(SGDSolver):
    type = "AdaGrad"

    def check_param(self):
        if self.param.momentum != 0:
            raise SolverError("Momentum cannot be used with AdaGrad (momentum: %g)" % self.param.momentum)

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        h = hist[0]
        h += g * g
        denom = np.sqrt(h)
        denom += g.dtype.type(param.delta)
        g[...] = local_rate * (g / denom)


class RMSPropSolver(SGDSolver):
    type = "RMSProp"

    def check_param(self):
        if self.param.momentum != 0:
            raise SolverError("Momentum cannot be used with RMSProp (momentum: %g)" % self.param.momentum)
        if not 0 <= self.param.rms_decay < 1:
            raise SolverError("rms_decay should lie between 0 and 1 (got %g)" % self.param.rms_decay)

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        h = hist[0]
        dt = g.dtype.type
        decay = dt(param.rms_decay)
        h[...] = (dt(1) - decay) * (g * g) + decay * h
        denom = np.sqrt(h)
        denom += dt(param.delta)
        g[...] = local_rate * (g / denom)


class AdaDeltaSolver(SGDSolver):
    type = "AdaDelta"
    n_history = 2

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        h1, h2 = hist
        dt = g.dtype.type
        m, delta = dt(param.momentum), dt(param.delta)
        h1[...] = (dt(1) - m) * (g * g) + m * h1
        g *= np.sqrt((h2 + delta) / (h1 + delta))
        h2[...] = (dt(1) - m) * (g * g) + m * h2
        g *= local_rate


class AdamSolver(SGDSolver):
    type = "Adam"
    n_history = 2

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        m1, v = hist
        dt = g.dtype.type
        b1, b2 = dt(param.momentum), dt(param.momentum2)
        correction = dt(math.sqrt(1.0 - math.pow(float(b2), t)) / (1.0 - math.pow(float(b1), t)))
        m1[...] = (dt(1) - b1) * g + b1 * m1
        v[...] = (dt(1) - b2) * (g * g) + b2 * v
        denom = np.sqrt(v)
        denom += dt(param.delta)
        g[...] = (local_rate * correction) * (m1 / denom)
