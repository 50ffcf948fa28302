"""SDS-RCNN's Caffe (garrickbrazil/SDS-RCNN, external/caffe): SoftmaxWithLoss with a third bottom
of per-label weights.

It keeps the BVLC type name, so it is a variant chosen per layer (``register_variant``): a
SoftmaxWithLoss with 3 bottoms whose third bottom is not named like an overlap (S-CNN's overlap
form, ``caffepy/forks/video/scnn.py``, has the same bottoms and no parameter of its own, so the
name of the third bottom is what tells them apart).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import register_variant
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient


def is_overlap_bottom(lp):
    """S-CNN's third bottom (its VideoData's ``overlap`` top)."""
    return "overlap" in lp.bottom[2].lower()


@register_variant("SoftmaxWithLoss", lambda lp: len(lp.bottom) == 3 and not is_overlap_bottom(lp))
class WeightedSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """Softmax loss with one weight per label, normalised by the sum of the weights
    (garrickbrazil/SDS-RCNN, external/caffe/src/caffe/layers/softmax_loss_layer.cpp).

    p = softmax(x) over ``axis``; over the positions i whose label is not ignored,
        loss = -sum_i w_i log(max(p[i, y_i], FLT_MIN)) / sum_i w_i   (0 when sum_i w_i = 0)
        dL/dx[i] = w_i (p[i] - onehot(y_i)) * top_diff / sum_i w_i   (0 at ignored positions)
    ``loss_param.normalization`` / ``normalize`` are read but not used, as in the fork.

    prototxt: as SoftmaxWithLoss (``loss_param { ignore_label }``, ``softmax_param { axis: 1 }``).
    Bottoms: scores x (..., C at axis, ...), labels (outer * inner values), weights w (the shape of
    the labels, w >= 0). Tops: loss (scalar) [, probabilities]. No gradient to labels or weights.
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        SoftmaxWithLossLayer.reshape(self, bottom, top)
        if bottom[2].shape != bottom[1].shape:
            raise self.error("the weights (bottom[2], shape %s) must have the shape of the labels "
                             "(bottom[1], shape %s)" % (bottom[2].shape, bottom[1].shape), ShapeError)

    def _weights(self, bottom):
        return np.where(self.valid, bottom[2].data.reshape(self.outer, self.inner), 0.0)

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        w = self._weights(bottom)
        self.wsum = float(w.sum())
        loss = -np.sum(w * np.log(np.maximum(self._label_prob(), FLT_MIN)))
        top[0].data[...] = 0.0 if self.wsum == 0 else loss / self.wsum

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down, what=("label", "weight"))
        if not propagate_down[0]:
            return
        d = self._prob_minus_onehot() * self._weights(bottom)[:, None, :]
        d *= 0.0 if self.wsum == 0 else float(top[0].diff) / self.wsum
        bottom[0].diff[...] = d.reshape(bottom[0].shape)
