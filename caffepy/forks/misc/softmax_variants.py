"""Two forks' SoftmaxWithLoss with extra softmax_param fields.

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

from ...layers.base import register_variant
from ...layers.loss import SoftmaxWithLossLayer

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
