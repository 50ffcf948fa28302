"""FlowNet 2's Correlation1D (lmb-freiburg/flownet2; the DispNet-style horizontal correlation)."""
import numpy as np

from ..errors import ShapeError
from .base import register_layer
from .fork_flow import CorrelationLayer


@register_layer("Correlation1D")
class Correlation1DLayer(CorrelationLayer):
    """Multiplicative correlation along x only (the fork's corr1d kernels).

    Bottoms are zero-padded by ``pad`` in x only. With k = kernel_size, d = max_displacement,
    R = d / stride_2: displacements o stride_2 for o in [-R, R] (``single_direction: 0``),
    [0, R] (1, to the right) or [-(R + 1), -1] (-1, as the fork's x_shift = -(R + 1));
        y[n, t, i, j] = sum_{c, a < k, b < k} f1[n, c, i s1 + a, x0 + b]
                                              f2[n, c, i s1 + a, x0 + o_t stride_2 + b] / (k k C)
    with x0 = j stride_1 + d (padded x). Output W' = ceil((W + 2 pad - 2 (d + (k-1)/2)) / s1),
    H' = ceil((H - (k - 1)) / s1). Backward: the matching sums.

    prototxt: ``correlation_param { pad: 0 kernel_size max_displacement stride_1: 1 stride_2: 1
    single_direction: 0 }`` (SUBTRACT and do_abs are refused). Bottoms f1, f2 (N, C, H, W);
    top (N, number of displacements, H', W').
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.correlation_param
        if p.correlation_type != p.MULTIPLY or p.do_abs:
            raise self.error("only multiplicative correlation is supported (correlation_type "
                             "SUBTRACT and do_abs are not)")
        if not p.HasField("kernel_size") or not p.HasField("max_displacement"):
            raise self.error("correlation_param needs kernel_size and max_displacement")
        if p.kernel_size % 2 == 0 or p.stride_1 < 1 or p.stride_2 < 1:
            raise self.error("kernel_size must be odd and strides >= 1")
        if p.single_direction not in (-1, 0, 1):
            raise self.error("single_direction must be -1, 0 or 1")
        self.k, self.d, self.pad = int(p.kernel_size), int(p.max_displacement), int(p.pad)
        self.s1, self.s2 = int(p.stride_1), int(p.stride_2)
        r = self.d // self.s2
        self.offsets = {0: range(-r, r + 1), 1: range(0, r + 1),
                        -1: range(-(r + 1), 0)}[int(p.single_direction)]
        if -min(self.offsets) * self.s2 > self.d:
            raise self.error("single_direction: -1 reaches %d pixels left, beyond max_displacement "
                             "%d (the fork reads outside its padded input there)"
                             % (-min(self.offsets) * self.s2, self.d))

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape or bottom[0].num_axes != 4:
            raise self.error("bottoms must have equal N x C x H x W shapes, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        N, C, H, W = bottom[0].shape
        kr = (self.k - 1) // 2
        self.out = (-(-(H - 2 * kr) // self.s1),
                    -(-(W + 2 * self.pad - 2 * (self.d + kr)) // self.s1))
        if min(self.out) < 1:
            raise self.error("the neighbourhood and kernel do not fit a %dx%d input" % (H, W),
                             ShapeError)
        top[0].reshape(N, len(self.offsets), self.out[0], self.out[1])

    def _terms(self):
        oh, ow = self.out
        for t, o in enumerate(self.offsets):
            dx = o * self.s2
            for a in range(self.k):
                for b in range(self.k):
                    x0 = self.d + b
                    rows = slice(a, a + (oh - 1) * self.s1 + 1, self.s1)
                    cols = slice(x0, x0 + (ow - 1) * self.s1 + 1, self.s1)
                    cols2 = slice(x0 + dx, x0 + dx + (ow - 1) * self.s1 + 1, self.s1)
                    yield t, rows, cols, rows, cols2

    def _padded(self, a):
        p = self.pad
        return np.pad(a, [(0, 0), (0, 0), (0, 0), (p, p)])

    def backward_cpu(self, top, propagate_down, bottom):
        f1, f2 = self._padded(bottom[0].data), self._padded(bottom[1].data)
        g1, g2 = np.zeros_like(f1), np.zeros_like(f2)
        dy = top[0].diff / (self.k * self.k * bottom[0].shape[1])
        for t, rows, cols, rows2, cols2 in self._terms():
            g = dy[:, t][:, None]
            g1[:, :, rows, cols] += g * f2[:, :, rows2, cols2]
            g2[:, :, rows2, cols2] += g * f1[:, :, rows, cols]
        W, p = bottom[0].shape[3], self.pad
        for i, g in enumerate((g1, g2)):
            if propagate_down[i]:
                bottom[i].diff[...] = g[:, :, :, p:p + W]
