"""bogger/caffe-multigpu's SoftmaxLossWithInvalid (V1 type SOFTMAX_LOSS_WITH_INVALID;
src/caffe/layers/softmax_loss_with_invalid_layer.cpp): SoftmaxWithLoss whose negative labels mark
items without a label (its multi-label car-attribute nets, where some attributes are unknown).
The fork's ``label_size`` of its data layers is read by caffepy.forks.misc.fork_data.
"""
import numpy as np

from ...layers.base import register_layer
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer, reject_label_gradient
from ...layers.softmax import softmax


@register_layer("SoftmaxLossWithInvalid")
class SoftmaxLossWithInvalidLayer(SoftmaxWithLossLayer):
    """Softmax over the channels, then the log loss of the positions whose label is >= 0.

        p = softmax(x) over axis 1 (x: N x C x ..., labels: N x ... one per position)
        valid = label >= 0;  n = number of valid positions
        loss = -sum_{valid} log(max(p[label], FLT_MIN)) / n
        dL/dx = (p - onehot(label)) * top_diff / n at valid positions, 0 at the others

    As the fork, n is the count itself: a batch without a valid label gives 0 / 0 (NaN), and no
    ``loss_param`` (ignore_label, normalization) is read. A label is truncated to an integer
    (``static_cast<int>``); a valid one must be below C. Bottoms: x, label; tops: loss [, p].
    """
    type = "SoftmaxLossWithInvalid"

    def layer_setup(self, bottom, top):
        self.ignore_label = None

    def _axis_param(self):
        return 1

    def forward_cpu(self, bottom, top):
        self.prob = softmax(bottom[0].data.reshape(self.outer, self.channels, self.inner), axis=1)
        if len(top) >= 2:
            top[1].data[...] = self.prob.reshape(top[1].shape)
        raw = bottom[1].data.reshape(self.outer, self.inner)
        self.valid = raw >= 0
        labels = np.where(self.valid, raw, 0).astype(np.int64)
        bad = self.valid & (labels >= self.channels)
        if bad.any():
            raise self.error("label %d out of range [0, %d)" % (labels[bad][0], self.channels))
        self.labels = labels
        self.count = int(self.valid.sum())
        loss = -np.sum(np.log(np.maximum(self._label_prob(), FLT_MIN))[self.valid])
        with np.errstate(invalid="ignore", divide="ignore"):
            top[0].data[...] = np.float64(loss) / self.count

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        d = self._prob_minus_onehot()
        d *= self.valid[:, None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            d *= np.float64(top[0].diff) / self.count
        bottom[0].diff[...] = d.reshape(bottom[0].shape)
