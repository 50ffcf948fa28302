"""DeepLab's domain transform (Chen, Barron, Papandreou, Murphy, Yuille, CVPR 2016):
DomainTransform and DomainTransformForwardOnly, as aharley/segaware's Caffe computes them
(``caffe/src/caffe/layers/domain_transform_layer.cpp``, ``domain_transform_forward_only_layer.cpp``;
the same files in hszhao/PSPNet, Chrisding/seal and the other DeepLab v2 descendants).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("DomainTransform")
class DomainTransformLayer(Layer):
    """Edge-preserving recursive filtering of x along a reference gradient g.

    Per image n, on the top-left (h, w) region (h, w = bottom 2's first two values of image n;
    outside it the top is x and the diffs pass through): for t = 0 .. T-1 (T = ``num_iter``)
      sigma_t = spatial_sigma sqrt(3) 2^(T - t - 1) / sqrt(4^T - 1),
      a = clip(exp(-sqrt(2) / sigma_t (1 + g spatial_sigma / range_sigma)), min_weight, 1),
    and four first-order recursive passes over every channel, each ``y_i += a_i (y_(i-1) - y_i)``
    along its direction with a_i the weight at the later pixel of the two: left to right
    (a at column i), right to left (a at column i + 1), top to bottom (a at row i), bottom to top
    (a at row i + 1).
    Backward (the fork's): the passes transposed in reverse order, giving dx, and
    ``da_i += dy_i (y_(i-1) - y_i)`` summed over channels; dg = sum_t -sqrt(2) / sigma_t
    spatial_sigma / range_sigma a_t da_t (the exponential's derivative, also where the clip holds
    a at min_weight or 1, as the fork). No gradient to bottom 2 (the fork stops with an error).

    prototxt: ``domain_transform_param { num_iter: 3 (> 0) spatial_sigma: 50 (> 0) range_sigma: 5
    (> 0) min_weight: 0 (>= 0) }``. Bottoms: x (N x C x H x W), g (N x 1 x H x W), the input size
    (N x 2 x 1 x 1: height, width, at most H and W). Top: N x C x H x W.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1
    keep_intermediate = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.domain_transform_param
        self.num_iter, self.min_weight = int(p.num_iter), float(p.min_weight)
        self.spatial, self.range = float(p.spatial_sigma), float(p.range_sigma)
        if self.spatial <= 0 or self.range <= 0:
            raise self.error("spatial_sigma and range_sigma must be positive")
        if self.min_weight < 0:
            raise self.error("min_weight must be >= 0 (got %g)" % self.min_weight)
        if self.num_iter <= 0:
            raise self.error("num_iter must be positive (got %d)" % self.num_iter)

    def reshape(self, bottom, top):
        x, g, size = bottom
        if x.num_axes != 4:
            raise self.error("bottom 0 must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        want = (x.shape[0], 1) + tuple(x.shape[2:])
        if tuple(g.shape) != want:
            raise self.needs("the reference gradient must be %s, got %s" % (want, g.shape),
                             [(1, want, None)])
        if size.shape[0] != x.shape[0] or size.count < 2 * x.shape[0]:
            raise self.needs("the input size must be (%d, 2, 1, 1), got %s"
                             % (x.shape[0], size.shape), [(2, (x.shape[0], 2, 1, 1), None)])
        top[0].reshape(x.shape)

    def _sigma(self, t):
        T = self.num_iter
        return self.spatial * np.sqrt(3.0) * 2.0 ** (T - (t + 1.0)) / np.sqrt(4.0 ** T - 1.0)

    def _weight(self, g, t):
        m1, m2 = -np.sqrt(2.0) / self._sigma(t), self.spatial / self.range
        return np.clip(np.exp(m1 * (1.0 + g * m2)), self.min_weight, 1.0), m1 * m2

    def _size(self, bottom, n):
        H, W = bottom[0].shape[2:]
        sz = bottom[2].data[n].ravel()
        h, w = int(sz[0]), int(sz[1])
        if h > H or w > W:
            raise self.error("input size %d x %d of image %d exceeds the map's %d x %d"
                             % (h, w, n, H, W))
        return max(h, 0), max(w, 0)

    def forward_cpu(self, bottom, top):
        x, g = bottom[0].data, bottom[1].data
        self.saved = []
        for n in range(x.shape[0]):
            h, w = self._size(bottom, n)
            y = x[n].astype(np.float64)
            region = y[:, :h, :w]
            saved = []
            for t in range(self.num_iter):
                a, _ = self._weight(g[n, 0, :h, :w].astype(np.float64), t)
                saved.append(_filter(region, a, self.keep_intermediate))
            self.saved.append(saved)
            top[0].data[n] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2]:
            raise self.error("cannot backpropagate to the input size (bottom 2)")
        if not (propagate_down[0] or propagate_down[1]):
            return
        g = bottom[1].data
        for n in range(g.shape[0]):
            h, w = self._size(bottom, n)
            dy = top[0].diff[n].astype(np.float64)
            region = dy[:, :h, :w]
            dg = np.zeros((h, w))
            for t in range(self.num_iter - 1, -1, -1):
                a, mult = self._weight(g[n, 0, :h, :w].astype(np.float64), t)
                da = _filter_backward(region, a, self.saved[n][t])
                dg += mult * da * a
            if propagate_down[0]:
                bottom[0].diff[n] = dy
            if propagate_down[1]:
                bottom[1].diff[n] = 0
                bottom[1].diff[n, 0, :h, :w] = dg


def _filter(y, a, keep):
    """The four forward passes, in place on y (C x h x w); returns the differences
    ``y_(i-1) - y_i`` of each pass (None where not kept)."""
    C, h, w = y.shape
    res = [np.zeros_like(y) for _ in range(4)] if keep else [None] * 4
    for i in range(1, w):                                   # left to right
        d = y[:, :, i - 1] - y[:, :, i]
        y[:, :, i] += a[:, i] * d
        if keep:
            res[0][:, :, i] = d
    for i in range(w - 2, -1, -1):                          # right to left
        d = y[:, :, i + 1] - y[:, :, i]
        y[:, :, i] += a[:, i + 1] * d
        if keep:
            res[1][:, :, i] = d
    for i in range(1, h):                                   # top to bottom
        d = y[:, i - 1] - y[:, i]
        y[:, i] += a[i] * d
        if keep:
            res[2][:, i] = d
    for i in range(h - 2, -1, -1):                          # bottom to top
        d = y[:, i + 1] - y[:, i]
        y[:, i] += a[i + 1] * d
        if keep:
            res[3][:, i] = d
    return res


def _filter_backward(dy, a, res):
    """The passes transposed, last first, in place on dy (C x h x w); returns d a (h x w)."""
    C, h, w = dy.shape
    da = np.zeros((h, w))
    for i in range(h - 1):                                  # bottom to top
        da[i + 1] += np.sum(dy[:, i] * res[3][:, i], axis=0)
        dy[:, i + 1] += a[i + 1] * dy[:, i]
        dy[:, i] *= 1 - a[i + 1]
    for i in range(h - 1, 0, -1):                           # top to bottom
        da[i] += np.sum(dy[:, i] * res[2][:, i], axis=0)
        dy[:, i - 1] += a[i] * dy[:, i]
        dy[:, i] *= 1 - a[i]
    for i in range(w - 1):                                  # right to left
        da[:, i + 1] += np.sum(dy[:, :, i] * res[1][:, :, i], axis=0)
        dy[:, :, i + 1] += a[:, i + 1] * dy[:, :, i]
        dy[:, :, i] *= 1 - a[:, i + 1]
    for i in range(w - 1, 0, -1):                           # left to right
        da[:, i] += np.sum(dy[:, :, i] * res[0][:, :, i], axis=0)
        dy[:, :, i - 1] += a[:, i] * dy[:, :, i]
        dy[:, :, i] *= 1 - a[:, i]
    return da


@register_layer("DomainTransformForwardOnly")
class DomainTransformForwardOnlyLayer(DomainTransformLayer):
    """DomainTransform's forward (same fields, bottoms and top) without its backward: the fork's
    Backward_cpu is commented out entirely, so no diff is written to any bottom; so here."""
    type = "DomainTransformForwardOnly"
    keep_intermediate = False

    def backward_cpu(self, top, propagate_down, bottom):
        """Nothing, as the fork's empty Backward_cpu."""
