"""SigmoidWeightedCrossEntropyLoss of two forks under one type name: guomugong/FFIA's
class-balanced form (two bottoms, ``sigmoid_wce_loss_param``) and
HouyuZhang1007/Pedestrian-Attribute-Recognition's per-element weighted form (three bottoms)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer, register_variant


def _sigmoid_ce(x, t):
    """Caffe's stable -[t log s(x) + (1 - t) log(1 - s(x))], element by element."""
    pos = (x >= 0).astype(np.float64)
    return -(x * (t - pos) - np.log1p(np.exp(x - 2 * x * pos)))


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


class _SigmoidLossBase(LossLayer):
    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        for j in range(1, len(bottom)):
            if bottom[j].count != bottom[0].count:
                raise self.needs("bottom[%d] must have the count of the scores (%s vs %s)"
                                 % (j, bottom[j].shape, bottom[0].shape),
                                 [(j, bottom[0].shape, 0)])

    def _xt(self, bottom):
        x = bottom[0].data.reshape(-1).astype(np.float64)
        return x, bottom[1].data.reshape(-1).astype(np.float64)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[1:]):
            raise self.error("cannot backpropagate to the labels or the weights")
        if propagate_down[0]:
            g = self._grad(bottom) * (float(top[0].diff.reshape(())) / bottom[0].shape[0])
            bottom[0].diff[...] = g.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("SigmoidWeightedCrossEntropyLoss")
class SigmoidWeightedCrossEntropyLossLayer(_SigmoidLossBase):
    """Class-balanced sigmoid cross-entropy as guomugong/FFIA computes it
    (caffe/src/caffe/layers/sigmoid_weighted_cross_entropy_loss_layer.cpp). Bottoms: scores x
    and targets t (x's count; a target counts as positive when int(t) == 1). Only the first
    sample's D = count / N values enter the loss and the weights (the fork's loops stop at D):
    with P, Q its positives and negatives and a = ``alpha``,

        w+ = Q / (P + Q) / (a + 1),    w- = P / (P + Q) a / (a + 1)
        loss = w+ sum_{pos} CE(x, 1) + w- sum_{neg} CE(x, 0)      (over the first D values)
        bottom diff = loss_weight (s(x) - t) / N, times w+ or w- on the first D values only

    (the backward is the fork's, not the gradient of its loss past the first sample).
    prototxt: ``sigmoid_wce_loss_param { alpha: 1 }``. The targets get no gradient. A third
    bottom selects :class:`SigmoidWeightedCrossEntropyLossPerElementLayer`.
    """

    def layer_setup(self, bottom, top):
        self.alpha = float(self.layer_param.sigmoid_wce_loss_param.alpha)

    def _weights(self, bottom):
        x, t = self._xt(bottom)
        d = x.size // bottom[0].shape[0]
        pos = np.trunc(t[:d]) == 1
        p, q = float(pos.sum()), float((~pos).sum())
        wp = q / (p + q) / (self.alpha + 1)
        wn = p / (p + q) * self.alpha / (self.alpha + 1)
        return x, t, d, np.where(pos, wp, wn)

    def forward_cpu(self, bottom, top):
        x, t, d, w = self._weights(bottom)
        pos = np.trunc(t[:d]) == 1
        top[0].data[...] = np.sum(w * _sigmoid_ce(x[:d], pos.astype(np.float64)))

    def _grad(self, bottom):
        x, t, d, w = self._weights(bottom)
        g = _sigmoid(x) - t
        g[:d] *= w
        return g


@register_variant("SigmoidWeightedCrossEntropyLoss", lambda lp: len(lp.bottom) == 3)
class SigmoidWeightedCrossEntropyLossPerElementLayer(_SigmoidLossBase):
    """Sigmoid cross-entropy with a per-element weight in its backward only
    (HouyuZhang1007/Pedestrian-Attribute-Recognition,
    caffe/src/caffe/layers/sigmoid_weighted_cross_entropy_loss_layer.cpp and .cu), taken when
    the layer has three bottoms: scores x, targets p, weights w (all of one count):

        loss = sum -[p log s + (1 - p) log(1 - s)] / N          (s = sigmoid(x); unweighted)
        dL/dx = loss_weight [s (1 - p) / (2 (1 - w)) - p (1 - s) / (2 w)] / N

    The backward is the fork's: it weighs the two terms by 1 / (2 (1 - w)) and 1 / (2 w),
    which the forward's loss does not. No prototxt fields. Targets and weights get no
    gradient.
    """
    exact_num_bottom_blobs = 3

    def forward_cpu(self, bottom, top):
        x, t = self._xt(bottom)
        top[0].data[...] = np.sum(_sigmoid_ce(x, t)) / bottom[0].shape[0]

    def _grad(self, bottom):
        x, p = self._xt(bottom)
        w = bottom[2].data.reshape(-1).astype(np.float64)
        s = _sigmoid(x)
        return s * (1 - p) / (2 * (1 - w)) - p * (1 - s) / (2 * w)
