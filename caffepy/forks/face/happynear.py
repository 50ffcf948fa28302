"""Layers of happynear/caffe-windows (NormFace's fork) besides its AM-Softmax pieces: Insanity
(randomized leaky ReLU), GeneralContrastiveLoss (the contrastive loss on per-class distances),
TripletLoss, EltwiseAffine (a per-channel slope and bias) and Local (the locally connected layer);
the last three are the fork's V1 types TRIPLET_LOSS, ELTWISE_AFFINE and LOCAL.
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer
from ...math.cpu import col2im, im2col


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


@register_layer("TripletLoss")
class TripletLossLayer(LossLayer):
    """Triplet loss on anchor / positive / negative feature rows (happynear/caffe-windows,
    src/caffe/layers/triplet_loss_layer.cpp; the same layer is in Aliang-SEU/MTCNN-on-caffe-window,
    Centerus/caffe-windows and JoeFannie/Label85). With a_i, p_i, n_i the rows of bottoms 0, 1, 2
    and m the margin:

        l_i = max(0, m + ||a_i - p_i||^2 - ||a_i - n_i||^2);    loss = sum l_i / (2 N)
        for the rows with l_i > 0 (the fork zeroes the others, l_i < 1e-9):
        dL/da_i = (n_i - p_i) g / N,  dL/dp_i = (p_i - a_i) g / N,  dL/dn_i = (a_i - n_i) g / N

    with g the top's diff (loss_weight). prototxt: ``triplet_loss_param { margin: 1 }`` (the
    other TripletLossParameter fields belong to other forks' triplet losses and are not read).
    Bottoms: a, p, n, each N x C (x 1 x 1: the fork wants height = width = 1); a fourth bottom
    (per-sample weights) is accepted and ignored, as the fork ignores it. Top: loss.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 3
    max_bottom_blobs = 4

    def reshape(self, bottom, top):
        a = bottom[0]
        for i in (1, 2):
            if bottom[i].shape[:2] != a.shape[:2]:
                raise self.error("bottom[%d] shape %s differs from the anchor's %s"
                                 % (i, bottom[i].shape, a.shape), ShapeError)
        for i in range(3):
            if bottom[i].count_range(2) != 1:
                raise self.error("bottom[%d] must be N x C x 1 x 1, got %s"
                                 % (i, bottom[i].shape), ShapeError)
        top[0].reshape(())

    def allow_force_backward(self, bottom_index):
        return bottom_index < 3

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a, p, ng = (bottom[i].data.reshape(n, -1) for i in range(3))
        m = self.layer_param.triplet_loss_param.margin
        loss = np.maximum(m + ((a - p) ** 2).sum(1) - ((a - ng) ** 2).sum(1), 0)
        self._active = (loss >= 1e-9)[:, None]
        self._rows = (a, p, ng)
        top[0].data[...] = loss.sum() / n / 2

    def backward_cpu(self, top, propagate_down, bottom):
        a, p, ng = self._rows
        scale = float(top[0].diff) / a.shape[0]
        grads = (ng - p, p - a, a - ng)
        for i in range(3):
            if propagate_down[i]:
                g = np.where(self._active, grads[i], 0) * scale
                bottom[i].diff[...] = g.reshape(bottom[i].shape)


@register_layer("EltwiseAffine")
class EltwiseAffineLayer(NeuronLayer):
    """A learned slope and bias per channel (happynear/caffe-windows,
    src/caffe/layers/eltwise_affine_layer.cpp, removed from the fork in February 2016):

        y = s_c x + b_c;  dL/dx = s_c dL/dy;  dL/ds_c += sum dL/dy x;  dL/db_c += sum dL/dy

    sums over the samples and the axes after 1. prototxt: ``eltwise_affine_param { slope_filler
    (default constant 1.0001) bias_filler (default constant 0.0001) channel_shared: false }``.
    Blobs: slope, bias, each (C,), or () when channel_shared. In place allowed. (The fork's bias
    gradient with channel_shared writes C values into the one-value blob; caffepy sums them.)
    """

    def layer_setup(self, bottom, top):
        if bottom[0].num_axes < 2:
            raise self.error("bottom needs at least 2 axes, got shape %s" % (bottom[0].shape,),
                             ShapeError)
        p = self.layer_param.eltwise_affine_param
        self.channel_shared = p.channel_shared
        shape = () if self.channel_shared else (bottom[0].shape[1],)
        if not self.blobs:
            self.blobs = [self.new_blob(shape), self.new_blob(shape)]
            for blob, field, value in ((self.blobs[0], "slope_filler", 1.0001),
                                       (self.blobs[1], "bias_filler", 0.0001)):
                if p.HasField(field):
                    get_filler(getattr(p, field)).fill(blob)
                else:
                    blob.data[...] = value
        count = int(np.prod(shape))
        if len(self.blobs) != 2 or any(b.count != count for b in self.blobs):
            raise self.error("slope and bias blobs must hold %d value(s) each" % count)
        self.param_propagate_down = [True, True]

    def _per_channel(self, blob, x):
        v = blob.data
        return v.reshape(()) if self.channel_shared else v.reshape((1, -1) + (1,) * (x.ndim - 2))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._x = x.copy() if top[0] is bottom[0] else x
        top[0].data[...] = x * self._per_channel(self.blobs[0], x) + self._per_channel(
            self.blobs[1], x)

    def backward_cpu(self, top, propagate_down, bottom):
        x, dy = self._x, top[0].diff
        axes = None if self.channel_shared else (0,) + tuple(range(2, x.ndim))
        if self.param_propagate_down[1]:
            self.blobs[1].diff[...] += dy.sum(axis=axes)
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += (dy * x).sum(axis=axes)
        if propagate_down[0]:
            bottom[0].diff[...] = dy * self._per_channel(self.blobs[0], x)


