"""Distance losses of happynear/caffe-windows (NormFace's fork; also Centerus/caffe-windows and
Aliang-SEU/MTCNN-on-caffe-window), taking per-class distances d (N x K) and labels:
SoftContrastiveLoss (soft_contrastive_loss_layer.cpp) and NCALoss (nca_loss_layer.cpp).

The fork adds each forward's loss onto the loss top's previous value before dividing by N (its
``loss[0] +=`` never clears the top); caffepy starts from 0 at every forward, which is the fork's
value at its first iteration.
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
