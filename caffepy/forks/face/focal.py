"""Loss and metric of the face-recognition forks: happynear/caffe-windows' softmax FocalLoss, whose
schema (``focal_loss_param { type gamma alpha beta }``) xialuxi/arcface-caffe's nets also use
(the detection forks' FocalLoss, with ``axis`` / ``engine``, is :mod:`caffepy.forks.ssd.focal`), and
happynear's Accuracy ``min_is_better``.
"""
import numpy as np

from ...layers.accuracy import AccuracyLayer
from ...layers.base import register_layer, register_variant
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient


@register_layer("FocalLoss")
class FocalLossLayer(SoftmaxWithLossLayer):
    """Softmax focal loss (happynear/caffe-windows). With p = softmax(x) over ``axis`` and
    p_t = p[label]:
        q = (alpha - p_t)^gamma  (ORIGIN, LINEAR)   or   (alpha + p_t)^gamma  (ONEADDP)
        loss = -sum_{valid} q log(max(p_t, FLT_MIN)) / normalizer
    (alpha = 1: Lin et al.'s (1 - p_t)^gamma without class weight; the fork fills its "ones"
    with alpha.) Backward is the fork's: with
        g = q - gamma q p_t log(p_t) / max(1 - p_t, 1e-10)   (ORIGIN, LINEAR)
        g = q + gamma q p_t log(p_t) / max(1 + p_t, 1e-10)   (ONEADDP)
    dx_c = g (p_c - [c = label]) dL / normalizer, 0 at ignored positions; exact for alpha = 1
    (for other alpha the fork still divides by 1 -/+ p_t). beta is read and unused, as the fork.

    prototxt: ``focal_loss_param { type: ORIGIN gamma: 2 alpha: 1 beta: 1 }`` (xialuxi's proto
    defaults alpha to 0.25: its files set it), ``softmax_param { axis: 1 }``, ``loss_param
    { ignore_label normalization: VALID normalize }`` as SoftmaxWithLoss. Bottoms: x
    (..., C at axis, ...), labels (outer * inner). Tops: loss () [, p (shape of x)].
    """

    def layer_setup(self, bottom, top):
        super(FocalLossLayer, self).layer_setup(bottom, top)
        p = self.layer_param.focal_loss_param
        if p.gamma < 0:
            raise self.error("focal_loss_param.gamma must be >= 0, got %g" % p.gamma)
        if p.alpha <= 0:
            raise self.error("focal_loss_param.alpha must be > 0, got %g" % p.alpha)
        self.sign = 1.0 if p.type == p.ONEADDP else -1.0

    def forward_cpu(self, bottom, top):
        p = self.layer_param.focal_loss_param
        self._softmax(bottom, top)
        self.pt = self._label_prob()
        self.logp = np.log(np.maximum(self.pt, FLT_MIN))
        with np.errstate(invalid="ignore"):
            self.q = (p.alpha + self.sign * self.pt) ** p.gamma
        loss = -np.sum((self.q * self.logp)[self.valid])
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = loss / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        gamma = self.layer_param.focal_loss_param.gamma
        den = np.maximum(1 + self.sign * self.pt, 1e-10)
        g = self.q + self.sign * gamma * self.q / den * self.logp * self.pt
        d = self._prob_minus_onehot()
        d *= (g * self.valid)[:, None, :] * (float(top[0].diff) / self.norm)
        bottom[0].diff[...] = d.reshape(bottom[0].shape)


class _Negated(object):
    def __init__(self, blob):
        self.data = self.cpu_data = -blob.cpu_data


@register_variant("Accuracy", lambda lp: lp.accuracy_param.min_is_better)
class MinIsBetterAccuracyLayer(AccuracyLayer):
    """happynear's Accuracy with ``accuracy_param { min_is_better: true }`` (distances, angles):
    the top_k *smallest* scores are the predictions, i.e. Accuracy on -x (ties against the true
    class, as caffepy's Accuracy). ``min_is_better: false`` is BVLC's Accuracy."""

    def forward_cpu(self, bottom, top):
        super(MinIsBetterAccuracyLayer, self).forward_cpu([_Negated(bottom[0]), bottom[1]], top)
