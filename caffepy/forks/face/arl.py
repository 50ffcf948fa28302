"""The layers of ZhiwenShao/ARL (commit 512c2260; attention and relation learning for facial
action units): Division and Combination (cut a map into patches, paste patches back),
CosineSimilarityLoss, EuclideanLoss6 (the AU-intensity loss that skips missing labels) and the
per-element weights of its SigmoidCrossEntropyLoss. Its MultiStageMeanfieldAU3 is in
``arl_meanfield``; its L2Norm (per sample, with 1e-9 added to the norm) builds as the registered
L2Norm (:mod:`caffepy.forks.misc.l2_norm`, no epsilon).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer, register_variant
from ...layers.loss import SigmoidCrossEntropyLossLayer, normalizer
from ...layers.loss_regression import check_same_dimension


def _coords(layer, p, n, what):
    """The first n (x, y) pairs of ``p.xcoord`` / ``p.ycoord``; the fork indexes them unchecked."""
    xs, ys = list(p.xcoord), list(p.ycoord)
    if len(xs) < n or len(ys) < n:
        raise layer.error("%s needs one xcoord and one ycoord per %s (%d); got %d and %d"
                          % (layer.layer_param.type, what, n, len(xs), len(ys)))
    return [(int(ys[i]), int(xs[i])) for i in range(n)]


def _nchw(layer, blob, what):
    if blob.num_axes != 4:
        raise layer.error("%s must be N x C x H x W, got %s" % (what, blob.shape), ShapeError)
    return blob.shape


@register_layer("Division")
class DivisionLayer(Layer):
    """Cut K rectangles of one size out of a map, one per top (ZhiwenShao/ARL,
    src/division_layer.cpp):

        top_k[n, c, i, j] = x[n, c, y_k + i, x_k + j]   0 <= i < height, 0 <= j < width

    Backward: the bottom diff inside patch k is top_k's diff (a later patch overwrites an earlier
    one where they overlap, as the fork's assignment does); outside every patch the fork leaves
    the diff untouched, caffepy sets it to 0.

    prototxt: ``division_param { width: 22 height: 22 xcoord: 0 xcoord: 22 ... ycoord: 0 ... }``
    (one (xcoord, ycoord) per top, the patch's left and top edge; width and height are required).
    Bottom: N x C x H x W; tops: K of N x C x height x width. A patch that leaves the map is
    refused (the fork would read past the row).
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.division_param
        if not (p.HasField("width") and p.HasField("height")):
            raise self.error("division_param needs width and height (required in the fork)")
        self.h, self.w = int(p.height), int(p.width)
        self.corners = _coords(self, p, len(top), "top")

    def reshape(self, bottom, top):
        N, C, H, W = _nchw(self, bottom[0], "the bottom")
        for k, (y, x) in enumerate(self.corners):
            if y + self.h > H or x + self.w > W:
                raise self.error("patch %d (%d x %d at x=%d, y=%d) leaves the %d x %d bottom"
                                 % (k, self.h, self.w, x, y, H, W), ShapeError)
        for t in top:
            t.reshape((N, C, self.h, self.w))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        for t, (y0, x0) in zip(top, self.corners):
            t.data[...] = x[:, :, y0:y0 + self.h, x0:x0 + self.w]

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        d = np.zeros(bottom[0].shape, bottom[0].diff.dtype)
        for t, (y0, x0) in zip(top, self.corners):
            d[:, :, y0:y0 + self.h, x0:x0 + self.w] = t.diff
        bottom[0].diff[...] = d


@register_layer("Combination")
class CombinationLayer(Layer):
    """Paste K patches into one map (ZhiwenShao/ARL, src/combination_layer.cpp), the inverse of
    Division:

        top[n, c, y_k + i, x_k + j] = bottom_k[n, c, i, j]

    The top is N x C x (y_K + H_K) x (x_K + W_K), from the last patch's corner and size; N and C
    are bottom 0's. Where patches overlap the later one wins; places no patch covers are 0.
    Backward: bottom_k's diff is the top diff over its rectangle. The fork writes every bottom's
    diff when propagate_down[0] is set and none otherwise; caffepy does the same.

    prototxt: ``combination_param { xcoord: 0 xcoord: 88 ... ycoord: 0 ycoord: 0 ... }`` (one
    (xcoord, ycoord) per bottom). Bottoms: K maps N x C x H_k x W_k; top: one map. Bottoms of
    another N or C than bottom 0, or reaching past the top, are refused (the fork would read or
    write out of place).
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.corners = _coords(self, self.layer_param.combination_param, len(bottom), "bottom")

    def reshape(self, bottom, top):
        N, C = _nchw(self, bottom[0], "bottom 0")[:2]
        y, x = self.corners[-1]
        H, W = y + bottom[-1].shape[2], x + bottom[-1].shape[3]
        for k, (b, (y0, x0)) in enumerate(zip(bottom, self.corners)):
            n, c, h, w = _nchw(self, b, "bottom %d" % k)
            if (n, c) != (N, C):
                raise self.error("bottom %d is %s; every bottom needs bottom 0's N and C (%d, %d)"
                                 % (k, b.shape, N, C), ShapeError)
            if y0 + h > H or x0 + w > W:
                raise self.error("bottom %d (%d x %d at x=%d, y=%d) leaves the %d x %d top (set "
                                 "by the last bottom)" % (k, h, w, x0, y0, H, W), ShapeError)
        top[0].reshape((N, C, H, W))

    def forward_cpu(self, bottom, top):
        out = np.zeros(top[0].shape, top[0].data.dtype)
        for b, (y0, x0) in zip(bottom, self.corners):
            out[:, :, y0:y0 + b.shape[2], x0:x0 + b.shape[3]] = b.data
        top[0].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        g = top[0].diff
        for b, (y0, x0) in zip(bottom, self.corners):
            b.diff[...] = g[:, :, y0:y0 + b.shape[2], x0:x0 + b.shape[3]]


@register_layer("CosineSimilarityLoss")
class CosineSimilarityLossLayer(LossLayer):
    """One minus the mean dot product of two inputs (ZhiwenShao/ARL,
    src/cosine_similarity_loss_layer.cpp); the inputs are not normalised here (the fork's nets
    put L2Norm in front):

        loss = 1 - 1/N sum_n a_n . b_n
        dloss/da_n = -top_diff / N * b_n,   dloss/db_n = -top_diff / N * a_n

    Bottoms: a, b (N x ..., the same count per sample); top: the loss (scalar). Both bottoms may
    take a gradient.
    """

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        check_same_dimension(self, bottom)

    def _flat(self, bottom):
        n = bottom[0].shape[0]
        return n, bottom[0].data.reshape(n, -1), bottom[1].data.reshape(n, -1)

    def forward_cpu(self, bottom, top):
        n, a, b = self._flat(bottom)
        top[0].data[...] = 1.0 - np.sum(a * b) / n

    def backward_cpu(self, top, propagate_down, bottom):
        n, a, b = self._flat(bottom)
        scale = -float(top[0].diff) / n
        for i, other in ((0, b), (1, a)):
            if propagate_down[i]:
                bottom[i].diff[...] = (scale * other).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return True


#: EuclideanLoss6's marker of a missing AU label.
MISSING_LABEL = 9.0


@register_layer("EuclideanLoss6")
class EuclideanLoss6Layer(LossLayer):
    """Weighted squared error over the labelled entries (ZhiwenShao/ARL,
    src/euclidean_loss_layer.cpp, "MSELoss with missing AU labels removed"):

        d_i = (p_i - t_i) w_i  where |t_i - 9| >= 1e-4, else 0 (9 marks a missing label)
        loss = sum_i d_i^2 / M,   M = the number of labelled entries
        dloss/dp_i = 2 top_diff d_i / M,   dloss/dt_i = -2 top_diff d_i / M

    The backward is the fork's: it uses d_i, so it is the exact derivative only where w_i is 0
    or 1 (the exact one would be 2 (p_i - t_i) w_i^2 / M). With no labelled entry the fork
    divides 0 by 0; caffepy gives NaN too. The weights get no gradient.

    Bottoms: prediction, label (the same count per sample), weight (one per entry); top: the loss
    (scalar).
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        check_same_dimension(self, bottom)
        if bottom[2].count != bottom[0].count:
            raise self.needs("the weights must hold one value per prediction (%d), got %s"
                             % (bottom[0].count, bottom[2].shape), [(2, bottom[0].shape, 0)])

    def forward_cpu(self, bottom, top):
        p, t, w = (b.data.astype(np.float64).reshape(-1) for b in bottom)
        labelled = np.abs(t - MISSING_LABEL) >= 1e-4
        self.d = np.where(labelled, (p - t) * w, 0.0)
        self.m = int(labelled.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            top[0].data[...] = np.float64(np.sum(self.d * self.d)) / np.float64(self.m)

    def backward_cpu(self, top, propagate_down, bottom):
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = 2.0 * float(top[0].diff) / np.float64(self.m)
            for i, sign in ((0, 1.0), (1, -1.0)):
                if propagate_down[i]:
                    bottom[i].diff[...] = (sign * alpha * self.d).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return True


@register_variant("SigmoidCrossEntropyLoss", lambda lp: len(lp.bottom) == 3)
class WeightedSigmoidCrossEntropyLossLayer(SigmoidCrossEntropyLossLayer):
    """SigmoidCrossEntropyLoss with a third bottom of per-element weights (ZhiwenShao/ARL,
    src/sigmoid_cross_entropy_loss_layer.cpp), taken when the layer has three bottoms:

        loss = -sum_{i valid} w_i [x_i (t_i - (x_i >= 0)) - log(1 + exp(x_i - 2 x_i (x_i >= 0)))]
               / normalizer
        dloss/dx_i = w_i (sigmoid(x_i) - t_i) top_diff / normalizer   (0 where t_i is ignored)

    The normalizer is the base layer's (loss_param.normalization; VALID counts the entries that
    are not ignored, whatever their weight). The weights get no gradient.
    Bottoms: logits x, targets t, weights w (all the same count); top: the loss (scalar).
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        SigmoidCrossEntropyLossLayer.reshape(self, bottom, top)
        if bottom[2].count != bottom[1].count:
            raise self.needs("number of weights must match number of labels (%s vs %s)"
                             % (bottom[2].shape, bottom[1].shape), [(2, bottom[1].shape, 1)])

    def forward_cpu(self, bottom, top):
        x, t = bottom[0].data, bottom[1].data
        w = bottom[2].data.reshape(x.shape)
        valid = self._valid(t)
        terms = (x * (t - (x >= 0)) - np.log1p(np.exp(-np.abs(x)))) * w
        self.norm = normalizer(self.normalization, self.layer_param.loss_param, x.shape[0],
                               x.size // max(x.shape[0], 1), int(valid.sum()))
        top[0].data[...] = -np.sum(terms[valid]) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        SigmoidCrossEntropyLossLayer.backward_cpu(self, top, propagate_down, bottom)
        if propagate_down[0]:
            bottom[0].diff[...] *= bottom[2].data.reshape(bottom[0].shape)
