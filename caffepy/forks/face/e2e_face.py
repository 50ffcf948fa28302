"""mikuhatsune/e2e_face's MarginSoftmaxLoss (caffe_modification/margin_softmax_loss_layer.cpp): the
A-Softmax loss with margin 4 and its own classifier weights, the label logit blended with the
plain one by an annealed lambda (filler.hpp's ``Param``, ``ParamParameter``).
"""
import math

import numpy as np

from ...layers.base import LossLayer, register_layer

_COS_K = (1.0, math.sqrt(0.5), 0.0, -math.sqrt(0.5), -1.0)       # cos(k pi / 4), k = 0..4


class Schedule(object):
    """e2e_face's ``Param``: ``value`` changed every ``step`` calls, clamped to [min, max]:
    STEPUP v *= gamma, ADDUP v += gamma, CONSTANT unchanged. ``iter`` is the calls already made
    (its steps are applied at once when the layer is set up). ``next()`` is the fork's
    ``get_iter``: at a multiple of ``step`` (but not at 0) it changes the value first, then counts
    the call; ``value`` is its ``get``."""

    def __init__(self, p):
        self.policy, self.value = int(p.policy), float(np.float32(p.value))
        self.lo, self.hi, self.gamma = float(p.min), float(p.max), float(p.gamma)
        self.step, self.iter = int(p.step), int(p.iter)
        if self.iter and self.step:
            k = self.iter // self.step
            self.value = self._clamp(self.value * self.gamma ** k if self.policy == 1
                                     else self.value + self.gamma * k if self.policy == 3
                                     else self.value)

    def _clamp(self, v):
        return float(np.float32(max(self.lo, min(self.hi, v))))

    def next(self):
        if self.iter and self.step and self.iter % self.step == 0:
            if self.policy == 1:
                self.value = self._clamp(self.value * self.gamma)
            elif self.policy == 3:
                self.value = self._clamp(self.value + self.gamma)
        self.iter += 1
        return self.value


@register_layer("MarginSoftmaxLoss")
class MarginSoftmaxLossLayer(LossLayer):
    """A-Softmax (m = 4) over the layer's own weights W (num_output x F), as e2e_face computes it.

    Forward, for each item i with features x (F values) and label y:
        f_j = x . w_j                          (j != y)
        c = f_y / (|x| |w_y|)  (1 when |x| |w_y| = 0);  k in 0..3 with cos(k pi/4) >= c >=
        cos((k+1) pi/4);  phi = (-1)^k (8 c^4 - 8 c^2 + 1) - 2 k   (= (-1)^k cos(4 theta) - 2k)
        f_y = (lambda x . w_y + |x| |w_y| phi) / (1 + lambda)     (unchanged if no k fits)
        loss = -sum_i log softmax(f)_y / N
    lambda: ``margin_softmax_loss_param.lambda``, advanced by one call at every forward (module
    ``Schedule``). Backward is the fork's: with p = softmax(f), s = top_diff / N,
        dx += s p_j w_j, dw_j += s p_j x        (j != y)
        label column: dx += s (p_y - 1) [(|w| phi / |x| - 2 m c^2 |w| / |x|) x + (2 m c + lambda) w]
                      / (1 + lambda), dw_y alike with x and w exchanged,
        m = -8 (2 c^2 - 1) when phi is in [-3, -1) or [-7, -5) (k odd), else 0
    For odd k that is the exact gradient; for even k the fork drops the term of d phi / d c
    (16 c (2 c^2 - 1)), and this layer drops it too. |w_y| = 0 gives dw_y += 4 s (p_y - 1) x, |x| = 0
    gives dx += 4 s (p_y - 1) w (the fork's). The bottom's gradient is overwritten, W's accumulated.

    prototxt: ``margin_softmax_loss_param { num_output weight_filler lambda { policy: CONSTANT
    | STEPUP | ADDUP value: 0 min: 0 max: 1 gamma: 1 step: 1000 iter: 0 } }``. Bottoms: x (N x
    ...), label (N). Top: the loss. Param: W.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.margin_softmax_loss_param
        if not p.num_output:
            raise self.error("margin_softmax_loss_param.num_output is required")
        self.P = int(p.num_output)
        self.F = bottom[0].count_range(1)
        self.schedule = Schedule(getattr(p, "lambda"))
        self.init_param_blobs([(self.P, self.F)], p.weight_filler)
        self.phi = None

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        n = bottom[0].shape[0]
        if bottom[0].count != n * self.F:
            raise self.error("each item has %d features, the weights %d"
                             % (bottom[0].count // max(n, 1), self.F))
        if self.phi is None or len(self.phi) != n:
            self.phi = np.zeros(n)        # the fork keeps the last phi where no k fits

    def _labels(self, bottom):
        y = bottom[1].data.reshape(-1).astype(np.int64)
        if y.size and (y.min() < 0 or y.max() >= self.P):
            raise self.error("label %d outside [0, %d)" % (y.max() if y.max() >= self.P
                                                            else y.min(), self.P))
        return y

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, self.F).astype(np.float64)
        w = self.blobs[0].data.astype(np.float64)
        y = self._labels(bottom)
        lam = self.schedule.next()
        f = x @ w.T
        self.x_norm = np.linalg.norm(x, axis=1)
        self.w_norm = np.linalg.norm(w[y], axis=1)
        self.ip = f[np.arange(n), y].copy()
        for i in range(n):
            xw = self.x_norm[i] * self.w_norm[i]
            c = 1.0 if xw == 0 else self.ip[i] / xw
            for k in range(4):
                if _COS_K[k] >= c >= _COS_K[k + 1]:
                    c2 = c * c
                    self.phi[i] = (-1 if k & 1 else 1) * (8 * c2 * (c2 - 1) + 1) - 2 * k
                    f[i, y[i]] = (self.ip[i] * lam + xw * self.phi[i]) / (1 + lam)
                    break
        f -= f.max(axis=1, keepdims=True)
        e = np.exp(f)
        self.prob = e / e.sum(axis=1, keepdims=True)
        top[0].data[...] = -np.sum(np.log(self.prob[np.arange(n), y])) / n

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, self.F).astype(np.float64)
        w = self.blobs[0].data.astype(np.float64)
        y = self._labels(bottom)
        lam = self.schedule.value
        s = float(top[0].diff) / n
        g = s * self.prob                                  # the other columns' coefficients
        rows = np.arange(n)
        g[rows, y] = 0.0
        dx = g @ w
        dw = g.T @ x
        for i in range(n):
            j, a = y[i], s * (self.prob[i, y[i]] - 1)
            xn, wn, ip, phi = self.x_norm[i], self.w_norm[i], self.ip[i], self.phi[i]
            if wn == 0:
                dw[j] += a * 4 * x[i]
            elif xn == 0:
                dx[i] += a * 4 * w[j]
            else:
                m = -8.0 if (-1 > phi >= -3) or (-5 > phi >= -7) else 0.0
                m *= 2 * ip * ip / (wn * wn * xn * xn) - 1
                dx[i] += a * (wn * phi / xn - m * 2 * ip * ip / (xn ** 3 * wn)) / (1 + lam) * x[i]
                dx[i] += a * (m * 2 * ip / (xn * wn) + lam) / (1 + lam) * w[j]
                dw[j] += a * (xn * phi / wn - m * 2 * ip * ip / (wn ** 3 * xn)) / (1 + lam) * w[j]
                dw[j] += a * (m * 2 * ip / (xn * wn) + lam) / (1 + lam) * x[i]
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)
        self.blobs[0].diff[...] += dw
