"""S-CNN's C3D (zhengshou/scnn, C3D-v1.0 / C3D-v1.1 ``C3D_overlap_loss``): SoftmaxWithLoss with a
third bottom, the temporal overlap of each segment with its ground truth.

It keeps the BVLC type name, so it is a variant chosen per layer (``register_variant``): a
SoftmaxWithLoss with 3 bottoms whose third bottom is named like ``overlap`` (SDS-RCNN's 3-bottom
form, per-label weights, is ``caffepy/forks/detection/sds_rcnn.py``; nothing else in the two
prototxt forms tells them apart).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import register_variant
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient
from ..detection.sds_rcnn import is_overlap_bottom


@register_variant("SoftmaxWithLoss", lambda lp: len(lp.bottom) == 3 and is_overlap_bottom(lp))
class OverlapSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """Softmax loss plus S-CNN's overlap loss (zhengshou/scnn,
    C3D-v1.1/C3D_overlap_loss/src/caffe/layers/softmax_loss_layer.cpp; C3D-v1.0 is the same with
    the normaliser N).

    p = softmax(x) over ``axis``; for each non-ignored position i with label y_i and overlap o_i,
    s_i = o_i^(1/4) (the fork's (o^(1/8))^2) and lambda = 1 (fixed in the fork):
        loss = sum_i [-log(max(p_iy, FLT_MIN)) + lambda [y_i != 0] (0.5 p_iy^2 / s_i - 0.5)] / norm
        dL/dx_ic = [p_ic - [c = y_i] + lambda [y_i != 0] p_iy^2 ([c = y_i] - p_ic) / s_i]
                   * top_diff / norm      (0 at ignored positions)
    norm: ``loss_param`` normalization as SoftmaxWithLoss (VALID by default). Class 0 is the
    background, which gets no overlap term.

    prototxt: as SoftmaxWithLoss (``loss_param { ignore_label normalization }``, ``softmax_param``).
    Bottoms: scores x (N x C), labels (N), overlap (N values in (0, 1]). Tops: loss [, probabilities].
    No gradient to labels or overlaps.
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        SoftmaxWithLossLayer.reshape(self, bottom, top)
        if bottom[2].count != bottom[1].count:
            raise self.error("the overlaps (bottom[2], shape %s) must give one value per label "
                             "(bottom[1], shape %s)" % (bottom[2].shape, bottom[1].shape), ShapeError)

    def _terms(self, bottom):
        s = np.sqrt(np.sqrt(np.sqrt(bottom[2].data.reshape(self.outer, self.inner)))) ** 2
        fg = self.valid & (self.labels != 0)
        return s, fg

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        py = self._label_prob()
        s, fg = self._terms(bottom)
        soft = -np.sum(np.log(np.maximum(py, FLT_MIN))[self.valid])
        overlap = np.sum(np.where(fg, 0.5 * py * py / np.where(fg, s, 1.0) - 0.5, 0.0))
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = (soft + overlap) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down, what=("label", "overlap"))
        if not propagate_down[0]:
            return
        py = self._label_prob()
        s, fg = self._terms(bottom)
        d = self._prob_minus_onehot()
        g = np.where(fg, py * py / np.where(fg, s, 1.0), 0.0)[:, None, :]
        onehot = np.zeros_like(d)
        np.put_along_axis(onehot, self.labels[:, None, :], 1.0, axis=1)
        d += g * (onehot - self.prob)
        d *= self.valid[:, None, :]
        d *= float(top[0].diff) / self.norm
        bottom[0].diff[...] = d.reshape(bottom[0].shape)
