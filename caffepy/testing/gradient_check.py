"""The gradient checker every layer test uses (Caffe's test_gradient_check_util, in numpy).

Objective: ``L = sum_t <R_t, top_t>`` with fixed random ``R_t`` (a linear objective, so layers whose
outputs have constant norm -- Normalize, Softmax -- are still checked). The analytic gradient comes
from ``backward`` with ``top.diff = R``; the numeric one from central differences

    dL/dx_i ~= (L(x + h e_i) - L(x - h e_i)) / (2 h)

compared with Caffe's relative tolerance ``|a - n| <= threshold * max(|a|, |n|, 1)``. Elements whose
input lies within ``kink_range`` of ``kink`` (ReLU at 0, ...) are skipped, as in Caffe. Blobs with
more than ``max_exhaustive`` elements are checked along ``n_directions`` random unit directions v:
``<grad, v>`` against ``(L(x + h v) - L(x - h v)) / (2 h)``. The random generator is reseeded before
every forward so that stochastic layers (Dropout) see the same mask each time.
"""
import numpy as np

from .. import common


class GradientCheckError(AssertionError):
    pass


class GradientChecker(object):
    def __init__(self, stepsize=1e-3, threshold=1e-4, seed=1701, kink=0.0, kink_range=-1.0,
                 max_exhaustive=400, n_directions=4):
        self.stepsize = stepsize
        self.threshold = threshold
        self.seed = seed
        self.kink = kink
        self.kink_range = kink_range
        self.max_exhaustive = max_exhaustive
        self.n_directions = n_directions

    def _objective(self, layer, bottom, top, weights):
        common.set_random_seed(self.seed)
        layer.forward(bottom, top)
        return sum(float(np.sum(w * t.data, dtype=np.float64)) for w, t in zip(weights, top))

    def check(self, layer, bottom, top, check_bottom=None, check_params=True, first_setup=True):
        """Check d objective / d (bottoms in ``check_bottom``, default all; and params).

        Raises GradientCheckError naming the blob, element, analytic and numeric values.
        """
        if first_setup:
            common.set_random_seed(self.seed)
            layer.setup(bottom, top)
        if check_bottom is None:
            check_bottom = list(range(len(bottom)))
        gen = np.random.default_rng(self.seed + 1)
        self._objective(layer, bottom, top, [np.zeros(t.shape) for t in top])  # shape the tops
        weights = [gen.standard_normal(t.shape) for t in top]
        # analytic
        self._objective(layer, bottom, top, weights)
        for t, w in zip(top, weights):
            t.diff[...] = w
        for b in bottom:
            b.diff[...] = 0
        for p in layer.blobs:
            p.diff[...] = 0
        propagate = [i in check_bottom for i in range(len(bottom))]
        layer.backward(top, propagate, bottom)
        targets = [("bottom[%d]" % i, bottom[i]) for i in check_bottom]
        if check_params:
            targets += [("param[%d]" % i, p) for i, p in enumerate(layer.blobs)
                        if i >= len(layer.param_propagate_down) or layer.param_propagate_down[i]]
        analytic = [(name, blob, blob.diff.copy()) for name, blob in targets]
        for name, blob, grad in analytic:
            if blob.count <= self.max_exhaustive:
                self._check_exhaustive(layer, bottom, top, weights, name, blob, grad)
            else:
                self._check_directions(layer, bottom, top, weights, name, blob, grad, gen)

    def _compare(self, name, where, a, n):
        scale = max(abs(a), abs(n), 1.0)
        if abs(a - n) > self.threshold * scale:
            raise GradientCheckError("%s %s: analytic %.8g vs numeric %.8g (threshold %g)"
                                     % (name, where, a, n, self.threshold * scale))

    def _check_exhaustive(self, layer, bottom, top, weights, name, blob, grad):
        flat = blob.data.reshape(-1)
        g = grad.reshape(-1)
        h = self.stepsize
        for i in range(flat.size):
            x = flat[i]
            if self.kink_range > 0 and abs(abs(x) - self.kink) <= self.kink_range:
                continue
            flat[i] = x + h
            lp = self._objective(layer, bottom, top, weights)
            flat[i] = x - h
            lm = self._objective(layer, bottom, top, weights)
            flat[i] = x
            self._compare(name, "element %d" % i, float(g[i]), (lp - lm) / (2 * h))

    def _check_directions(self, layer, bottom, top, weights, name, blob, grad, gen):
        h = self.stepsize
        x0 = blob.data.copy()
        for k in range(self.n_directions):
            v = gen.standard_normal(blob.shape)
            v /= np.linalg.norm(v)
            blob.data[...] = x0 + h * v
            lp = self._objective(layer, bottom, top, weights)
            blob.data[...] = x0 - h * v
            lm = self._objective(layer, bottom, top, weights)
            blob.data[...] = x0
            self._compare(name, "direction %d" % k, float(np.sum(grad * v)), (lp - lm) / (2 * h))


def check_layer_gradient(layer, bottom, top, check_bottom=None, check_params=True, **kwargs):
    """One-call form: ``check_layer_gradient(make_layer(...), bottoms, tops)``."""
    GradientChecker(**kwargs).check(layer, bottom, top, check_bottom=check_bottom,
                                    check_params=check_params)
