"""Losses and a metric of single forks, each the layer behind one of that fork's V1 types:
Regularization and SSIMLoss (k402xxxcenxxx/SICE, V1 REGULARIZATION, SSIM_LOSS; its V1 L1_LOSS, sum
|a - b| / N, is FlowNet 2's L1Loss with the default l1_loss_param, caffepy.forks.flownet.loss),
WeightedSoftmaxWithLoss (201power/caffe, V1 WEIGHTED_SOFTMAX_LOSS), SigmoidEuclideanLoss
(zeakey/DeepSkeleton, V1 SIGMOID_EUCLIDEAN_LOSS), AccuracyDistance (CamlinZ/face_alignment, V1
ACCURACYDISTANCE), SemiContrastLoss (PKU-ICST-MIPL/CCL_TMM2018, V1 SEMICONTRAST_LOSS).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer

_FLT_MIN = np.finfo(np.float32).tiny


class _PairLoss(LossLayer):
    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].count != bottom[1].count:
            raise self.error("inputs differ in size: %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)


@register_layer("Regularization")
class RegularizationLayer(LossLayer):
    """Pull values towards a piecewise-constant target (k402xxxcenxxx/SICE,
    caffe/src/caffe/layers/regularization_layer.cpp). With t(x) from ``method``:

        Zero: t = regular.  One / Two / Three: t = 0 for x < 0, 1 for x > 1, else value_k for
        x in [level_{k-1}, level_k) (level_0 = 0, the last interval closed at 1) with 1 / 3 / 7
        levels (value1..value2, value1..value4, value1..value8)
        L2: loss = sum (x - t)^2 / (2 N);  L1: loss = sum |x - t| / (2 N)
        dL/dx = g (x - t) / N   (for L1 too: the fork's L1 backward overwrites the sign with the
        difference)

    The second bottom is required (a loss layer's) and not read. prototxt:
    ``regularization_param { norm: L1 method: Zero regular: 0.5 level1..level7 value1..value8 }``.
    """

    def _target(self, x):
        p = self.layer_param.regularization_param
        kinds = type(p).ReMethod
        if p.method == kinds.Value("Zero"):
            return np.full_like(x, p.regular)
        n = {kinds.Value("One"): 1, kinds.Value("Two"): 3, kinds.Value("Three"): 7}[p.method]
        levels = [getattr(p, "level%d" % k) for k in range(1, n + 1)]
        values = [getattr(p, "value%d" % k) for k in range(1, n + 2)]
        t = np.ones_like(x)
        t[x < 0] = 0
        edges = [0.0] + levels
        for k in range(n + 1):
            hi = x <= 1 if k == n else x < edges[k + 1]
            t[(x >= edges[k]) & hi] = values[k]
        return t

    def forward_cpu(self, bottom, top):
        p = self.layer_param.regularization_param
        x = bottom[0].data
        self.diff = x - self._target(x)
        n = bottom[0].shape[0]
        if p.norm == type(p).Norm.Value("L2"):
            top[0].data[...] = (self.diff ** 2).sum() / n / 2
        else:
            top[0].data[...] = np.abs(self.diff).sum() / n / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = float(top[0].diff) / bottom[0].shape[0] * self.diff


@register_layer("WeightedSoftmaxWithLoss")
class WeightedSoftmaxWithLossLayer(LossLayer):
    """Softmax loss with a weight per sample / pixel (201power/caffe,
    src/caffe/layers/weighted_softmax_loss_layer.cpp). With p the softmax over channels (axis 1)
    and w the third bottom:

        loss = -sum_{valid} w log max(p[label], FLT_MIN) / D,  D = the valid count
        (``loss_param { normalize: true }``) or N (the default);  ignored labels are skipped
        dL/dz = g w (p - onehot) / D at valid positions, 0 at ignored ones

    The fork's backward scales the channels of a position by w correctly only for H = W = 1
    (its loop over the whole image's values at that stride runs past the channels); caffepy
    scales the position's channels. prototxt: ``loss_param { ignore_label normalize }``.
    Bottoms: scores N x C [x H x W], labels N [x H x W], weights N [x H x W]. Tops: loss
    [, probabilities].
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n, c = bottom[0].shape[:2]
        self.spatial = bottom[0].count // (n * c)
        for i in (1, 2):
            if bottom[i].count != n * self.spatial:
                raise self.error("bottom[%d] has %d values, expected N x H x W = %d"
                                 % (i, bottom[i].count, n * self.spatial), ShapeError)
        if len(top) > 1:
            top[1].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, c, -1).astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        self.prob = e / e.sum(1, keepdims=True)
        lab = bottom[1].data.reshape(n, -1).astype(int)
        w = bottom[2].data.reshape(n, -1)
        lp = self.layer_param.loss_param
        self.valid = lab != lp.ignore_label if lp.HasField("ignore_label") else np.ones_like(
            lab, bool)
        self.lab = np.where(self.valid, lab, 0)
        picked = np.take_along_axis(self.prob, self.lab[:, None, :], 1)[:, 0]
        loss = -(w * np.log(np.maximum(picked, _FLT_MIN)))[self.valid].sum()
        self.denom = max(int(self.valid.sum()), 1) if lp.normalize else n
        self.w = w
        top[0].data[...] = loss / self.denom
        if len(top) > 1:
            top[1].data[...] = self.prob.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1] or propagate_down[2]:
            raise self.error("cannot backpropagate to the labels or the weights")
        if propagate_down[0]:
            g = self.prob.copy()
            np.put_along_axis(g, self.lab[:, None, :],
                              np.take_along_axis(g, self.lab[:, None, :], 1) - 1, 1)
            g *= (self.w * self.valid)[:, None, :]
            bottom[0].diff[...] = (g * float(top[0].diff) / self.denom).reshape(bottom[0].shape)


