"""MultiAccuracy of the DeViSE reproduction (Qi-Xian/DeVise, caffe/src/caffe/layers/
multi_accuracy_layer.cpp; also gtlim/Ahra and liutinglt/icme): top-k accuracy of scores against
classes mapped to meta labels, optionally appending one line per sample to a text file.
"""
import os

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer
from ...proto.io import atomic_write

ROW = 3     # the fork's DIM: values per row of the meta-label bottom, the label first


@register_layer("MultiAccuracy")
class MultiAccuracyLayer(Layer):
    """Per position (outer i, inner j; the class axis is ``accuracy_param.axis``) the classes are
    ordered by score: ascending with version "distance", descending with "similarity" (ties by
    class index in the same direction, as std::pair). m(k) = bottom[2][3 k] is class k's meta
    label. top_k 1: correct when m(best class) equals the position's label. top_k > 1: the
    ordered classes are walked keeping each one whose meta label differs from the previous
    one's, until top_k are kept; correct when one of their meta labels equals the label.
    top = correct / positions. Scores with positions after the class axis are refused: the
    fork's candidate loop reuses the inner position counter, so there it can revisit a
    position forever; for N x C scores (one inner position) the reuse changes nothing.

    ``filename``: one line per position appended to it, ``label best_score best_class 0|1``
    (the score as C++ streams print it, 6 significant digits); caffepy rewrites the file
    atomically with the lines added. No backward (the fork's is NOT_IMPLEMENTED).
    prototxt: ``multi_accuracy_param { top_k: 1 version: "distance" | "similarity" filename }``
    (``multi_accuracy_param.axis`` is not read by the fork) and ``accuracy_param { axis: 1 }``.
    Bottoms: scores, labels (outer x inner values), meta labels (3 values per class).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "multi_accuracy_param")
        self.top_k, self.version, self.filename = int(p.top_k), p.version, p.filename
        if self.version not in ("distance", "similarity"):
            raise self.error("multi_accuracy_param.version must be \"distance\" or "
                             "\"similarity\", got %r" % self.version)
        if self.top_k < 1:
            raise self.error("multi_accuracy_param.top_k must be >= 1")

    def reshape(self, bottom, top):
        x = bottom[0]
        axis = int(self.layer_param.accuracy_param.axis)
        axis = axis + x.num_axes if axis < 0 else axis
        if not 0 <= axis < x.num_axes:
            raise self.error("accuracy_param.axis %d is outside %s" % (axis, x.shape), ShapeError)
        self.outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        self.classes = x.shape[axis]
        self.inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
        if self.inner != 1:
            raise self.error("scores %s have positions after the class axis; the fork's loop "
                             "over them does not end (its candidate loop reuses the counter)"
                             % (x.shape,), ShapeError)
        if bottom[1].count != self.outer * self.inner:
            raise self.error("%d labels for %d positions" % (bottom[1].count,
                                                             self.outer * self.inner), ShapeError)
        if bottom[2].count < ROW * self.classes:
            raise self.error("the meta-label bottom needs %d values (3 per class), has %d"
                             % (ROW * self.classes, bottom[2].count), ShapeError)
        top[0].reshape(())

    def _order(self, scores):
        k = np.arange(len(scores))
        if self.version == "distance":
            return np.lexsort((k, scores))
        return np.lexsort((-k, -scores))

    def _candidates(self, order, meta):
        if self.top_k == 1:
            return [0]
        kept, prev = [], -1
        for pos, cls in enumerate(order):
            if meta[cls] != prev:
                kept.append(pos)
                prev = meta[cls]
                if len(kept) == self.top_k:
                    return kept
        raise self.error("fewer than top_k = %d distinct meta labels among the classes"
                         % self.top_k)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.outer, self.classes, self.inner).astype(np.float64)
        labels = bottom[1].data.reshape(-1)
        meta = bottom[2].data.reshape(-1)[0:ROW * self.classes:ROW].astype(np.int64)
        correct = count = 0
        lines = []
        for i in range(self.outer):
            label = int(labels[i])
            scores = x[i, :, 0]
            order = self._order(scores)
            hit = any(label == meta[order[pos]] for pos in self._candidates(order, meta))
            correct += hit
            lines.append("%d %s %d %d\n" % (label, "%g" % scores[order[0]], order[0], int(hit)))
            count += 1
        top[0].data[...] = correct / count if count else np.nan
        if self.filename:
            self._append("".join(lines))

    def _append(self, text):
        old = b""
        if os.path.exists(self.filename):
            try:
                with open(self.filename, "rb") as f:
                    old = f.read()
            except OSError as e:
                raise self.error("cannot read %s: %s" % (self.filename, e.strerror or e))
        atomic_write(self.filename, [old, text.encode("ascii")])

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("MultiAccuracy has no backward (the fork's is NOT_IMPLEMENTED)")

    def allow_force_backward(self, bottom_index):
        return False
