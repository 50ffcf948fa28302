"""Layers of two 2014-2015 forks whose nets are V1 files: sanjeev87/CaffeExp's
``MineContrastiveLoss`` (V1 MINE_CONTRASTIVE_LOSS: the contrastive loss of Hadsell, Chopra and
LeCun with the margin on the distance) and its ``ContrastiveLoss`` given a fourth bottom, and
eevignesh/vigneshcaffe's ``ClassificationStats`` (V1 CLASSIFICATION_STATS: per-class accuracy and
average precision).

sanjeev87/CaffeExp (commit 7659c8d) and sanjeev87/CaffeMnistDiffLoss (commit 6d5cafd) comment out
the ExactNumBottomBlobs check of Layer::CheckBlobCounts (include/caffe/layer.hpp), so their
siamese nets give these losses a fourth bottom (the second image's label) that the layers never
read.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer, register_variant
from ...layers.loss_regression import ContrastiveLossLayer


@register_layer("MineContrastiveLoss")
class MineContrastiveLossLayer(LossLayer):
    """sanjeev87/CaffeExp src/caffe/layers/mine_contrastive_loss_layer.cpp:

        d_n = ||a_n - b_n||,
        L = 1/(2N) sum_n [ y_n d_n^2 + (1 - y_n) max(margin - d_n, 0)^2 ]
        dL/da_n = dL/dL_top / N * (a_n - b_n) * (y_n ? 1 : (margin > d_n ? 1 - margin / d_n : 0))
        dL/db_n = -dL/da_n

    (BVLC's ContrastiveLoss of the time put the margin on d^2; this one on d). y_n is the third
    bottom cast to int (non-zero: a similar pair). ``mine_contrastive_loss_param { margin: 1 }``.
    Bottoms: a, b (N x C, one feature row per item), y (N), then any further bottoms, unread (the
    fork does not check the count; module doc). y and the extra bottoms get no gradient.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 3

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        if bottom[1].shape != bottom[0].shape or bottom[0].num_axes < 2 or \
                bottom[0].count != n * bottom[0].shape[1]:
            raise self.shape_mismatch("a and b must be N x C feature rows of one shape (got %s "
                                      "and %s)" % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)
        if bottom[2].count != n:
            raise self.needs("the similarity bottom needs one value per pair (%d), got shape %s"
                             % (n, bottom[2].shape), [(2, (n,), None)])
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        self.margin = float(self.layer_param.mine_contrastive_loss_param.margin)
        self.diff = (bottom[0].data - bottom[1].data).reshape(n, -1)
        self.dist_sq = np.einsum("ij,ij->i", self.diff, self.diff)
        self.similar = bottom[2].data.reshape(n).astype(np.int64) != 0
        hinge = np.maximum(self.margin - np.sqrt(self.dist_sq), 0.0)
        per = np.where(self.similar, self.dist_sq, hinge * hinge)
        top[0].data[...] = per.sum() / n / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the similarity labels (bottom 2)")
        n = bottom[0].shape[0]
        dist = np.sqrt(self.dist_sq)
        with np.errstate(divide="ignore", invalid="ignore"):     # d = 0 dissimilar: as the fork
            scale = np.where(self.similar, 1.0,
                             np.where(self.margin - dist > 0, 1.0 - self.margin / dist, 0.0))
        g = self.diff * scale[:, None] * (float(top[0].diff.reshape(())) / n)
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * g).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2


@register_variant("ContrastiveLoss", lambda lp: len(lp.bottom) > 3)
class UncheckedContrastiveLossLayer(ContrastiveLossLayer):
    """sanjeev87/CaffeExp's and sanjeev87/CaffeMnistDiffLoss's ``ContrastiveLoss`` (V1
    CONTRASTIVE_LOSS) with more than three bottoms: src/caffe/layers/contrastive_loss_layer.cpp
    of both forks, the dissimilar term with the margin on the squared distance,

        L = 1/(2N) sum_n [ y_n d_n^2 + (1 - y_n) max(margin - d_n^2, 0) ],
        dL/da_n = top_diff / N (a_n - b_n) (y_n ? 1 : (margin > d_n^2 ? -1 : 0)),
        dL/db_n = -dL/da_n

    (caffepy's ContrastiveLoss with ``legacy_version``, whatever the file says: the forks'
    ContrastiveLossParameter has only ``margin``). Bottoms a, b, y, then the unread extras
    (module doc); only a and b get gradients.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 4

    def legacy_form(self):
        return True


@register_layer("ClassificationStats")
class ClassificationStatsLayer(Layer):
    """eevignesh/vigneshcaffe src/caffe/layers/classification_stats_layer.cpp. Bottoms: scores
    (N x C, C = ``classification_stats_param { num_classes }``), labels (N). Tops:

    * per-class accuracy (1, C, 1, 1): among the items of class c, the fraction whose arg max
      (the first maximum) is c;
    * per-class average precision (1, C, 1, 1), computed the fork's way: class c's list holds N
      placeholder entries (score 0, not positive) and the N items (score_c, label == c), sorted
      descending by (score, positive); over its first N entries, AP = sum over the positives at
      rank r of (positives so far / r), divided by the class's item count;
    * the overall accuracy (1, 1, 1, 1).

    A class with no items gets 0 in both per-class tops. No backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.classification_stats_param
        if not p.HasField("num_classes"):
            raise self.error("classification_stats_param.num_classes is required")
        self.c = int(p.num_classes)

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        if bottom[1].shape[0] != n or bottom[1].count != n:
            raise self.needs("the labels need one value per item (%d), got shape %s"
                             % (n, bottom[1].shape), [(1, (n,), None)])
        if bottom[0].count != n * self.c:
            raise self.error("the scores have %d values per item, num_classes is %d"
                             % (bottom[0].count // max(n, 1), self.c), ShapeError)
        top[0].reshape((1, self.c, 1, 1))
        top[1].reshape((1, self.c, 1, 1))
        top[2].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        scores = bottom[0].data.reshape(n, self.c)
        labels = bottom[1].data.reshape(n).astype(np.int64)
        if n and (labels.min() < 0 or labels.max() >= self.c):
            raise self.error("label outside [0, %d)" % self.c)
        hits = np.argmax(scores, axis=1) == labels
        counts = np.bincount(labels, minlength=self.c)
        correct = np.bincount(labels[hits], minlength=self.c)
        acc = np.zeros(self.c)
        ap = np.zeros(self.c)
        for c in np.nonzero(counts)[0]:
            acc[c] = correct[c] / counts[c]
            entries = [(0.0, False)] * n + [(float(s), bool(l == c))
                                             for s, l in zip(scores[:, c], labels)]
            entries.sort(reverse=True)
            found, precision = 0, 0.0
            for rank, (_, positive) in enumerate(entries[:n], 1):
                if positive:
                    found += 1
                    precision += found / rank
            ap[c] = precision / counts[c]
        top[0].data[...] = acc.reshape(top[0].shape)
        top[1].data[...] = ap.reshape(top[1].shape)
        top[2].data[...] = hits.sum() / n if n else 0.0

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("ClassificationStats has no backward")

    def allow_force_backward(self, bottom_index):
        return False
