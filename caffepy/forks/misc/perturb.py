"""Training-time perturbations of single forks: Paethon/caffe's ``Random`` (a random per-element
gain), the gradient-reversal ``GradientScaler`` of madiken/skaffe_private_old (V1 type
GRADIENT_SCALER) and Wheatly2/Bag-of-Tricks-for-Image-Classification's ``Mixup``."""
import math

import numpy as np

from ...layers.base import Layer, NeuronLayer, register_layer

_BOOST_DEFAULT_SEED = 5489     # boost::mt19937's default seed (that of std::mt19937 too)


class BoostUniformInt(object):
    """``boost::random::uniform_int_distribution<int>(lo, hi)`` driven by a default-constructed
    ``boost::mt19937``: each draw takes 32-bit outputs ``u`` and returns ``lo + u // bucket``,
    retrying while ``u // bucket > hi - lo``; ``bucket = 0xffffffff // (hi - lo + 1)``, plus one
    when ``0xffffffff % (hi - lo + 1) == hi - lo`` (boost's generate_uniform_int for an engine
    whose range is the full 32 bits). The engine is numpy's MT19937 with MT's own seeding
    (``RandomState(5489)``), which is the same generator and state."""

    def __init__(self, lo, hi, seed=_BOOST_DEFAULT_SEED):
        self.lo, self.span = int(lo), int(hi) - int(lo)
        brange = 0xFFFFFFFF
        values = self.span + 1
        self.bucket = brange // values + (1 if brange % values == self.span else 0)
        self.engine = np.random.RandomState(seed)

    def raw(self, n):
        return self.engine.randint(0, 1 << 32, size=n, dtype=np.uint64)

    def draw(self, n):
        """The next ``n`` integers. A rejected engine output is skipped, so the accepted ones are
        the stream's outputs in order with the rejects left out: draw in chunks until n."""
        parts, have = [], 0
        while have < n:
            values = self.raw(n - have).astype(np.int64) // self.bucket
            values = values[values <= self.span]
            parts.append(values)
            have += values.size
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return out + self.lo


@register_layer("Random")
class RandomLayer(NeuronLayer):
    """Paethon/caffe's Random (src/caffe/layers/random_layer.cpp): each element times a random gain,

        y_i = x_i * (k_i + 1000) / 10000 * scale,   k_i uniform on the integers 0..10000;
        dL/dx = dL/dy      (the fork copies the top diff: the gain is not differentiated)

    so for the default ``scale: 1000`` the gain is uniform on [100, 1100] in steps of 0.1.
    ``random_param { scale }`` (default 1000). The integers come from the layer's own
    default-seeded boost::mt19937 (not Caffe's seeded generator): every instance of the layer
    draws the same sequence, one integer per element per forward, and so does this class
    (:class:`BoostUniformInt`). The fork has no GPU code: its GPU mode runs this CPU forward.
    The backward is the fork's pass-through, so it is not the derivative of the forward.
    """

    def layer_setup(self, bottom, top):
        self.scale = float(self.layer_param.random_param.scale)
        self.draws = BoostUniformInt(0, 10000)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        k = self.draws.draw(x.size).reshape(x.shape).astype(self.dtype)
        # the fork's order of operations in Dtype: ((x * (k + 1000)) / 10000) * scale
        top[0].data[...] = x * (k + self.dtype.type(1000)) / self.dtype.type(10000) \
            * self.dtype.type(self.scale)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff


