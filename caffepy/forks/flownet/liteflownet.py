"""LiteFlowNet's Warp, Grid, NegSquare and ExpMax (twhui/LiteFlowNet, src/caffe/layers/
warp_layer.cpp / .cu, grid_layer.cpp, negsquare_layer.cpp / .cu, expmax_layer.cpp / .cu).

Not FlowNet 2's FlowWarp: Warp samples at absolute coordinates (LiteFlowNet adds a Grid to the
flow before it), and drops each bilinear tap that falls outside the image on its own instead of
zeroing the whole pixel.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, NeuronLayer, fork_param, register_layer
from ...layers.neuron import ElementwiseLayer


@register_layer("Warp")
class WarpLayer(Layer):
    """Bilinear sampling of an image at given coordinates (LiteFlowNet's Warp).

    For each output pixel, (x, y) = (coords[n, 0, h, w], coords[n, 1, h, w]), x0 = floor(x),
    y0 = floor(y), a = x - x0, b = y - y0:

        out = (1-a)(1-b) I[y0, x0] + (1-a) b I[y0+1, x0] + a (1-b) I[y0, x0+1] + a b I[y0+1, x0+1]

    where a tap outside [0, W) x [0, H) contributes 0. Backward: the bilinear weights scattered to
    the image; to the coordinates d out / dx = -(1-b) I00 - b I01 + (1-b) I10 + b I11 (and the same
    for y), summed over channels (the fork's formulas, with the dropped taps as 0).
    No parameters. Bottoms: image (N, C, H, W), coords (N, 2, H, W) (x then y, in pixels).
    Top: (N, C, H, W).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        img, xy = bottom[0].shape, bottom[1].shape
        if len(img) != 4 or xy != (img[0], 2) + tuple(img[2:]):
            raise self.error("image %s and coords %s: the coords must be N x 2 x H x W of the "
                             "image" % (img, xy), ShapeError)
        top[0].reshape(img)

    def _taps(self, coords, H, W):
        x, y = coords[:, 0].astype(np.float64), coords[:, 1].astype(np.float64)
        x0, y0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
        a, b = x - x0, y - y0
        taps = []
        for dx_, dy_, w, gx, gy in ((0, 0, (1 - a) * (1 - b), -(1 - b), -(1 - a)),
                                    (0, 1, (1 - a) * b, -b, 1 - a),
                                    (1, 0, a * (1 - b), 1 - b, -a),
                                    (1, 1, a * b, b, a)):
            xx, yy = x0 + dx_, y0 + dy_
            ok = (xx >= 0) & (xx < W) & (yy >= 0) & (yy < H)
            taps.append((np.where(ok, yy, 0), np.where(ok, xx, 0), ok, w, gx, gy))
        return taps

    @staticmethod
    def _gather(img, yy, xx, ok):
        n = np.arange(img.shape[0])[:, None, None]
        v = img[n, :, yy, xx].transpose(0, 3, 1, 2)          # (N, C, H, W)
        return np.where(ok[:, None], v, 0)

    def forward_cpu(self, bottom, top):
        img = bottom[0].data
        N, C, H, W = img.shape
        out = np.zeros(img.shape)
        for yy, xx, ok, w, _, _ in self._taps(bottom[1].data, H, W):
            out += w[:, None] * self._gather(img, yy, xx, ok)
        top[0].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        img, dy = bottom[0].data, top[0].diff
        N, C, H, W = img.shape
        taps = self._taps(bottom[1].data, H, W)
        if propagate_down[0]:
            gi = np.zeros(img.shape)
            n = np.arange(N)[:, None, None]
            for yy, xx, ok, w, _, _ in taps:
                contrib = np.where(ok[:, None], w[:, None] * dy, 0).transpose(0, 2, 3, 1)
                np.add.at(gi.transpose(0, 2, 3, 1), (n, yy, xx), contrib)
            bottom[0].diff[...] = gi
        if propagate_down[1]:
            gxy = np.zeros(bottom[1].shape)
            for yy, xx, ok, _, gx, gy in taps:
                v = self._gather(img, yy, xx, ok) * dy
                gxy[:, 0] += gx * v.sum(axis=1)
                gxy[:, 1] += gy * v.sum(axis=1)
            bottom[1].diff[...] = gxy


@register_layer("Grid")
class GridLayer(Layer):
    """The pixel coordinates of the bottom's H x W grid (LiteFlowNet's Grid,
    src/caffe/layers/grid_layer.cpp): added to a flow, they give the absolute sampling positions
    Warp reads.

    y[n, 0, h, w] = w, y[n, 1, h, w] = h (x then y, in pixels); the bottom gives only its shape.
    prototxt: no parameters (``type: "Grid"``, one bottom, one top; LiteFlowNet sets
    ``propagate_down: false``). The fork's schema declares ``grid_param { height width batch }``,
    which its layer never reads. Bottom (N, C, H, W) -> top (N, 2, H, W).
    No backward (the fork refuses one).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        shape = tuple(bottom[0].shape)
        if len(shape) != 4 or shape[2] < 1 or shape[3] < 1:
            raise self.error("the bottom must be N x C x H x W with H, W > 0, got %s" % (shape,),
                             ShapeError)
        top[0].reshape((shape[0], 2) + shape[2:])

    def forward_cpu(self, bottom, top):
        N, _, H, W = top[0].shape
        y = top[0].data
        y[:, 0] = np.arange(W)[None, None, :]
        y[:, 1] = np.arange(H)[None, :, None]


@register_layer("NegSquare")
class NegSquareLayer(ElementwiseLayer):
    """The negated square, element-wise (LiteFlowNet's NegSquare): y = -x^2.

    LiteFlowNet feeds it feature distances before ExpMax, to build the exp(-d^2) kernels of its
    flow regularization. Backward: dL/dx = dL/dy * (-2 x). (The fork's CPU pass aborts, and its
    GPU backward multiplies the top diff by the negated previous bottom diff instead of by -2 x;
    here the derivative of the forward is used.)
    prototxt: no parameters (``type: "NegSquare"``; the fork's ``negsquare_param {}`` has no
    fields). Bottom any shape -> top the same shape (in place allowed).
    """

    def f(self, x):
        return -(x * x)

    def df(self, x, y):
        return -2.0 * x


@register_layer("ExpMax")
class ExpMaxLayer(NeuronLayer):
    """LiteFlowNet's ExpMax (also adamtwig/segpred's): the exponential of a softmax numerator,

        y = base^shift * base^(scale (x - m)),   m[s] = max_c x[0, c, s]

    (base -1: e). The max over channels is taken for the first item only, at each of its
    H x W positions: the fork's GPU kernel runs with an outer count of 1, and the other items'
    entries of its max buffer are never written (0 as allocated), so nothing is subtracted
    from them. The fork's Forward_cpu stops (not implemented); this is its GPU path.
    Backward as the fork: dL/dx = dL/dy y ln(base) scale, the max held constant (not the
    exact gradient where x is the max). prototxt: ``expmax_param { base: -1 scale: 1
    shift: 0 }``. Bottom N x C x H x W (at most 4 axes); top the same; in place allowed.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "expmax_param")
        base, scale, shift = float(p.base), float(p.scale), float(p.shift)
        if base != -1 and base <= 0:
            raise self.error("base must be strictly positive (or -1 for e), got %g" % base)
        log_base = 1.0 if base == -1 else np.log(base)
        self.inner = log_base * scale
        self.outer = 1.0 if shift == 0 else (np.exp(shift) if base == -1 else base ** shift)

    def reshape(self, bottom, top):
        if bottom[0].num_axes > 4 or bottom[0].num_axes < 2:
            raise self.error("bottom must have 2 to 4 axes (N x C x H x W), got %s"
                             % (bottom[0].shape,), ShapeError)
        super().reshape(bottom, top)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        n, c = x.shape[:2]
        v = x.reshape(n, c, -1).copy()
        v[0] -= v[0].max(axis=0)
        top[0].data[...] = (self.outer * np.exp(self.inner * v)).reshape(x.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].data * top[0].diff * self.inner

