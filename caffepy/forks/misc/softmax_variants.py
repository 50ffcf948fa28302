"""Two forks' SoftmaxWithLoss with extra softmax_param fields, CSLJXing/caffe's
SoftmaxWithCrossEntropyLoss and the soft-target SoftmaxCrossEntropyLoss (below).

Kevinduan23/caffe (src/caffe/layers/softmax_loss_layer.cpp and .cu): label smoothing. With
``label_smooth: true`` and e = ``label_smooth_factor`` > 0 (the fork's default, when the field is
not given, is 1e-5), C classes and the targets q[label] = 1 - e, q[c] = e / C elsewhere:
    loss = -sum_{i valid} sum_c q[i, c] log max(p[i, c], FLT_MIN) / normalizer
    dL/dx = (p - q) top_diff / normalizer   (0 at ignored positions)
The targets sum to 1 - e / C, so the fork's backward is the gradient of its loss up to
e / C p top_diff / normalizer. Without ``label_smooth`` (or with e <= 0) it is Caffe's layer.

niuchuangnn/Caffe_custom (src/caffe/layers/weightedSoftmax_loss_layer.cpp):
WeightedSoftmaxWithLoss with two bottoms and a weight per class. With ``label_scale`` given, the
label ``label_id[k]`` (the first k that matches) weighs w = ``label_scale[k]``, every other
label 1:
    loss = -sum_{i valid} w[label_i] log max(p[i, label_i], FLT_MIN) / normalizer
    dL/dx = w[label_i] (p - onehot(label)) top_diff / normalizer
Without ``label_scale`` every weight is 1 (``label_id`` alone is not read). The normalizer counts
the valid positions whatever their weights (``loss_param { ignore_label normalization
normalize }`` as Caffe's). Refused: ``label_id`` and ``label_scale`` of different lengths.

prototxt: ``softmax_param { axis label_smooth label_smooth_factor }`` /
``softmax_param { axis label_id label_scale }``. Bottoms: scores, labels. Tops: loss
[, probabilities].
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer, register_variant
from ...layers.loss import SoftmaxWithLossLayer, normalization_mode, normalizer
from ...layers.softmax import softmax

FLT_MIN = np.finfo(np.float32).tiny
_KEVINDUAN_DEFAULT_FACTOR = 1e-5


def _label_smooth(lp):
    return lp.softmax_param.HasField("label_smooth")


@register_variant("SoftmaxWithLoss", _label_smooth)
class LabelSmoothSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    __doc__ = __doc__.split("niuchuangnn/")[0]

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        sp = self.layer_param.softmax_param
        e = (float(np.float32(sp.label_smooth_factor)) if sp.HasField("label_smooth_factor")
             else _KEVINDUAN_DEFAULT_FACTOR)
        self.eps = e if sp.label_smooth and e > 0 else 0.0

    def _targets(self):
        q = np.full_like(self.prob, self.eps / self.channels)
        np.put_along_axis(q, self.labels[:, None, :], 1 - self.eps, axis=1)
        return q

    def forward_cpu(self, bottom, top):
        if not self.eps:
            return super().forward_cpu(bottom, top)
        self._softmax(bottom, top)
        logp = np.log(np.maximum(self.prob, FLT_MIN))
        per = -(self._targets() * logp).sum(axis=1)
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = per[self.valid].sum() / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        if not self.eps:
            return super().backward_cpu(top, propagate_down, bottom)
        super().backward_cpu(top, propagate_down, bottom)     # checks the label's propagate_down
        if propagate_down[0]:
            d = (self.prob - self._targets()) * self.valid[:, None, :]
            bottom[0].diff[...] = (d * (float(top[0].diff) / self.norm)).reshape(bottom[0].shape)

    def forward_gpu(self, bottom, top):  # the parent's GPU kernel has no label smoothing
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)


def _class_weights(lp):
    sp = lp.softmax_param
    return len(sp.label_id) > 0 or len(sp.label_scale) > 0 or len(lp.bottom) == 2


@register_variant("WeightedSoftmaxWithLoss", _class_weights)
class ClassScaledSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    __doc__ = "niuchuangnn/" + __doc__.split("niuchuangnn/")[1]
    type = "WeightedSoftmaxWithLoss"

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        sp = self.layer_param.softmax_param
        self.scales = {}
        if len(sp.label_scale):
            if len(sp.label_id) != len(sp.label_scale):
                raise self.error("softmax_param: %d label_id for %d label_scale (one each)"
                                 % (len(sp.label_id), len(sp.label_scale)))
            for k, s in zip(sp.label_id, sp.label_scale):
                self.scales.setdefault(int(k), float(np.float32(s)))

    def _weights(self):
        w = np.ones(self.labels.shape, dtype=self.prob.dtype)
        for k, s in self.scales.items():
            w[self.labels == k] = s
        return w

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        logp = np.log(np.maximum(self._label_prob(), FLT_MIN))
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = -(self._weights() * logp)[self.valid].sum() / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        super().backward_cpu(top, propagate_down, bottom)
        if propagate_down[0] and self.scales:
            w = self._weights()[:, None, :]
            bottom[0].diff[...] = (bottom[0].diff.reshape(w.shape[0], -1, w.shape[2]) * w
                                   ).reshape(bottom[0].shape)


_FLT_MIN = np.finfo(np.float32).tiny


def _softmax_view(layer, blob):
    """(axis, outer, inner) of ``blob`` around the layer's ``softmax_param.axis``."""
    axis = blob.canonical_axis_index(layer.layer_param.softmax_param.axis)
    return axis, blob.count_range(0, axis), blob.count_range(axis + 1)