@register_layer("SigmoidEuclideanLoss")
class SigmoidEuclideanLossLayer(_PairLoss):
    """Class-balanced squared error for skeleton / edge maps (zeakey/DeepSkeleton,
    src/caffe/layers/sigmoid_euclidean_loss_layer.cpp), as the fork computes it. Targets >= 0.001
    are positive. Forward, on the raw input x (not its sigmoid), with P and Q the counts of
    positives and negatives accumulated over the images so far in the batch:

        loss = sum_i [ Q_i/(P_i+Q_i) sum_pos (x - t)^2 + P_i/(P_i+Q_i) sum_neg (x - t)^2 ] / N

    Backward, with P, Q counted per image: dL/dx = g (sigmoid(x) - t) * (Q/(P+Q) on positives,
    P/(P+Q) on negatives) / N. The two do not match (the fork's forward drops the sigmoid, and
    a factor 2); caffepy reproduces both. Bottoms: x, t (same count). Top: loss.
    """

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1)
        t = bottom[1].data.reshape(n, -1)
        pos = t >= 0.001
        sq = (x - t) ** 2
        loss, cp, cn = 0.0, 0, 0
        for i in range(n):
            cp += int(pos[i].sum())
            cn += int((~pos[i]).sum())
            loss += sq[i][pos[i]].sum() * cn / (cp + cn) + sq[i][~pos[i]].sum() * cp / (cp + cn)
        top[0].data[...] = loss / n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the targets")
        if propagate_down[0]:
            n = bottom[0].shape[0]
            x = bottom[0].data.reshape(n, -1)
            t = bottom[1].data.reshape(n, -1)
            pos = t >= 0.001
            cp = pos.sum(1, keepdims=True)
            cn = (~pos).sum(1, keepdims=True)
            scale = np.where(pos, cn, cp) / (cp + cn)
            d = (1 / (1 + np.exp(-x)) - t) * scale * float(top[0].diff) / n
            bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("AccuracyDistance")
