"""Layers of happynear/caffe-windows (NormFace's fork) besides its AM-Softmax pieces: Insanity
(randomized leaky ReLU) and GeneralContrastiveLoss (the contrastive loss on per-class distances).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, NeuronLayer, register_layer


@register_layer("Insanity")
class InsanityLayer(NeuronLayer):
    """Randomized leaky ReLU (happynear/caffe-windows, src/caffe/layers/insanity_layer.cpp; also
    huangyangyu/SeqFace). Negative inputs are divided by a slope a:

        y = max(x, 0) + min(x, 0) / a;    dL/dx = dL/dy * (1 if x > 0 else 1 / a)

    TRAIN: a drawn uniformly in [lb, ub) per element at each forward. TEST: the fixed
    a = (ub - lb) / (ln|ub| - ln|lb|) (the fork's mean slope; caffepy's TEST backward uses it too).
    prototxt: ``insanity_param { lb: 5 ub: 10 }`` (ub > lb, neither 0).
    Bottom: N x C x ... (at least 2 axes); top: same shape (in place allowed).
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.insanity_param
        self.lb, self.ub = float(p.lb), float(p.ub)
        if not self.ub > self.lb:
            raise self.error("insanity_param: ub (%g) must be greater than lb (%g)"
                             % (self.ub, self.lb))
        if self.lb * self.ub == 0:
            raise self.error("insanity_param: lb and ub must not be 0")
        self.mean_slope = (self.ub - self.lb) / (np.log(abs(self.ub)) - np.log(abs(self.lb)))

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 2:
            raise self.error("bottom needs at least 2 axes, got shape %s" % (bottom[0].shape,),
                             ShapeError)
        super().reshape(bottom, top)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._x = x.copy()
        if self.phase == self._caffe_pb2.TRAIN:
            self.slope = self.rng().uniform(self.lb, self.ub, x.shape).astype(self.dtype)
        else:
            self.slope = self.dtype.type(self.mean_slope)
        top[0].data[...] = np.maximum(x, 0) + np.minimum(x, 0) / self.slope

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * np.where(self._x > 0, 1, 1 / self.slope)


@register_layer("GeneralContrastiveLoss")
class GeneralContrastiveLossLayer(LossLayer):
    """Contrastive loss on a distance per (sample, class) (happynear/caffe-windows,
    src/caffe/layers/general_contrastive_loss_layer.cpp). With d the N x K distances (bottom[2] when
    given, else bottom[0]) and l_i the label of row i:

        positive (j = l_i):  g = min(T, max(0, d - pm)) * pw
        negative (j != l_i): g = max(0, nm - d) * nw  (exp(-d) * nw with exp_negative_weight)
                             where d < nm, else 0; with positive_first, a row whose positive
                             distance exceeds positive_upper_bound has its negatives set to 0
        loss = sum |g| / N

    Backward, as the fork (a subgradient that reads T as a bound on d itself), written into
    bottom[0]'s diff and scaled by loss_weight / N:
        positive: pw where pm < d < T, else 0 (pw, negatives 0, for a positive_first row);
        negative: -nw (-exp(-d) nw) where d < nm, else 0; when normalize_negative is set and
        s = sum |negative grads| / normalize_negative / N exceeds pw, negatives are divided by s.

    prototxt: ``general_contrastive_loss_param { positive_margin: 0 negative_margin: 1
    positive_weight: 1 negative_weight: 1 normalize_negative (unset: off)
    positive_outlier_thresh: 4 positive_first: false positive_upper_bound: 1
    exp_negative_weight: false }``; ``square`` is not read by the fork; ``max_negative_only``,
    ``max_positive_only`` and ``add_intra_mae`` are refused. Bottoms: x (N x K...),
    label (N) [, distances of x's shape]. Tops: loss [, (mean positive distance, mean negative
    distance per class) (2)].
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.general_contrastive_loss_param
        for field in ("max_negative_only", "max_positive_only", "add_intra_mae"):
            if getattr(p, field):
                raise self.error("general_contrastive_loss_param.%s is not supported" % field)
        self.pm, self.nm = float(p.positive_margin), float(p.negative_margin)
        self.pw, self.nw = float(p.positive_weight), float(p.negative_weight)
        self.norm_neg = float(p.normalize_negative) if p.HasField("normalize_negative") else None
        self.thresh = float(p.positive_outlier_thresh)
        self.positive_first, self.upper = bool(p.positive_first), float(p.positive_upper_bound)
        self.exp_weight = bool(p.exp_negative_weight)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0] if bottom[0].num_axes else 0
        if n == 0:
            raise self.error("bottom[0] needs a non-empty num axis", ShapeError)
        if bottom[1].count != n:
            raise self.error("%d labels for %d rows" % (bottom[1].count, n), ShapeError)
        if len(bottom) == 3 and bottom[2].count != bottom[0].count:
            raise self.error("bottom[2] has %d values, bottom[0] %d"
                             % (bottom[2].count, bottom[0].count), ShapeError)
        if len(top) == 2:
            top[1].reshape(2)

    def _setup_rows(self, bottom):
        n = bottom[0].shape[0]
        d = (bottom[2] if len(bottom) == 3 else bottom[0]).data.reshape(n, -1).astype(np.float64)
        lab = bottom[1].data.reshape(-1).astype(np.int64)
        if lab.min() < 0 or lab.max() >= d.shape[1]:
            raise self.error("label outside [0, %d)" % d.shape[1])
        pos = np.zeros(d.shape, dtype=bool)
        pos[np.arange(n), lab] = True
        first = (self.positive_first & (d[np.arange(n), lab] > self.upper))[:, None]
        return n, d, pos, first

    def forward_cpu(self, bottom, top):
        n, d, pos, first = self._setup_rows(bottom)
        trunc = np.minimum(self.thresh, np.maximum(0, d - self.pm))
        hinge = np.maximum(0, self.nm - d)
        near = ~pos & (d < self.nm)
        neg = np.where(near, (np.exp(-d) if self.exp_weight else hinge) * self.nw, 0)
        neg = np.where(first, 0, neg)
        g = np.where(pos, trunc * self.pw, neg)
        top[0].data[...] = np.sum(np.abs(g)) / n
        if len(top) == 2:
            dim = d.shape[1]
            top[1].data[...] = [np.sum(trunc[pos]) / n,
                                np.sum(np.where(near, hinge, 0)) / n / max(dim - 1, 1)]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1] or (len(bottom) == 3 and propagate_down[2]):
            raise self.error("cannot backpropagate to the labels or the distances bottom")
        if not propagate_down[0]:
            return
        n, d, pos, first = self._setup_rows(bottom)
        gpos = np.where((d > self.pm) & (d < self.thresh), self.pw, 0.0)
        gneg = np.where(d < self.nm, -(np.exp(-d) if self.exp_weight else 1.0) * self.nw, 0.0)
        gneg = np.where(pos | first, 0.0, gneg)
        if self.norm_neg is not None:
            s = abs(np.sum(np.abs(gneg))) / self.norm_neg / n
            if s > self.pw:
                gneg = gneg / s
        g = np.where(pos, np.where(first, self.pw, gpos), gneg)
        bottom[0].diff[...] = (g * (top[0].diff.reshape(()) / n)).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
