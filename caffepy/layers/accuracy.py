"""Accuracy: the top-k classification accuracy (a metric, not a loss; no backward)."""
import numpy as np

from .base import Layer, register_layer
from .softmax import prediction_label_view


@register_layer("Accuracy")
class AccuracyLayer(Layer):
    """Fraction of (non-ignored) positions whose true class is among the top_k scores.

    A position i with label l counts as correct when fewer than top_k classes k satisfy
    x[i, k] >= x[i, l] for k != l (ties count against the true class, as in Caffe).
    accuracy = correct / counted (0 when nothing is counted). The optional second top holds the
    per-class accuracy: correct_c / counted_c for each class c (0 where counted_c == 0).

    prototxt: ``accuracy_param { top_k: 1 axis: 1 ignore_label }``.
    Blobs: bottom x (..., C at axis, ...), bottom label (count outer*inner, values in [0, C));
    top accuracy (scalar); optional top per-class accuracy (C,).
    Backward is not implemented (Caffe's neither); force_backward does not ask for it.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.accuracy_param
        self.top_k = p.top_k
        self.ignore_label = p.ignore_label if p.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        p = self.layer_param.accuracy_param
        if self.top_k > bottom[0].count // max(bottom[1].count, 1):
            raise self.error("top_k (%d) must be less than or equal to the number of classes (%d)"
                             % (self.top_k, bottom[0].count // max(bottom[1].count, 1)))
        self.axis, self.outer, self.channels, self.inner = prediction_label_view(self, bottom,
                                                                                 p.axis)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape((self.channels,))

    def forward_cpu(self, bottom, top):
        x = bottom[0].cpu_data.reshape(self.outer, self.channels, self.inner)
        labels = bottom[1].cpu_data.reshape(self.outer, self.inner).astype(np.int64)
        counted = np.ones(labels.shape, dtype=bool)
        if self.ignore_label is not None:
            counted = labels != self.ignore_label
        bad = counted & ((labels < 0) | (labels >= self.channels))
        if bad.any():
            raise self.error("label %d out of range [0, %d)" % (labels[bad][0], self.channels))
        safe = np.where(counted, labels, 0)
        true_score = np.take_along_axis(x, safe[:, None, :], axis=1)
        better = np.sum(x >= true_score, axis=1) - 1          # the true class itself is excluded
        correct = counted & (better < self.top_k)
        n = int(counted.sum())
        top[0].data[...] = float(correct.sum()) / n if n else 0.0
        if len(top) > 1:
            per_counted = np.bincount(labels[counted], minlength=self.channels)
            per_correct = np.bincount(labels[correct], minlength=self.channels)
            top[1].data[...] = np.where(per_counted > 0,
                                        per_correct / np.maximum(per_counted, 1), 0.0)

    def allow_force_backward(self, bottom_index):
        return False

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("backward is not implemented for Accuracy")