@register_layer("GradientScaler")
class GradientScalerLayer(NeuronLayer):
    """The gradient-reversal layer (Ganin & Lempitsky; madiken/skaffe_private_old
    src/caffe/layers/gradient_scaler_layer.cpp, V1 type GRADIENT_SCALER):

        y = x;   dL/dx = -c dL/dy,
        c = 2 (upper - lower) / (1 + exp(-alpha p)) - (upper - lower) + lower,
        p = min(1, iter / max_iter)

    ``gradient_scaler_param { lower_bound: 0 upper_bound: 1 alpha: 10 max_iter: 1 }``. ``c`` is
    1 until the solver first reports its iteration (the fork's SOLVER_ITER_CHANGED message, sent
    at the start of every iteration; here the solver's ``set_iter`` hook), so a backward outside a
    solver reverses the gradient unchanged. ``threshold_iter`` and ``scale_factor`` (other forks'
    variants of the layer) are not computed: setting them is an error.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.gradient_scaler_param
        for name, forks in (("threshold_iter", "BOBrown/JADF-caffe"),
                            ("scale_factor", "yuhuayc/da-faster-rcnn and its forks")):
            if p.HasField(name) and getattr(p, name):
                raise self.error("gradient_scaler_param.%s belongs to %s's variant of the layer, "
                                 "which caffepy does not compute" % (name, forks))
        self.lower, self.upper = float(p.lower_bound), float(p.upper_bound)
        self.alpha, self.max_iter = float(p.alpha), float(p.max_iter)
        if self.lower > self.upper or self.alpha < 0 or self.max_iter < 1:
            raise self.error("gradient_scaler_param needs lower_bound <= upper_bound, alpha >= 0 "
                             "and max_iter >= 1")
        self.coeff = 1.0

    def set_iter(self, iteration, stop_iter=None):
        # float arithmetic as the fork's handler: progress and the schedule in single precision
        f = np.float32
        progress = min(f(1), f(iteration) / f(self.max_iter))
        height = f(self.upper) - f(self.lower)
        self.coeff = float(f(2) * height / (f(1) + f(math.exp(-f(self.alpha) * progress)))
                           - height + f(self.lower))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self.dtype.type(-self.coeff)


@register_layer("Mixup")
class MixupLayer(Layer):
    """mixup (Zhang et al. 2018) as Wheatly2/Bag-of-Tricks-for-Image-Classification's
    mixup_layer.cpp computes it: one lambda ~ Beta(alpha, alpha) per forward, one random
    permutation pi of the batch,

        data'_i  = lambda data_i + (1 - lambda) data_pi(i)
        label'_i = lambda onehot(label_i) + (1 - lambda) onehot(label_pi(i))

    Bottoms: data (N, ...), label: N scalar class indices (any shape but two axes) or one-hot
    rows (N, C) -- these are mixed like the data. Tops: the mixed data (the data's shape) and
    soft labels (N, C). ``mixup_param { alpha: 1 cls_num: 0 }``: C is ``cls_num`` for scalar
    labels (must exceed 1), the label's second axis for one-hot ones. No gradient: the fork's
    backward is empty (a data-side layer).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.mixup_param
        self.alpha = float(p.alpha)
        if not self.alpha > 0:
            raise self.error("mixup_param.alpha must be positive, got %g" % self.alpha)
        self.onehot = bottom[1].num_axes == 2
        self.classes = bottom[1].shape[1] if self.onehot else int(p.cls_num)
        if self.classes <= 1:
            raise self.error("the class count must exceed 1 (mixup_param.cls_num, or the second "
                             "axis of a one-hot label), got %d" % self.classes)

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        if bottom[1].shape[0] != n or (not self.onehot and bottom[1].count != n):
            raise self.needs("the label needs one entry per item (data %s, label %s)"
                             % (bottom[0].shape, bottom[1].shape), [(1, (n,), None)])
        top[0].reshape(bottom[0].shape)
        top[1].reshape((n, self.classes))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        rng = self.rng()
        perm = rng.permutation(n)
        lam = self.dtype.type(rng.beta(self.alpha, self.alpha))
        x = bottom[0].data.reshape(n, -1)
        top[0].data.reshape(n, -1)[...] = lam * x + (1 - lam) * x[perm]
        if self.onehot:
            y = bottom[1].data
            top[1].data[...] = lam * y + (1 - lam) * y[perm]
            return
        labels = bottom[1].data.reshape(n).astype(np.int64)
        if n and (labels.min() < 0 or labels.max() >= self.classes):
            raise self.error("label outside [0, %d)" % self.classes)
        out = np.zeros((n, self.classes), dtype=self.dtype)
        rows = np.arange(n)
        np.add.at(out, (rows, labels), lam)
        np.add.at(out, (rows, labels[perm]), 1 - lam)
        top[1].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        """The fork's backward does nothing."""
