"""Point-supervision losses of "What's the Point: Semantic Segmentation with Point Supervision"
(abearman/whats-the-point1's Caffe): SoftmaxWithLossExpectation, SoftmaxWithLossObjectness and
SoftmaxWithLossObjectnessPresence, its V1 types SOFTMAX_LOSS_EXPECTATION, SOFTMAX_LOSS_OBJECTNESS
and SOFTMAX_LOSS_OBJECTNESS_PRESENCE.

Both are softmax losses over the class axis (``softmax_param { axis }``, default 1) whose label
bottom carries extra channels after the per-pixel label: labelled pixels (user clicks) get the
usual -log p[label]; pixels whose label is ``loss_param { ignore_label }`` get a term built from
the objectness channel (0..255: P = 1 - objectness / 255 is the prior probability of background).
Normalisation: ``loss_param { normalize }`` (the fork's default true) divides by the pixel count
(H W per image), false by the number of images. The fork runs its pixel loop over the first image
only (its nets use batch size 1); caffepy treats every image the same way (identical at N = 1).
Probabilities are clamped at FLT_MIN as in the fork. An optional second top is the softmax.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer

_FLT_MIN = np.finfo(np.float32).tiny


class _PointLoss(LossLayer):
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2
    label_channels = 2

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        self.ignore = lp.ignore_label if lp.HasField("ignore_label") else None
        self.normalize = lp.normalize if lp.HasField("normalize") else True

    def _channels(self):
        return self.label_channels

    def reshape(self, bottom, top):
        axis = self.layer_param.softmax_param.axis
        self.axis = axis % bottom[0].num_axes
        shape = bottom[0].shape
        self.outer = int(np.prod(shape[:self.axis]))
        self.inner = int(np.prod(shape[self.axis + 1:]))
        k = self._channels()
        if bottom[1].count != self.outer * self.inner * k:
            raise self.error("label count %d must be %d x N x H x W = %d (label, objectness%s)"
                             % (bottom[1].count, k, self.outer * self.inner * k,
                                ", classes, rank" if k == 4 else ", classes" if k == 3 else ""),
                             ShapeError)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.outer, -1, self.inner).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.prob = e / e.sum(axis=1, keepdims=True)
        lab = bottom[1].data.reshape(self.outer, self._channels(), self.inner)
        loss, self.grad = 0.0, np.empty_like(self.prob)
        for n in range(self.outer):
            loss += self._image(self.prob[n], lab[n], self.grad[n])
        self.denom = self.outer * self.inner if self.normalize else self.outer
        top[0].data[...] = loss / self.denom
        if len(top) > 1:
            top[1].data[...] = self.prob.reshape(top[1].shape)

    def _labelled(self, prob, label, grad, mask):
        """-log p[label] over the pixels in mask; grad = prob - onehot there."""
        j = np.nonzero(mask)[0]
        lv = label[j].astype(int)
        grad[:, j] = prob[:, j]
        grad[lv, j] -= 1
        return -np.log(np.maximum(prob[lv, j], _FLT_MIN)).sum()

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            g = self.grad * (float(top[0].diff) / self.denom)
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("SoftmaxWithLossObjectness")
class SoftmaxWithLossObjectnessLayer(_PointLoss):
    """Softmax loss with an objectness prior on unlabelled pixels (abearman/whats-the-point1,
    src/caffe/layers/softmax_loss_objectness_layer.cpp). Label bottom: N x 2 x H x W (label,
    objectness). For an ignored pixel with background probability S0:

        l = -(P log S0 + (1 - P) log(1 - S0))
        dl/dz_0 = S0 - P;  dl/dz_c = S_c (P - S0) / (1 - S0)  (c > 0)
    """
    label_channels = 2

    def _image(self, prob, lab, grad):
        label = lab[0]
        ign = (label == self.ignore) if self.ignore is not None else np.zeros(label.shape, bool)
        loss = self._labelled(prob, label, grad, ~ign)
        j = np.nonzero(ign)[0]
        if j.size:
            p = 1.0 - lab[1, j].astype(int) / 255.0
            s0 = np.maximum(prob[0, j], _FLT_MIN)
            loss -= (p * np.log(s0) + (1 - p) * np.log(1 - s0)).sum()
            grad[:, j] = prob[:, j] * ((p - s0) / (1 - s0))
            grad[0, j] = prob[0, j] - p
        return loss


@register_layer("SoftmaxWithLossExpectation")
class SoftmaxWithLossExpectationLayer(_PointLoss):
    """Softmax loss with an expectation over the classes present in the image on unlabelled
    pixels (abearman/whats-the-point1, src/caffe/layers/softmax_loss_expectation_layer.cpp).
    Label bottom: N x 3 x H x W (label, objectness, present classes), N x 4 x H x W with
    ``loss_param { ignore_rank: false }`` (a fourth, rank channel this layer does not read). The
    present classes are the third channel's values read in order up to the first 0. For an
    ignored pixel, with a0 = P, a_c = (1 - P) / |present| and s = a0 S0 + sum_present a_c S_c:

        l = -log s
        dl/dz_i = S_i (1 - a_c / s) for i present;  S_i otherwise (background included)

    The background's gradient is the fork's: it leaves out the -a0 S0 / s term (exact when the
    objectness is 255, P = 0).
    """

    def _channels(self):
        return 3 if self.layer_param.loss_param.ignore_rank else 4

    def _image(self, prob, lab, grad):
        label = lab[0]
        ign = (label == self.ignore) if self.ignore is not None else np.zeros(label.shape, bool)
        loss = self._labelled(prob, label, grad, ~ign)
        j = np.nonzero(ign)[0]
        if j.size:
            classes = []
            for v in lab[2]:
                if int(v) == 0:
                    break
                classes.append(int(v))
            p = 1.0 - lab[1, j].astype(int) / 255.0
            ac = (1 - p) / len(classes) if classes else np.zeros_like(p)
            s = p * np.maximum(prob[0, j], _FLT_MIN)
            for c in classes:
                s = s + ac * np.maximum(prob[c, j], _FLT_MIN)
            loss -= np.log(s).sum()
            grad[:, j] = prob[:, j]
            for c in sorted(set(classes)):
                grad[c, j] = prob[c, j] * (1 - ac / s)
        return loss


@register_layer("SoftmaxWithLossObjectnessPresence")
class SoftmaxWithLossObjectnessPresenceLayer(_PointLoss):
    """Softmax loss with an objectness prior over the classes present in the image
    (abearman/whats-the-point1, src/caffe/layers/softmax_loss_objectness_presence_layer.cpp).
    Label bottom: N x 2 x H x W (label, objectness); the present classes are the distinct label
    values other than 255. For an ignored pixel, with Q = sum_present S_c:

        l = -(P log S0 + (1 - P) log Q)
        dl/dz_0 = S0 - P;  dl/dz_c = S_c (P + Q - 1) / Q (c > 0 present);  S_c otherwise

    (the loss's derivative, except that the fork leaves out the -(1 - P) S0 / Q term of class 0
    when the background is itself among the present classes).
    """
    label_channels = 2

    def _image(self, prob, lab, grad):
        label = lab[0]
        ign = (label == self.ignore) if self.ignore is not None else np.zeros(label.shape, bool)
        loss = self._labelled(prob, label, grad, ~ign)
        j = np.nonzero(ign)[0]
        if j.size:
            present = sorted(set(int(v) for v in label) - {255})
            p = 1.0 - lab[1, j].astype(int) / 255.0
            s0 = np.maximum(prob[0, j], _FLT_MIN)
            q = sum(np.maximum(prob[c, j], _FLT_MIN) for c in present) if present else \
                np.full(j.shape, _FLT_MIN)
            loss -= (p * np.log(s0) + (1 - p) * np.log(q)).sum()
            grad[:, j] = prob[:, j]
            grad[0, j] = prob[0, j] - p
            for c in present:
                if c > 0:
                    grad[c, j] = prob[c, j] * (p + q - 1) / q
        return loss
