"""The landmark layers of JiajianZeng/ContextWithStructure (commit 2508ceb4; facial-landmark nets
with a structural and a perceptual loss): AveragePoint, FacialLandmarkPerformance, StructualLoss
and PerceptualLoss (its PatchSemantic is in ``patch_semantic``).

The fork's Forward_cpu / Backward_cpu only stop with "not implemented": its .cu files, which do
the work on the host, are the reference. A landmark vector of L points is read as the fork's
Reshape views it, (N, L, 2, 1): x_n at 2n, y_n at 2n + 1 of each row. The fork reshapes the
bottom blobs themselves; that changes no other layer's view (one blob feeding several layers
goes through a Split, whose tops have their own shapes), so caffepy leaves them as they are.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


def _points(layer, bottom, i, n_points, what, per_point=2):
    """Bottom i as (N, n_points, per_point), refusing a row of another length (the error fits
    it with N x per_point n_points x 1 x 1, a Datum's vector)."""
    blob, width = bottom[i], per_point * n_points
    if blob.count_range(1) != width:
        n = blob.shape[0] if blob.num_axes else 1
        raise layer.needs("%s must have %d values per row (%d x %d), got %d"
                          % (what, width, n_points, per_point, blob.count_range(1)),
                          [(i, (n, width, 1, 1), None)])
    return blob.data.reshape(blob.shape[0], n_points, per_point)


def _same_num(layer, bottom):
    nums = [b.shape[0] if b.num_axes else 1 for b in bottom]
    if len(set(nums)) != 1:
        raise layer.error("the bottoms must have the same num, got %s" % nums, ShapeError)
    return nums[0]


def _zero_diffs(propagate_down, bottom):
    """The fork's backward writes nothing here: the bottoms get no gradient."""
    for down, b in zip(propagate_down, bottom):
        if down:
            b.diff[...] = 0


@register_layer("AveragePoint")
class AveragePointLayer(Layer):
    """The centre of L landmarks: root = (1/L sum_n x_n, 1/L sum_n y_n).

    Backward: dx_n = d root_x / L, dy_n = d root_y / L.
    prototxt: ``average_point_param { num_landmark: 5 }``. Bottom: landmarks (N, 2L...); top:
    root (N, 2, 1, 1).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.n_points = int(self.layer_param.average_point_param.num_landmark)

    def reshape(self, bottom, top):
        _points(self, bottom, 0, self.n_points, "the landmark input")
        top[0].reshape((bottom[0].shape[0], 2, 1, 1))

    def forward_cpu(self, bottom, top):
        p = _points(self, bottom, 0, self.n_points, "the landmark input")
        top[0].data.reshape(-1, 2)[...] = p.sum(axis=1) / self.n_points

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            g = top[0].diff.reshape(-1, 1, 2) / self.n_points
            bottom[0].diff.reshape(-1, self.n_points, 2)[...] = g


@register_layer("FacialLandmarkPerformance")
class FacialLandmarkPerformanceLayer(Layer):
    """Per-landmark mean normalised error and failure rate over the batch.

        e_bn = sqrt((x_bn - x'_bn)^2 + (y_bn - y'_bn)^2) / d_b
        average_error_n = 1/N sum_b e_bn,  false_rate_n = 1/N #{b : e_bn > error_threshold}
    with the predictions (x, y), the ground truth (x', y') and the normaliser d (the bi-ocular
    distance or the face box width). A metric: no gradient (the fork's backward writes none).

    prototxt: ``facial_landmark_performance_param { num_landmark: 5 error_threshold: 0.05 }``.
    Bottoms: predictions (N, 2L...), ground truth (N, 2L...), normaliser (N, 1...); tops: average
    error (L, 1, 1, 1), false rate (L, 1, 1, 1).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.facial_landmark_performance_param
        self.n_points = int(p.num_landmark)
        self.threshold = float(p.error_threshold)

    def reshape(self, bottom, top):
        _points(self, bottom, 0, self.n_points, "the landmark predictions")
        _points(self, bottom, 1, self.n_points, "the landmark ground truth")
        if bottom[2].count_range(1) != 1:
            raise self.needs("the normaliser must have one value per image, got %d"
                             % bottom[2].count_range(1), [(2, (bottom[0].shape[0], 1, 1, 1), None)])
        _same_num(self, bottom)
        for t in top:
            t.reshape((self.n_points, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        pred = _points(self, bottom, 0, self.n_points, "the landmark predictions")
        gt = _points(self, bottom, 1, self.n_points, "the landmark ground truth")
        err = np.sqrt(np.square(pred - gt).sum(axis=2)) / bottom[2].data.reshape(-1, 1)
        top[0].data.reshape(-1)[...] = err.mean(axis=0)
        top[1].data.reshape(-1)[...] = (err > self.threshold).mean(axis=0)

    def backward_cpu(self, top, propagate_down, bottom):
        _zero_diffs(propagate_down, bottom)


@register_layer("StructualLoss")
class StructualLossLayer(LossLayer):
    """The structural loss: each of L landmarks measured from a root point (the (L+1)-th), in
    the prediction and the ground truth, through a quadratic in the offsets.

        dx_n = x_n - x_root,  dy_n = y_n - y_root
        s_n = w0 dx_n + w1 dx_n^2 + w2 dy_n + w3 dy_n^2
        D_bn = s_bn(prediction) - s_bn(ground truth),   loss = 1/(2N) sum_bn D_bn^2
    Backward, sign +1 for the prediction and -1 for the ground truth:
        d x_n = sign D_n (w0 + 2 w1 dx_n) / N,   d y_n = sign D_n (w2 + 2 w3 dy_n) / N,
        d x_root = -sum_n d x_n,   d y_root = -sum_n d y_n      (times the top's diff).

    prototxt: ``structual_loss_param { num_landmark: 5 w0: 1 w1: 1 w2: 1 w3: 1 }``. Bottoms:
    prediction and ground truth, (N, 2(L+1)...) each (the L points, then the root); top: loss.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.structual_loss_param
        self.n_points = int(p.num_landmark)
        self.w = [float(p.w0), float(p.w1), float(p.w2), float(p.w3)]

    def reshape(self, bottom, top):
        if bottom[0].count_range(1) != bottom[1].count_range(1):
            raise self.shape_mismatch("the two bottoms must have the same dimension, got %d and "
                                      "%d" % (bottom[0].count_range(1), bottom[1].count_range(1)),
                                      1, 0, bottom)
        for i in (0, 1):
            _points(self, bottom, i, self.n_points + 1, "bottom %d (the points and the root)" % i)
        LossLayer.reshape(self, bottom, top)

    def _offsets(self, blob):
        p = blob.data.reshape(blob.shape[0], self.n_points + 1, 2)
        return p[:, :-1, :] - p[:, -1:, :]

    def _structure(self, d):
        w0, w1, w2, w3 = self.w
        return w0 * d[..., 0] + w1 * d[..., 0] ** 2 + w2 * d[..., 1] + w3 * d[..., 1] ** 2

    def forward_cpu(self, bottom, top):
        self.d = [self._offsets(b) for b in bottom]
        self.gap = self._structure(self.d[0]) - self._structure(self.d[1])
        top[0].data[...] = np.square(self.gap).sum() / bottom[0].shape[0] / 2

    def backward_cpu(self, top, propagate_down, bottom):
        w0, w1, w2, w3 = self.w
        scale = float(top[0].diff) / bottom[0].shape[0]
        for i, sign in ((0, 1.0), (1, -1.0)):
            if not propagate_down[i]:
                continue
            d = self.d[i]
            grad = np.empty_like(d)
            grad[..., 0] = sign * self.gap * (w0 + 2 * w1 * d[..., 0])
            grad[..., 1] = sign * self.gap * (w2 + 2 * w3 * d[..., 1])
            out = bottom[i].diff.reshape(bottom[i].shape[0], self.n_points + 1, 2)
            out[:, :-1, :] = scale * grad
            out[:, -1, :] = -scale * grad.sum(axis=1)

    def allow_force_backward(self, bottom_index):
        return True


@register_layer("PerceptualLoss")
class PerceptualLossLayer(LossLayer):
    """The perceptual loss: a landmark's residual (dx, dy) against the feature derivatives
    (Ex, Ey, Et) a PatchSemantic layer computes, through a smoothed absolute value.

        s_bn = dx_bn Ex_bn + dy_bn Ey_bn + Et_bn,   loss = 1/N sum_bn sqrt(s_bn^2 + epsilon)
    Backward (the residuals only; the fork gives the derivatives no gradient):
        d dx_bn = s_bn Ex_bn / sqrt(s_bn^2 + epsilon) / N, likewise dy with Ey.

    prototxt: ``perceptual_loss_param { num_landmark: 5 epsilon: 1.0 }``. Bottoms: residuals
    (N, 2L...), derivatives (N, 3L...: Ex, Ey, Et per landmark); top: loss.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.perceptual_loss_param
        self.n_points = int(p.num_landmark)
        self.epsilon = float(p.epsilon)

    def reshape(self, bottom, top):
        _points(self, bottom, 0, self.n_points, "the residuals (dx, dy)")
        _points(self, bottom, 1, self.n_points, "the derivatives (Ex, Ey, Et)", per_point=3)
        LossLayer.reshape(self, bottom, top)

    def forward_cpu(self, bottom, top):
        r = _points(self, bottom, 0, self.n_points, "the residuals (dx, dy)")
        e = _points(self, bottom, 1, self.n_points, "the derivatives (Ex, Ey, Et)", per_point=3)
        self.s = r[..., 0] * e[..., 0] + r[..., 1] * e[..., 1] + e[..., 2]
        self.err = np.sqrt(np.square(self.s) + self.epsilon)
        top[0].data[...] = self.err.sum() / bottom[0].shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            e = bottom[1].data.reshape(bottom[1].shape[0], self.n_points, 3)
            scale = float(top[0].diff) / bottom[0].shape[0]
            out = bottom[0].diff.reshape(bottom[0].shape[0], self.n_points, 2)
            out[...] = scale * (self.s / self.err)[..., None] * e[..., :2]
        _zero_diffs([False] + list(propagate_down[1:]), bottom)
