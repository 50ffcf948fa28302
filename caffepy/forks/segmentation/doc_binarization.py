"""Document-binarization loss and metrics of ctensmeyer/caffe (the Caffe of
ctensmeyer/binarization_2017): WeightedFmeasureLoss (src/caffe/layers/
weighted_fmeasure_loss_layer.cpp) and PR (precision_recall_layer.cpp). Its DocData reader is
replaced by inputs in caffepy.zoo (caffepy.forks.misc.zoo_readers).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


def _sums(x, t, rw, pw):
    """(R, P, rn, rd, pn, pd) over the given values: rn = sum x t rw, rd = sum t rw,
    pn = sum x t pw, pd = sum x pw; R = rn / rd, P = pn / pd (0 where the denominator is 0)."""
    xt = x * t
    rn, rd = float(np.sum(xt * rw)), float(np.sum(t * rw))
    pn, pd = float(np.sum(xt * pw)), float(np.sum(x * pw))
    r = rn / rd if rd != 0 else 0.0
    p = pn / pd if pd != 0 else 0.0
    return r, p, rn, rd, pn, pd


@register_layer("WeightedFmeasureLoss")
class WeightedFmeasureLossLayer(LossLayer):
    """1 - pseudo F-measure of a foreground probability map (ctensmeyer/caffe,
    src/caffe/layers/weighted_fmeasure_loss_layer.cpp).

    Bottoms: x (predictions, N x 1 x H x W), t (ground truth), rw (recall weights), pw
    (precision weights), all the same count. With m = ``margin`` in (0, 0.5), x is first
    snapped to t where t > 0.5 and x >= 0.5 + m, or t <= 0.5 and x <= 0.5 - m -- in the
    bottom's data, as the fork does. Over a group of pixels (the whole batch with
    ``avg_fm: false``, each instance with ``avg_fm: true``): R = sum(x t rw) / sum(t rw),
    P = sum(x t pw) / sum(x pw) (0 on a zero denominator), F = 2 R P / (R + P); the group's loss
    is 1 - F, or when R or P is 0, mse_lambda * 0.5 * sum((t - x)^2 pw) / sum|pw|. avg_fm: the
    mean over instances (an optional second top holds each instance's F, 0 where the MSE is
    used).

    Backward is the fork's, to x only (a gradient to the other bottoms is an error), per group,
    with g the top's diff, dF/dR = 2 P^2 / (R + P)^2, dF/dP = 2 R^2 / (R + P)^2:
        F groups:   dx = -2 dF/dR t rw / sum(t rw) - g dF/dP pw (t sum(x pw) - sum(x t pw)) / sum(x pw)^2
        MSE groups: dx = g mse_lambda (x - t) pw / sum|pw|
    then, with avg_fm, dx / N. The recall term is the fork's: twice dF/dR and without g (the
    true one is -g dF/dR t rw / sum(t rw)); the MSE gradient is exact. The fork adds the MSE
    gradient to what the diff held; caffepy writes it.
    ``weighted_fmeasure_loss_param { margin: 0.5 mse_lambda: 0.1 avg_fm: true }``.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.weighted_fmeasure_loss_param
        self.margin, self.lam, self.avg = float(p.margin), float(p.mse_lambda), bool(p.avg_fm)
        if not self.avg and len(top) != 1:
            raise self.error("with avg_fm: false only 1 top blob is supported")

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        for i in (1, 2, 3):
            if bottom[i].count != bottom[0].count or bottom[i].shape[0] != n:
                raise self.error("bottom %d %s must match the predictions %s"
                                 % (i, bottom[i].shape, bottom[0].shape), ShapeError)
        if self.avg and bottom[0].count_range(1) != bottom[0].count_range(2):
            raise self.error("avg_fm needs one channel (N x 1 x H x W): the fork's per-instance "
                             "sums cover H x W values of each instance, got %s"
                             % (bottom[0].shape,), ShapeError)
        if len(top) > 1:
            top[1].reshape((n, 1))

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0

    def _groups(self, n):
        return [slice(i, i + 1) for i in range(n)] if self.avg else [slice(0, n)]

    def forward_cpu(self, bottom, top):
        x, t = bottom[0].data, bottom[1].data
        if 0 < self.margin < 0.5:
            snap = np.where(t > 0.5, x >= 0.5 + self.margin, x <= 0.5 - self.margin)
            x[snap] = t[snap]
        n = x.shape[0]
        flat = [b.data.reshape(n, -1) for b in bottom]
        self.stats, losses, fms = [], [], []
        for g in self._groups(n):
            xs, ts, rw, pw = (a[g] for a in flat)
            r, p, rn, rd, pn, pd = _sums(xs, ts, rw, pw)
            self.stats.append((r, p, rd, pn, pd))
            if p != 0 and r != 0:
                f = 2 * r * p / (r + p)
                losses.append(1 - f)
                fms.append(f)
            else:
                losses.append(self.lam * 0.5 * float(np.sum(np.abs((ts - xs) ** 2 * pw)))
                              / float(np.sum(np.abs(pw))))
                fms.append(0.0)
        top[0].data[...] = np.sum(losses) / n if self.avg else losses[0]
        if len(top) > 1:
            top[1].data[...] = np.asarray(fms).reshape(n, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[1:]):
            raise self.error("cannot backpropagate to the labels or the weight maps")
        if not propagate_down[0]:
            return
        gd = float(top[0].diff)
        n = bottom[0].shape[0]
        x, t, rw, pw = (b.data.reshape(n, -1) for b in bottom)
        dx = np.zeros_like(x)
        for g, (r, p, rd, pn, pd) in zip(self._groups(n), self.stats):
            if p != 0 and r != 0:
                s2 = (r + p) ** 2
                df_dr, df_dp = 2 * p * p / s2, 2 * r * r / s2
                dx[g] = (-2.0 * df_dr / rd * t[g] * rw[g]
                         - gd * df_dp / (pd * pd) * (t[g] * pd - pn) * pw[g])
            else:
                dx[g] = gd * self.lam / float(np.sum(np.abs(pw[g]))) * (x[g] - t[g]) * pw[g]
        if self.avg:
            dx /= n
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("PR")
class PRLayer(Layer):
    """Precision, recall, accuracy, true-negative rate and F-measure of a thresholded map
    (ctensmeyer/caffe, src/caffe/layers/precision_recall_layer.cpp).

    Bottoms: x (scores), labels (same count; each truncated to an integer, non-zero =
    positive). A value is positive when x >= ``thresh``; labels equal to ``ignore_label`` (when
    set) are skipped. Tops (scalars): TP / (TP + FP), TP / (TP + FN) (0 on an empty
    denominator), (TP + TN) / all, TN / (FP + TN) (NaN when both are 0, as the fork's float
    division), 2 P R / (P + R) (0 when P + R is 0). ``precision_recall_param { thresh: 0.5
    ignore_label }``. No backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 5

    def layer_setup(self, bottom, top):
        p = self.layer_param.precision_recall_param
        self.thresh = np.float32(p.thresh)
        self.ignore = int(p.ignore_label) if p.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise self.error("the two bottoms must have the same count, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        for t in top:
            t.reshape(())

    def allow_force_backward(self, bottom_index):
        return False

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1)
        lab = np.trunc(bottom[1].data.reshape(-1)).astype(np.int64)
        keep = np.ones(x.shape, bool) if self.ignore is None else lab != self.ignore
        pos, truth = x[keep] >= self.thresh, lab[keep] != 0
        tp, fp = float(np.sum(pos & truth)), float(np.sum(pos & ~truth))
        tn, fn = float(np.sum(~pos & ~truth)), float(np.sum(~pos & truth))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            acc = np.float64(tp + tn) / np.float64(tp + fp + tn + fn)
            tnr = np.float64(tn) / np.float64(fp + tn)
        top[0].data[...] = prec
        top[1].data[...] = rec
        top[2].data[...] = acc
        top[3].data[...] = tnr
        top[4].data[...] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