class AccuracyDistanceLayer(Layer):
    """Mean pixel distance between predicted and true landmarks (CamlinZ/face_alignment,
    src/caffe/layers/accuracy_distance_layer.cpp). Coordinates in [-1, 1] (x1, y1, x2, y2, ...
    along the channels) map to pixels as int(v (d - 1)/2 + (d - 1)/2 + 0.5) with d = dw for x,
    dh for y (int truncates toward 0); the top is the mean over samples and points of the
    Euclidean distance. prototxt: ``accuracy_distance_param { dh: 1 dw: 1 }`` (axis and
    ignore_label are read by the fork and not used). Bottoms: predictions, labels (N x C, C
    even). Top: the distance. No backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.accuracy_distance_param
        if p.dh < 1 or p.dw < 1:
            raise self.error("accuracy_distance_param: dh and dw must be at least 1")
        self.h2, self.w2 = (p.dh - 1) * 0.5, (p.dw - 1) * 0.5

    def reshape(self, bottom, top):
        n = bottom[1].shape[0]
        c = bottom[1].count // n
        if bottom[0].count != bottom[1].count or c % 2:
            raise self.error("predictions %s and labels %s must match, with an even number of "
                             "values per sample" % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        n = bottom[1].shape[0]
        p = bottom[0].data.reshape(n, -1, 2).astype(np.float32)
        t = bottom[1].data.reshape(n, -1, 2).astype(np.float32)
        scale = np.array([self.w2, self.h2], np.float32)
        pi = np.trunc(p * scale + scale + 0.5)
        ti = np.trunc(t * scale + scale + 0.5)
        dist = np.sqrt(((pi - ti) ** 2).sum(-1))
        top[0].data[...] = dist.sum() / n / (2 * dist.shape[1]) * 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("AccuracyDistance has no backward")


@register_layer("SemiContrastLoss")
class SemiContrastLossLayer(LossLayer):
    """Cross-modal contrastive loss over all image / text pairs (PKU-ICST-MIPL/CCL_TMM2018,
    caffe-master/src/caffe/layers/semicontrast_loss_layer_divide.cpp). With images u_i, texts
    v_j (rows of bottoms 0 and 1), labels l (bottom 2) and d_ij = ||u_i - v_j||:

        loss = [ sum_{l_i = l_j} d_ij^2 + sum_{l_i != l_j} max(m - d_ij, 0)^2 ] / (2 N)
        dL/du_i = (2 g / N) [ sum_same (u_i - v_j) - sum_diff,d<m (m - d)/(d + 1e-4) (u_i - v_j) ]

    and the mirror image for v_j, written only with ``feature_index: 1`` (0: the texts get a
    zero gradient). The gradient is the fork's: twice the loss's derivative. (The fork draws a
    random choice for dissimilar pairs that always keeps them.) prototxt:
    ``semicontrast_loss_param { margin: 1 feature_index: 0 | 1 }`` (lambda and knn_k not read).
    Bottoms: images N x D, texts N x D, labels N. Top: loss.
    """
    exact_num_bottom_blobs = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.semicontrast_loss_param
        if p.feature_index not in (0, 1):
            raise self.error("semicontrast_loss_param: feature_index must be 0 or 1")

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        if bottom[1].shape != bottom[0].shape or bottom[0].count != n * bottom[0].shape[1] \
                or bottom[2].count != n:
            raise self.error("bottoms must be N x D, N x D and N labels, got %s"
                             % ([b.shape for b in bottom],), ShapeError)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        u, v = bottom[0].data.reshape(n, -1), bottom[1].data.reshape(n, -1)
        lab = bottom[2].data.reshape(-1)
        self.diff = u[:, None, :] - v[None, :, :]
        self.d = np.sqrt((self.diff ** 2).sum(2))
        self.same = lab[:, None] == lab[None, :]
        m = self.layer_param.semicontrast_loss_param.margin
        loss = np.where(self.same, self.d ** 2, np.maximum(m - self.d, 0) ** 2).sum()
        top[0].data[...] = loss / n / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the labels")
        n = bottom[0].shape[0]
        m = self.layer_param.semicontrast_loss_param.margin
        w = np.where(self.same, 1.0, np.where(m - self.d > 0, -(m - self.d) / (self.d + 1e-4),
                                              0.0))
        alpha = 2 * float(top[0].diff) / n
        g = alpha * w[:, :, None] * self.diff
        if propagate_down[0]:
            bottom[0].diff[...] = g.sum(1).reshape(bottom[0].shape)
        if propagate_down[1]:
            text = -g.sum(0) if self.layer_param.semicontrast_loss_param.feature_index == 1 \
                else np.zeros_like(g[0])
            bottom[1].diff[...] = text.reshape(bottom[1].shape)


@register_layer("SSIMLoss")
class SSIMLossLayer(LossLayer):
    """1 - SSIM over Gaussian windows (k402xxxcenxxx/SICE, caffe/src/caffe/layers/
    ssim_loss_layer.cpp). Windows of k x k (``kernel_size``) at ``stride`` (P = ceil((H - k) /
    stride) + 1 per axis, the last ones clipped at the border), weighted by a Gaussian with
    sigma = k / 6 centred at k / 2, normalised to sum 1 (clipped windows are not renormalised).
    Per window: means u_x, u_y, variances s_x, s_y and covariance s_xy from the weighted sums;

        l = (2 u_x u_y + C1) / (u_x^2 + u_y^2 + C1);  c = (2 s_xy + C2) / (s_x + s_y + C2)
        loss = (number of windows - sum l c) / N

    and its derivative for x (bottom 0; the reference y gets none). prototxt:
    ``ssim_loss_param { kernel_size stride c1 c2 }`` (all four required by the fork).
    Bottoms: x, y (N x C x H x W). Top: loss.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.ssim_loss_param
        for f in ("kernel_size", "stride", "c1", "c2"):
            if not p.HasField(f):
                raise self.error("ssim_loss_param: %s is required" % f)
        if p.kernel_size < 1 or p.stride < 1 or p.c1 <= 0 or p.c2 <= 0:
            raise self.error("ssim_loss_param: kernel_size, stride, c1, c2 must be positive")
        k = p.kernel_size
        sigma = 2 * k / 12.0
        i = np.arange(k) - k / 2.0
        g = np.exp(-(i[:, None] ** 2 + i[None, :] ** 2) / (2 * sigma * sigma))
        self.k, self.s, self.g = k, p.stride, g / g.sum()

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].num_axes != 4 or bottom[0].shape != bottom[1].shape:
            raise self.error("x and y must be N x C x H x W of one shape, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        h, w = bottom[0].shape[2:]
        self.ph = int(np.ceil(float(h - self.k) / self.s)) + 1
        self.pw = int(np.ceil(float(w - self.k) / self.s)) + 1

    def _windows(self):
        h, w = self.shape
        for a in range(self.k):
            for b in range(self.k):
                rows = np.arange(self.ph) * self.s + a
                cols = np.arange(self.pw) * self.s + b
                ri, ci = rows < h, cols < w
                yield self.g[a, b], rows, cols, ri, ci

    def _conv(self, v):
        out = np.zeros(v.shape[:2] + (self.ph, self.pw))
        for g, rows, cols, ri, ci in self._windows():
            out[:, :, ri[:, None] & ci[None, :]] += g * v[:, :, rows[ri]][:, :, :, cols[ci]] \
                .reshape(v.shape[:2] + (-1,))
        return out

    def forward_cpu(self, bottom, top):
        x, y = bottom[0].data.astype(np.float64), bottom[1].data.astype(np.float64)
        self.shape = x.shape[2:]
        p = self.layer_param.ssim_loss_param
        ux, uy = self._conv(x), self._conv(y)
        sx = self._conv(x * x) - ux * ux
        sy = self._conv(y * y) - uy * uy
        sxy = self._conv(x * y) - ux * uy
        a, b = ux * ux + uy * uy + p.c1, sx + sy + p.c2
        lp, cs = (2 * ux * uy + p.c1) / a, (2 * sxy + p.c2) / b
        self.saved = (x, y, ux, uy, lp, cs, a, b)
        top[0].data[...] = (lp.size - (lp * cs).sum()) / x.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("SSIMLoss gives no gradient to its reference (bottom 1)")
        if not propagate_down[0]:
            return
        x, y, ux, uy, lp, cs, a, b = self.saved
        d1 = 2 * cs * (uy - ux * lp) / a
        d2 = 2 * lp / b
        dx = np.zeros_like(x)
        for g, rows, cols, ri, ci in self._windows():
            r, c = rows[ri], cols[ci]
            sub = (slice(None), slice(None), np.nonzero(ri)[0][:, None], np.nonzero(ci)[0][None])
            xs, ys = x[:, :, r][:, :, :, c], y[:, :, r][:, :, :, c]
            term = g * (d1[sub] + d2[sub] * ((ys - uy[sub]) - cs[sub] * (xs - ux[sub])))
            np.add.at(dx, (slice(None), slice(None), r[:, None], c[None]), term)
        bottom[0].diff[...] = -float(top[0].diff) / x.shape[0] * dx
