"""Distance losses of happynear/caffe-windows (NormFace's fork; also Centerus/caffe-windows and
Aliang-SEU/MTCNN-on-caffe-window), taking per-class distances d (N x K) and labels:
SoftContrastiveLoss (soft_contrastive_loss_layer.cpp), NCALoss (nca_loss_layer.cpp),
GeneralTripletLoss (general_triplet_loss_layer.cpp); on a batch's N x N pair distances:
BatchContrastiveLoss (batch_contrastive_loss_layer.cpp); on probabilities: ConfidencePenaltyLoss
(confidence_penalty_loss_layer.cpp); and CorrelationLoss (correlation_loss_layer.cpp / .cu).

SoftContrastiveLoss, NCALoss and BatchContrastiveLoss add each forward's loss onto the loss top's
previous value before dividing (the fork's ``loss[0] +=`` never clears the top); caffepy starts
from 0 at every forward, which is the fork's value at its first iteration.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, fork_param, register_layer


class _DistanceLoss(LossLayer):
    """Bottoms: distances N x K (x ...), labels N [, per-row weights N]. Tops: loss [, (mean
    positive distance, mean negative distance) (2)]. With the weights bottom the gradient of row
    i is scaled by w_i / mean(w) (the loss is not)."""
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        if bottom[1].count != n or (len(bottom) == 3 and bottom[2].count != n):
            raise self.error("labels (and weights) must have one value per row (%d)" % n,
                             ShapeError)
        if len(top) == 2:
            top[1].reshape(2)

    def _rows(self, bottom):
        n = bottom[0].shape[0]
        d = bottom[0].data.reshape(n, -1).astype(np.float64)
        lab = bottom[1].data.reshape(-1).astype(np.int64)
        if lab.min() < 0 or lab.max() >= d.shape[1]:
            raise self.error("label outside [0, %d)" % d.shape[1])
        pos = np.zeros(d.shape, dtype=bool)
        pos[np.arange(n), lab] = True
        return n, d, pos

    def _distances(self, top, pos_sum, neg_sum, n, k):
        if len(top) == 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                top[1].data[...] = [pos_sum / n, neg_sum / n / (k - 1)]

    def _write_grad(self, top, propagate_down, bottom, g):
        if propagate_down[1] or (len(bottom) == 3 and propagate_down[2]):
            raise self.error("cannot backpropagate to the labels or the weights")
        if not propagate_down[0]:
            return
        n = g.shape[0]
        if len(bottom) == 3:
            w = bottom[2].data.reshape(-1).astype(np.float64)
            g = g * (w / (w.sum() / n))[:, None]
        bottom[0].diff[...] = (g * (top[0].diff / n)).reshape(bottom[0].shape)


@register_layer("SoftContrastiveLoss")
class SoftContrastiveLossLayer(_DistanceLoss):
    """A soft-max over the near negatives plus a truncated positive term, per row i with
    positive distance p = d[i, l_i] and s = negative_weight:

        loss_i = pw t(p) + log(sum_{j != l_i, d_ij < nm} exp(s e_ij))   (the log only when the
                 sum is > 0),  t(p) = min(T, max(0, p - pm)),  e = nm - d
        (square: pw t(p)^2 and e = (nm - d)^2);   loss = sum loss_i / N

    s is negative_weight: the fork reads ``exponent_scale`` from negative_weight, and its outlier
    threshold T from ``general_contrastive_loss_param.positive_outlier_thresh`` (4). Backward as
    the fork: positive pw where pm < p < T (square: p pw); near negatives -s exp(s e) / sum
    (square: (d - nm) s exp(s e) / sum); times loss_weight / N. Without square this is the
    gradient of the loss (T bounding p itself); with square it is the fork's formula, not one.
    prototxt: ``soft_contrastive_loss_param { positive_margin: 1 negative_margin: 1
    positive_weight: 1 negative_weight: 1 square: false }`` (exponent_scale is not read).
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "soft_contrastive_loss_param")
        self.pm, self.nm = float(p.positive_margin), float(p.negative_margin)
        self.pw, self.nw = float(p.positive_weight), float(p.negative_weight)
        self.square = bool(p.square)
        g = fork_param(self.layer_param, "general_contrastive_loss_param")
        self.thresh = float(g.positive_outlier_thresh) if g is not None else 4.0

    def _terms(self, d, pos):
        near = ~pos & (d < self.nm)
        e = self.nm - d
        e = e * e if self.square else e
        ex = np.where(near, np.exp(np.where(near, e, 0) * self.nw), 0)
        return near, ex, ex.sum(axis=1)

    def forward_cpu(self, bottom, top):
        n, d, pos = self._rows(bottom)
        near, _, sums = self._terms(d, pos)
        t = np.minimum(self.thresh, np.maximum(0, d[pos] - self.pm))
        loss = np.sum((t * t if self.square else t) * self.pw)
        with np.errstate(divide="ignore"):
            loss += np.sum(np.where(sums > 0, np.log(np.where(sums > 0, sums, 1)), 0))
        top[0].data[...] = loss / n
        self._distances(top, t.sum(), np.sum(np.where(near, self.nm - d, 0)), n, d.shape[1])

    def backward_cpu(self, top, propagate_down, bottom):
        n, d, pos = self._rows(bottom)
        near, ex, sums = self._terms(d, pos)
        inside = pos & (d > self.pm) & (d < self.thresh)
        g = np.where(inside, d * self.pw if self.square else self.pw, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = ex / sums[:, None]
        neg = ((d - self.nm) * self.nw if self.square else -self.nw) * share
        g = np.where(near, neg, g)
        self._write_grad(top, propagate_down, bottom, g)


@register_layer("NCALoss")
class NCALossLayer(_DistanceLoss):
    """Neighbourhood components loss on distances: loss = sum_i (d[i, l_i] + sum_{j != l_i}
    exp(-d_ij)) / N; with min_negative_only only the row's nearest negative (the first smallest
    d_ij, j != l_i) enters. dL/dd: 1 at the label, -exp(-d) at the (nearest) negative(s), times
    loss_weight / N. With min_negative_only the fork writes only those two entries of the row's
    diff and leaves the others as they were; caffepy writes 0 there. prototxt: ``nca_param {
    min_negative_only: false }``.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "nca_param")
        self.min_only = bool(p.min_negative_only) if p is not None else False

    def _negatives(self, d, pos):
        if not self.min_only:
            return ~pos
        # the fork starts its search at index 0 (the label's entry when l_i = 0) and takes the
        # first strictly smaller negative
        n, k = d.shape
        best = np.zeros(n, dtype=np.int64)
        for j in range(k):
            better = ~pos[:, j] & (d[:, j] < d[np.arange(n), best])
            best[better] = j
        sel = np.zeros(d.shape, dtype=bool)
        sel[np.arange(n), best] = True
        return sel

    def forward_cpu(self, bottom, top):
        n, d, pos = self._rows(bottom)
        sel = self._negatives(d, pos)
        top[0].data[...] = (np.sum(d[pos]) + np.sum(np.exp(-d[sel]))) / n
        self._distances(top, np.sum(d[pos]), np.sum(d[~pos]), n, d.shape[1])

    def backward_cpu(self, top, propagate_down, bottom):
        n, d, pos = self._rows(bottom)
        sel = self._negatives(d, pos)
        g = np.where(pos, 1.0, 0.0)
        g[sel] = -np.exp(-d[sel])          # after the label's 1, as the fork writes them
        self._write_grad(top, propagate_down, bottom, g)


@register_layer("GeneralTripletLoss")
class GeneralTripletLossLayer(_DistanceLoss):
    """Triplet hinge on per-class distances, per row i with p = d[i, l_i]:

        h_ij = max(0, p + margin - d_ij) nw   (j != l_i);   loss = sum_ij h_ij / N

    hardest_only keeps only the row's largest h (the first one); positive_first zeroes a row's
    h when p > positive_upper_bound. The loss has no positive term. Backward as the fork (not the
    gradient of that loss): negatives with p + margin > d_ij get -nw (hardest_only: the hardest
    alone, where its distance is not exactly 0; else it keeps h), the label gets pw when
    add_center_loss or a negative got a gradient; a positive_first row gets pw at the label and
    0 elsewhere; rows are scaled by the weights bottom (w_i, not normalized) and loss_weight / N.
    prototxt: ``general_triplet_loss_param { margin: 0.2 add_center_loss: true hardest_only:
    false positive_first: false positive_upper_bound: 1 positive_weight: 1 negative_weight: 1 }``.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "general_triplet_loss_param")
        self.margin, self.center = float(p.margin), bool(p.add_center_loss)
        self.hardest, self.first = bool(p.hardest_only), bool(p.positive_first)
        self.upper = float(p.positive_upper_bound)
        self.pw, self.nw = float(p.positive_weight), float(p.negative_weight)

    def _hinge(self, d, pos):
        n = d.shape[0]
        same = d[pos][:, None]
        h = np.where(pos, 0.0, np.maximum(0, same + self.margin - d) * self.nw)
        hard = np.full(n, -1)
        if self.hardest:
            cand = np.where(~pos & (h > 0), h, -np.inf)
            found = np.isfinite(cand.max(axis=1))
            hard[found] = np.argmax(cand[found], axis=1)
            keep = np.zeros(d.shape, dtype=bool)
            keep[np.flatnonzero(found), hard[found]] = True
            h = np.where(found[:, None] & ~keep, 0.0, h)
        first = self.first & (same[:, 0] > self.upper)
        return np.where(first[:, None], 0.0, h), hard, first, same

    def forward_cpu(self, bottom, top):
        n, d, pos = self._rows(bottom)
        h = self._hinge(d, pos)[0]
        top[0].data[...] = np.sum(np.abs(h)) / n
        self._distances(top, np.sum(d[pos]), np.sum(d[~pos]), n, d.shape[1])

    def backward_cpu(self, top, propagate_down, bottom):
        n, d, pos = self._rows(bottom)
        g, hard, first, same = self._hinge(d, pos)
        rows = np.arange(n)
        if self.hardest:
            hit = (hard >= 0) & (d[rows, np.maximum(hard, 0)] != 0)
            g[rows[hit], hard[hit]] = -self.nw
            any_neg = hit
        else:
            active = ~pos & (same + self.margin > d)
            g = np.where(pos, g, np.where(active, -self.nw, 0.0))
            any_neg = active.any(axis=1)
        g[pos] = np.where(self.center | any_neg, self.pw, g[pos])
        g[first] = np.where(pos[first], self.pw, 0.0)
        if len(bottom) == 3:
            g = g * bottom[2].data.reshape(-1, 1)
        if propagate_down[1] or (len(bottom) == 3 and propagate_down[2]):
            raise self.error("cannot backpropagate to the labels or the weights")
        if propagate_down[0]:
            bottom[0].diff[...] = (g * (top[0].diff / n)).reshape(bottom[0].shape)


