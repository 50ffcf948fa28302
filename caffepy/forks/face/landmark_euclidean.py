"""goodluckcwl/custom-caffe's ``WeightEuclideanLoss`` (Face-alignment-mobilenet-v2): a Euclidean
loss on 68 facial landmarks with one weight per landmark group and an optional normalisation by
the inter-ocular distance or the landmarks' bounding box. Not the per-element-weight-blob
WeightedEuclideanLoss of :mod:`caffepy.forks.misc.weighted_euclidean`."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer

_POINTS = 68
#: the 13 "coarse" landmarks (1-based, as the fork lists them)
_COARSE = (18, 22, 23, 27, 37, 40, 43, 46, 28, 32, 36, 49, 55)
_FLT_MIN = np.finfo(np.float32).tiny


def landmark_weights(contour, main, coarse):
    """The fork's per-coordinate weights (136: the 68 x, then the 68 y): points 1-17 (the
    contour) ``contour``, 18-68 ``main``, the coarse points ``coarse`` when it is non-zero."""
    w = np.where(np.arange(_POINTS) <= 16, contour, main).astype(np.float64)
    if coarse != 0:
        w[np.asarray(_COARSE) - 1] = coarse
    return np.concatenate([w, w])


@register_layer("WeightEuclideanLoss")
class WeightEuclideanLossLayer(LossLayer):
    """src/caffe/layers/weight_euclidean_loss_layer.cpp of goodluckcwl/custom-caffe (its GPU code
    calls the CPU code). Rows are 136 values, x_1..x_68 then y_1..y_68; a = bottom 0, t = bottom
    1 (the ground truth), v = the optional bottom 2:

        L = 1/(2N) sum_n s_n sum_k w_k (a - t)_nk (a - t)_nk [v_nk]
        dL/da = dL/dL_top / N * s_n w_k (a - t)_nk;   dL/dt = -dL/da

    w from :func:`landmark_weights` and ``weight_euclidean_loss_param { contour_weight: 1
    main_weight: 1 coarse_weight: 1 }``. s_n = 1 unless ``normalized: 1``; then s_n =
    1 / max(D_n, FLT_MIN) from the ground truth row, with ``normalized_type: 0`` D = the distance
    between (x_37, y_40) and (x_43, y_46) (the fork's indices 36, 39, 42, 45 taken that way), with
    ``normalized_type: 1`` D = the diagonal of the box spanning the points and [0, 1] (its min /
    max start at 1 / 0). The gradient is the fork's: it leaves out v and, when normalised, the
    dependence of s on t; without v and normalisation it is the exact gradient.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_bottom_blobs = None

    def layer_setup(self, bottom, top):
        p = self.layer_param.weight_euclidean_loss_param
        self.weights = landmark_weights(p.contour_weight, p.main_weight, p.coarse_weight)
        self.normalized, self.norm_type = int(p.normalized), int(p.normalized_type)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n = bottom[0].shape[0]
        if bottom[0].count != n * 2 * _POINTS:
            raise self.error("needs 136 values (68 landmarks) per row, got shape %s"
                             % (bottom[0].shape,), ShapeError)
        for j in range(1, len(bottom)):
            if bottom[j].count != bottom[0].count:
                raise self.shape_mismatch("bottom %d must have the count of bottom 0 (%s vs %s)"
                                          % (j, bottom[j].shape, bottom[0].shape), j, 0, bottom)

    def _scale(self, t):
        if self.normalized != 1:
            return np.ones(t.shape[0])
        if self.norm_type == 0:
            x1, y1, x2, y2 = t[:, 36], t[:, _POINTS + 39], t[:, 42], t[:, _POINTS + 45]
        else:
            xs, ys = t[:, :_POINTS], t[:, _POINTS:]
            x1, x2 = np.minimum(xs.min(axis=1), 1.0), np.maximum(xs.max(axis=1), 0.0)
            y1, y2 = np.minimum(ys.min(axis=1), 1.0), np.maximum(ys.max(axis=1), 0.0)
        dis = np.sqrt((x1 - x2) ** 2 + (y1 - y2) ** 2)
        return 1.0 / np.maximum(dis, _FLT_MIN)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, -1)
        t = bottom[1].data.reshape(n, -1)
        diff = a - t
        self.wdiff = diff * self.weights * self._scale(t)[:, None]
        if len(bottom) == 3:
            diff = diff * bottom[2].data.reshape(n, -1)
        top[0].data[...] = np.sum(self.wdiff * diff) / n / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        scale = float(top[0].diff.reshape(())) / bottom[0].shape[0]
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * scale * self.wdiff).reshape(bottom[i].shape)
        if len(bottom) == 3 and propagate_down[2]:
            raise self.error("cannot backpropagate to the weights (bottom 2)")

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
