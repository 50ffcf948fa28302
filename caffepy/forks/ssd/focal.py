"""The detection forks' softmax focal loss (Lin et al.): ``FocalLoss`` with a
``focal_loss_param { axis engine alpha gamma }`` and SSD's ``MultiBoxFocalLoss``, whose confidence
term it is (chuanqi305/FocalLoss's layers, as jolibrain/caffe, troyliu0105/caffe,
BOBrown/JADF-caffe and the SSD focal-loss forks carry them; their FocalLossParameter numbers
engine 1, axis 2, alpha 3 [default 0.25], gamma 4 [default 2]).

With p = softmax(x) over the class axis, p_t = p[label] and l = log(max(p_t, FLT_MIN)):
    loss per position = -alpha (1 - p_t)^gamma l
and the forks' gradient on the logits, which is the exact one:
    c = label:  alpha (1 - p_t)^gamma (gamma p_t l + p_t - 1)
    c != label: alpha ((1 - p_t)^(gamma - 1) (-gamma l p_t p_c) + (1 - p_t)^gamma p_c)

happynear/caffe-windows publishes another layer under the type ``FocalLoss`` (caffepy's
``FocalLoss``, :mod:`caffepy.forks.face.focal`: (alpha -/+ p_t)^gamma, with a ``type`` and a
``beta``); a FocalLoss layer that sets ``axis`` or ``engine``, fields only the detection forks
declare, is this one.
"""
import numpy as np

from ...layers.base import register_layer, register_variant
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient
from .multibox import MultiBoxLossLayer

ALPHA, GAMMA = 0.25, 2.0        # the detection forks' defaults


def focal_params(layer):
    """(alpha, gamma) of ``layer``'s focal_loss_param, with the detection forks' defaults where
    the file leaves them out (caffepy's FocalLossParameter carries happynear's defaults); a
    negative gamma is the layer's error."""
    p = layer.layer_param.focal_loss_param
    alpha = float(p.alpha) if p.HasField("alpha") else ALPHA
    gamma = float(p.gamma) if p.HasField("gamma") else GAMMA
    if gamma < 0:
        raise layer.error("focal_loss_param.gamma must be >= 0, got %g" % gamma)
    return alpha, gamma


def softmax_focal(prob, labels, alpha, gamma):
    """prob (outer, C, inner) softmax outputs, labels (outer, inner) ints in [0, C) ->
    (loss per position (outer, inner), gradient on the logits (outer, C, inner)) as the module
    doc gives them."""
    lab = labels[:, None, :]
    pt = np.take_along_axis(prob, lab, axis=1)[:, 0, :]
    lp = np.log(np.maximum(pt, FLT_MIN))
    q = 1.0 - pt
    qg = q ** gamma
    with np.errstate(divide="ignore", invalid="ignore"):
        other = alpha * (q ** (gamma - 1) * (-gamma * lp * pt) + qg)
    grad = other[:, None, :] * prob
    np.put_along_axis(grad, lab, (alpha * qg * (gamma * pt * lp + pt - 1))[:, None, :], axis=1)
    return -alpha * qg * lp, grad


def _detection_focal(lp):
    p = lp.focal_loss_param
    return p.HasField("axis") or p.HasField("engine")


@register_variant("FocalLoss", _detection_focal)
class SoftmaxFocalLossLayer(SoftmaxWithLossLayer):
    """chuanqi305/FocalLoss's ``FocalLoss``: loss = sum over the valid positions of the module
    doc's term / normalizer (``loss_param { ignore_label normalization normalize }`` as
    SoftmaxWithLoss), gradient the module doc's times top diff / normalizer, 0 at ignored
    positions. The class axis is ``focal_loss_param.axis`` (default 1); the fork's softmax runs
    over ``softmax_param.axis`` and the two must agree.

    prototxt: ``focal_loss_param { axis: 1 alpha: 0.25 gamma: 2 }``. Bottoms: x (..., C at axis,
    ...), labels (outer * inner). Tops: loss () [, p (shape of x)].
    """

    def layer_setup(self, bottom, top):
        super(SoftmaxFocalLossLayer, self).layer_setup(bottom, top)
        self.alpha, self.gamma = focal_params(self)

    def _axis_param(self):
        return self.layer_param.focal_loss_param.axis

    def reshape(self, bottom, top):
        super(SoftmaxFocalLossLayer, self).reshape(bottom, top)
        soft = self.layer_param.softmax_param.axis
        if soft % len(bottom[0].shape) != self.axis:
            raise self.error("focal_loss_param.axis %d and softmax_param.axis %d differ (the fork "
                             "normalises over one and reads classes along the other)"
                             % (self.layer_param.focal_loss_param.axis, soft))

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        loss, self.grad = softmax_focal(self.prob, self.labels, self.alpha, self.gamma)
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = np.sum(loss[self.valid]) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if propagate_down[0]:
            d = self.grad * self.valid[:, None, :] * (float(top[0].diff) / self.norm)
            bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("MultiBoxFocalLoss")
class MultiBoxFocalLossLayer(MultiBoxLossLayer):
    """SSD's MultiBoxLoss (:class:`~caffepy.forks.ssd.multibox.MultiBoxLossLayer`: matching,
    mining, the localisation term, the normaliser) whose ``conf_loss_type: SOFTMAX`` term is the
    focal loss of the module doc, summed over the positives and mined negatives (the forks' inner
    FocalLoss layer with normalization NONE), with its gradient; hard-negative mining still
    ranks by the softmax loss -log p(background), as the forks' MineHardExamples does.
    ``conf_loss_type: LOGISTIC`` is MultiBoxLoss's sigmoid cross entropy, unchanged.

    prototxt: ``multibox_loss_param { ... }`` as MultiBoxLoss, ``focal_loss_param { alpha: 0.25
    gamma: 2 }``, ``loss_param { normalization: VALID }``.
    """

    def layer_setup(self, bottom, top):
        super(MultiBoxFocalLossLayer, self).layer_setup(bottom, top)
        self.alpha, self.gamma = focal_params(self)

    def _conf_loss(self, b, i, labels):
        """The focal loss of the chosen priors; their gradient is kept for the backward, which
        asks for the same priors."""
        if self.logistic:
            return super(MultiBoxFocalLossLayer, self)._conf_loss(b, i, labels)
        loss, grad = softmax_focal(self.prob[b, i][:, :, None], labels[:, None], self.alpha,
                                   self.gamma)
        self.conf_grad = grad[:, :, 0]
        return loss.sum()

    def _conf_grad(self, b, i, labels):
        if self.logistic:
            return super(MultiBoxFocalLossLayer, self)._conf_grad(b, i, labels)
        return self.conf_grad