@register_layer("BatchContrastiveLoss")
class BatchContrastiveLossLayer(LossLayer):
    """Contrastive loss on the N x N distances of a batch (upper triangle, i < j), y the labels:

        same label: pw (d_ij - pm) where d_ij > pm;   different: nw (nm - d_ij) where d_ij < nm
        loss = sum / (N (N - 1) // 2)
        max_only: only the largest such positive and the smallest such negative (first in
        (i, j) order), not divided

    Backward as the fork: pw / -nw at the entries that count (upper triangle), times
    loss_weight / N (max_only: / 2) -- not the forward's divisor. Tops: loss [, (mean positive,
    mean negative distance over all pairs)]. prototxt: ``batch_contrastive_loss_param {
    positive_margin: 1 negative_margin: 1 positive_weight: 1 negative_weight: 1 max_only:
    false }``. Bottoms: distances N x N, labels N.
    """
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "batch_contrastive_loss_param")
        self.pm, self.nm = float(p.positive_margin), float(p.negative_margin)
        self.pw, self.nw, self.max_only = float(p.positive_weight), float(p.negative_weight), \
            bool(p.max_only)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        if bottom[0].count != n * n or bottom[1].count != n:
            raise self.error("distances must be N x N and labels N, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        if len(top) == 2:
            top[1].reshape(2)

    def _pairs(self, bottom):
        n = bottom[0].shape[0]
        d = bottom[0].data.reshape(n, n).astype(np.float64)
        lab = bottom[1].data.reshape(-1)
        upper = np.triu(np.ones((n, n), dtype=bool), 1)
        same = upper & (lab[:, None] == lab[None, :])
        diff = upper & ~same
        return n, d, same, diff, same & (d > self.pm), diff & (d < self.nm)

    @staticmethod
    def _first(mask, values, pick):
        """The first (row-major) index of mask's extreme value, or None."""
        if not mask.any():
            return None
        flat = np.where(mask, values, np.inf if pick is np.argmin else -np.inf).reshape(-1)
        return np.unravel_index(pick(flat), values.shape)

    def forward_cpu(self, bottom, top):
        n, d, same, diff, hot_pos, hot_neg = self._pairs(bottom)
        if self.max_only:
            loss = 0.0
            i = self._first(hot_pos, d, np.argmax)
            if i is not None:
                loss += self.pw * (d[i] - self.pm)
            i = self._first(hot_neg, d, np.argmin)
            if i is not None:
                loss += self.nw * (self.nm - d[i])
        else:
            loss = (np.sum(self.pw * (d - self.pm)[hot_pos])
                    + np.sum(self.nw * (self.nm - d)[hot_neg])) / (n * (n - 1) // 2)
        top[0].data[...] = loss
        if len(top) == 2:
            with np.errstate(invalid="ignore", divide="ignore"):
                top[1].data[...] = [d[same].sum() / same.sum(), d[diff].sum() / diff.sum()]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if not propagate_down[0]:
            return
        n, d, _, _, hot_pos, hot_neg = self._pairs(bottom)
        g = np.zeros((n, n))
        if self.max_only:
            for mask, pick, value in ((hot_pos, np.argmax, self.pw),
                                      (hot_neg, np.argmin, -self.nw)):
                i = self._first(mask, d, pick)
                if i is not None:
                    g[i] = value
            g *= top[0].diff / 2
        else:
            g = (np.where(hot_pos, self.pw, 0.0) - np.where(hot_neg, self.nw, 0.0)) * (
                top[0].diff / n)
        bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("ConfidencePenaltyLoss")
class ConfidencePenaltyLossLayer(LossLayer):
    """Cross-entropy with a confidence penalty on probabilities p (N x K), p clamped below at
    1e-20 (Caffe's kLOG_THRESHOLD):

        loss = -sum_i [(1 - beta) log p_{i, l_i} + beta / (N - 1) sum_{j != l_i} log p_ij] / N

    (N - 1 with N the batch size, as the fork writes it). dL/dp its gradient at the clamped p,
    times loss_weight. prototxt: ``confidence_penalty_loss_param { beta: 0.1 }``. Bottoms:
    probabilities N x K, labels N (x 1 x 1 x 1).
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "confidence_penalty_loss_param")
        self.beta = float(p.beta)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[1].count != bottom[0].shape[0]:
            raise self.error("one label per row expected, got %s" % (bottom[1].shape,),
                             ShapeError)

    def _coef(self, bottom):
        n = bottom[0].shape[0]
        p = np.maximum(bottom[0].data.reshape(n, -1).astype(np.float64), 1e-20)
        lab = bottom[1].data.reshape(-1).astype(np.int64)
        if lab.min() < 0 or lab.max() >= p.shape[1]:
            raise self.error("label outside [0, %d)" % p.shape[1])
        coef = np.full(p.shape, self.beta / (n - 1.0) if n > 1 else np.inf)
        coef[np.arange(n), lab] = 1 - self.beta
        return n, p, coef

    def forward_cpu(self, bottom, top):
        n, p, coef = self._coef(bottom)
        top[0].data[...] = -np.sum(coef * np.log(p)) / n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if propagate_down[0]:
            n, p, coef = self._coef(bottom)
            bottom[0].diff[...] = (-top[0].diff / n * coef / p).reshape(bottom[0].shape)


@register_layer("CorrelationLoss")
class CorrelationLossLayer(LossLayer):
    """loss = sum(x * y) / count over two N x 1 (x H x W) bottoms. No gradient reaches the net:
    the fork's backward (CPU and GPU) writes dL/dx = dL/dloss y / count into the bottoms' DATA,
    not their diffs; caffepy writes 0 into the diffs and leaves the data as it is.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        for i, b in enumerate(bottom):
            if b.num_axes < 2 or b.shape[1] != 1:
                raise self.error("bottom[%d] must have 1 channel, got %s" % (i, b.shape),
                                 ShapeError)
        if bottom[0].count != bottom[1].count:
            raise self.shape_mismatch("the bottoms differ in size", 0, 1, bottom)

    def forward_cpu(self, bottom, top):
        x, y = (b.data.reshape(-1).astype(np.float64) for b in bottom)
        top[0].data[...] = np.dot(x, y) / bottom[0].count

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = 0

    def allow_force_backward(self, bottom_index):
        return True
