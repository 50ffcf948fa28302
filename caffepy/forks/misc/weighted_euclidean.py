"""WeightedEuclideanLoss: the Euclidean loss with a per-element weight blob (the certainty-weighted
form of the facial-keypoint forks, AlexanderSavochkin/caffe-facialkp's nets); pulkitag/caffe's
EuclideanLossWithIgnore (a use flag after each label row)."""
import numpy as np

from ...layers.base import LossLayer, register_layer


@register_layer("WeightedEuclideanLoss")
class WeightedEuclideanLossLayer(LossLayer):
    """Euclidean loss weighted element by element (src/caffe/layers/weighted_euclidean_loss_layer.cpp
    of the fork used by AlexanderSavochkin/caffe-facialkp, bottoms ``ip3, label, certainty``):

        loss = 1/(2N) sum_i w_i (x_i - t_i)^2
        dL/dx = loss_weight w (x - t) / N;   dL/dt = -loss_weight w (x - t) / N

    No parameters. Bottoms: x (N x ...), t and w (the same count as x). Top: the loss (). The
    weights get no gradient (the fork stops with a fatal error when asked for one).

    dementrock/caffe's WeightedEuclideanLoss (same file name, branch vgps) takes a matrix per
    sample instead: x and t N x D (x 1 x 1), the third bottom N x D x D (x 1). Then

        loss = 1/(2N) sum_n d_n^T P_n d_n;   dL/dx = loss_weight P_n d_n / N;   dL/dt = -dL/dx

    (d = x - t; the fork's gradient P d is exact for a symmetric P). This form is taken when the
    third bottom is N x D x D (x 1) with D = x's count per sample > 1.
    """
    exact_num_bottom_blobs = 3

    def _matrix_form(self, bottom):
        x, p = bottom[0], bottom[2]
        d = x.count_range(1)
        return (d > 1 and p.shape[0] == x.shape[0] and tuple(p.shape[1:3]) == (d, d)
                and p.count == x.shape[0] * d * d and x.count_range(2) == 1)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        self.matrix = self._matrix_form(bottom)
        if self.matrix:
            if bottom[1].count != bottom[0].count:
                raise self.shape_mismatch("bottom 1 must have the count of bottom 0 (%s vs %s)"
                                          % (bottom[1].shape, bottom[0].shape), 1, 0, bottom)
            return
        for j in (1, 2):
            if bottom[j].count != bottom[0].count:
                raise self.shape_mismatch("bottom %d must have the count of bottom 0 (%s vs %s)"
                                          % (j, bottom[j].shape, bottom[0].shape), j, 0, bottom)

    def _diff(self, bottom):
        return bottom[0].data - bottom[1].data.reshape(bottom[0].shape)

    def _pd(self, bottom):
        n = bottom[0].shape[0]
        d = self._diff(bottom).reshape(n, -1)
        p = bottom[2].data.reshape(n, d.shape[1], d.shape[1])
        return d, np.einsum("nij,nj->ni", p, d)

    def forward_cpu(self, bottom, top):
        if self.matrix:
            d, pd = self._pd(bottom)
            top[0].data[...] = np.sum(d * pd, dtype=np.float64) / bottom[0].shape[0] / 2.0
            return
        d = self._diff(bottom)
        w = bottom[2].data.reshape(d.shape)
        top[0].data[...] = np.sum(w * d * d, dtype=np.float64) / bottom[0].shape[0] / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the weight input (bottom 2)")
        if self.matrix:
            g = self._pd(bottom)[1].reshape(bottom[0].shape)
        else:
            g = self._diff(bottom) * bottom[2].data.reshape(bottom[0].shape)
        scale = float(top[0].diff.reshape(())) / bottom[0].shape[0]
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * scale * g).reshape(bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("EuclideanLossWithIgnore")
class EuclideanLossWithIgnoreLayer(LossLayer):
    """pulkitag/caffe's EuclideanLoss whose label rows carry a use flag
    (src/caffe/layers/euclidean_loss_with_ignore_layer.cpp): with x_n the n-th row of bottom 0
    (D values) and t_n the n-th row of bottom 1 (D + 1 channels), row n counts when its value
    after the first D, t_n[D], equals 1. Over the K counted rows,

        loss = 1/(2K) sum_{n counted} ||x_n - t_n[:D]||^2          (0 when K = 0)
        dL/dx_n = top_diff (x_n - t_n[:D]) / K,  dL/dt_n[:D] = -dL/dx_n   (counted rows)

    Rows not counted get no gradient (the fork leaves their diff unwritten; here 0) and neither
    does the flag. prototxt: ``euclideanloss_param { is_normalized: false normalize_choice: 0 }``;
    ``is_normalized: true`` (each row's loss over ||x_n||^2 or ||t_n[:D]||^2) is refused: the
    fork's backward multiplies the stored difference by that norm in place, over bottom 0's whole
    count from row n on, so its gradient is not the one of its loss. Bottoms: x (N, C, ...),
    t (N, C + 1, ...) with count(x) + N count(t, 2) = count(t). Top: the scalar loss.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.euclideanloss_param
        if p.normalize_choice > 1:
            raise self.error("euclideanloss_param.normalize_choice can be 0 or 1, got %d"
                             % p.normalize_choice)
        if p.is_normalized:
            raise self.error("euclideanloss_param.is_normalized: true is not supported (the "
                             "fork's backward does not differentiate its normalized loss)")

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        x, t = bottom[0], bottom[1]
        n = x.shape[0]
        extra = n * (t.count_range(2) if t.num_axes > 2 else 1)
        if (x.num_axes < 2 or t.num_axes < 2 or t.shape[0] != n
                or t.shape[1] != x.shape[1] + 1 or x.count + extra != t.count):
            fit = (n, x.shape[1] + 1) + tuple(x.shape[2:])
            raise self.needs("the labels must be the predictions' shape with one more channel "
                             "(the use flag): %s for %s, got %s" % (fit, x.shape, t.shape),
                             [(1, fit, None)])

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        t = bottom[1].data.reshape(n, -1).astype(np.float64)
        d = x.shape[1]
        self.used = t[:, d] == 1
        self.diff = np.where(self.used[:, None], x - t[:, :d], 0.0)
        self.k = int(self.used.sum())
        total = np.sum(self.diff * self.diff)
        top[0].data[...] = total / self.k / 2.0 if self.k else 0.0

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        scale = float(top[0].diff.reshape(())) / self.k if self.k else 0.0
        if propagate_down[0]:
            bottom[0].diff[...] = (scale * self.diff).reshape(bottom[0].shape)
        if propagate_down[1]:
            g = np.zeros((n, bottom[1].count // n))
            g[:, :self.diff.shape[1]] = -scale * self.diff
            bottom[1].diff[...] = g.reshape(bottom[1].shape)