@register_layer("SoftmaxWithCrossEntropyLoss")
class SoftmaxWithCrossEntropyLossLayer(LossLayer):
    """CSLJXing/caffe's SoftmaxWithCrossEntropyLoss (commit 6232af0, src/caffe/layers/
    softmax_cross_entropy_loss_layer.cpp; also 3DMM-ICME2024/tc3d): the KL divergence between the
    softmaxes of two score blobs of one shape, q = softmax(target), p = softmax(prediction), along
    ``softmax_param.axis``:

        L = sum q log(max(q, FLT_MIN) / max(p, FLT_MIN)) / D,   dL/dx = (p - q) loss_weight / D

    D = outer count, or outer x inner count with ``loss_param.normalize: true``. No gradient to
    the target (the fork stops on a request). One top.
    """

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape:
            raise self.error("bottom[0] %s and bottom[1] %s should have the same shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        self.axis, self.outer, self.inner = _softmax_view(self, bottom[0])
        top[0].reshape(())

    def _norm(self):
        return self.outer * (self.inner if self.layer_param.loss_param.normalize else 1)

    def forward_cpu(self, bottom, top):
        self.p = softmax(bottom[0].data, self.axis)
        self.q = softmax(bottom[1].data, self.axis)
        ratio = np.maximum(self.q, _FLT_MIN) / np.maximum(self.p, _FLT_MIN)
        top[0].data[...] = np.sum(self.q * np.log(ratio)) / self._norm()

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to target score inputs")
        if propagate_down[0]:
            scale = top[0].diff.reshape(-1)[0] / self._norm()
            bottom[0].diff[...] = (self.p - self.q) * scale

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("SoftmaxCrossEntropyLoss")
class SoftmaxCrossEntropyLossLayer(LossLayer):
    """SoftmaxCrossEntropyLoss of the forks that publish it (xieguotian/caffe,
    src/caffe/layers/softmax_cross_entropy_loss_layer.cpp; mitmul/caffe's has the same loss and
    gradient, normalised by N only): the cross entropy between soft targets t (a distribution per
    position, e.g. mixup's or label smoothing's labels, the shape of the scores) and
    p = softmax(x) along ``softmax_param.axis``:

        L = -sum t log max(p, FLT_MIN) / n,   dL/dx = (p - t) top_diff / n

    n = ``loss_param.normalization`` of every position (VALID and FULL: outer x inner,
    BATCH_SIZE: outer, NONE: 1; legacy ``normalize`` as Caffe's), at least 1. The gradient is the
    forks' p - t, the exact one when each position's targets sum to 1. No gradient to the
    targets (the forks stop on a request). Tops: loss [, p].
    """
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.mode = normalization_mode(self.layer_param.loss_param)

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise self.error("the targets %s must have one value per score %s"
                             % (bottom[1].shape, bottom[0].shape), ShapeError)
        self.axis, self.outer, self.inner = _softmax_view(self, bottom[0])
        top[0].reshape(())
        if len(top) >= 2:
            top[1].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        self.p = softmax(bottom[0].data, self.axis)
        t = bottom[1].data.reshape(self.p.shape)
        self.norm = normalizer(self.mode, self.layer_param.loss_param, self.outer, self.inner,
                               self.outer * self.inner)
        top[0].data[...] = -np.sum(t * np.log(np.maximum(self.p, _FLT_MIN))) / self.norm
        if len(top) >= 2:
            top[1].data[...] = self.p

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to the target inputs")
        if propagate_down[0]:
            t = bottom[1].data.reshape(self.p.shape)
            bottom[0].diff[...] = (self.p - t) * (top[0].diff.reshape(-1)[0] / self.norm)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