@register_layer("Local")
class LocalLayer(Layer):
    """Locally connected layer: a convolution whose filters differ at every output position
    (happynear/caffe-windows, src/caffe/layers/local_layer.cpp). With col the im2col columns of
    one image (K = C k k rows, P = H_out W_out positions), weights W (M x 1 x K x P) and bias
    b (1 x 1 x M x P):

        y[m, q] = sum_k W[m, k, q] col[k, q] + b[m, q]
        dL/dW[m, k, q] += sum_n dL/dy[n, m, q] col_n[k, q];  dL/db[m, q] += sum_n dL/dy[n, m, q]
        dL/dcol[k, q] = sum_m W[m, k, q] dL/dy[m, q], summed back into the image (col2im)

    prototxt: ``local_param { num_output kernel_size stride: 1 pad: 0 bias_term: true
    weight_filler bias_filler }`` (square kernel, stride and pad). Bottom: N x C x H x W (one;
    its C, H, W fixed at setup, as the fork's weights are); top: N x M x H_out x W_out.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.local_param
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        self.k, self.s, self.pad = p.kernel_size, p.stride, p.pad
        self.m = p.num_output
        if self.k <= 0 or self.m <= 0 or self.s <= 0:
            raise self.error("local_param needs kernel_size > 0, num_output > 0, stride > 0")
        _, c, h, w = bottom[0].shape
        if h < self.k or w < self.k:
            raise self.error("input %dx%d smaller than kernel_size %d" % (h, w, self.k),
                             ShapeError)
        self.in_shape = (c, h, w)
        self.out_hw = ((h + 2 * self.pad - self.k) // self.s + 1,
                       (w + 2 * self.pad - self.k) // self.s + 1)
        kk, pp = c * self.k * self.k, self.out_hw[0] * self.out_hw[1]
        self.bias_term = p.bias_term
        if not self.blobs:
            self.blobs = [self.new_blob((self.m, 1, kk, pp))]
            get_filler(p.weight_filler).fill(self.blobs[0])
            if self.bias_term:
                self.blobs.append(self.new_blob((1, 1, self.m, pp)))
                get_filler(p.bias_filler).fill(self.blobs[1])
        want = [self.m * kk * pp] + ([self.m * pp] if self.bias_term else [])
        if [b.count for b in self.blobs] != want:
            raise self.error("weight/bias blobs hold %s values; expected %s"
                             % ([b.count for b in self.blobs], want))
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        if tuple(bottom[0].shape[1:]) != self.in_shape:
            raise self.error("bottom C x H x W %s differs from the setup's %s"
                             % (bottom[0].shape[1:], self.in_shape), ShapeError)
        top[0].reshape((bottom[0].shape[0], self.m) + self.out_hw)

    def _cols(self, x):
        return im2col(x, (self.k, self.k), (self.pad, self.pad), (self.s, self.s), (1, 1))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._col = self._cols(x)                                   # N x K x P
        w = self.blobs[0].data.reshape(self.m, *self._col.shape[1:])
        y = np.einsum("nkp,mkp->nmp", self._col, w)
        if self.bias_term:
            y += self.blobs[1].data.reshape(1, self.m, -1)
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        dy = top[0].diff.reshape(n, self.m, -1)
        if self.bias_term and self.param_propagate_down[1]:
            self.blobs[1].diff[...] += dy.sum(0).reshape(self.blobs[1].shape)
        if self.param_propagate_down[0]:
            dw = np.einsum("nmp,nkp->mkp", dy, self._col)
            self.blobs[0].diff[...] += dw.reshape(self.blobs[0].shape)
        if propagate_down[0]:
            w = self.blobs[0].data.reshape(self.m, *self._col.shape[1:])
            dcol = np.einsum("nmp,mkp->nkp", dy, w)
            bottom[0].diff[...] = col2im(dcol, bottom[0].shape, (self.k, self.k),
                                         (self.pad, self.pad), (self.s, self.s), (1, 1))
