"""The Winograd convolution layers of Swas99/caffe (a fork of the sparse-Winograd Caffe of Jongsoo
Park / wenwei202): ``Winograd``, whose weights live and are trained in the Winograd domain
(src/caffe/layers/winograd_layer.cpp, include/caffe/util/winograd.hpp), and ``Winograd2x2Trans`` /
``Winograd2x2Conv`` of an earlier tree of the fork (wino_2x2_trans.cpp / wino_2x2_conv.cpp,
base_wino_2x2.cpp, registered in its layer_factory.cpp): plain convolutions computed through
F(4x4, 3x3) for 3 x 3 kernels.
"""
import numpy as np

from ...blob.core import ShapeBlob
from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.conv_base import _ConvolutionBase

# F(4x4, k x k) transforms of the fork (winograd.hpp's WinogradParameters<3>, <5>): a tile of
# M = k + 3 inputs gives 4 outputs; V = B^T d B, W' = G g G^T, Y = A^T (W' . V) A.
_F43 = dict(
    G=[[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
       [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
    A=[[1, 0, 0, 0], [1, 1, 1, 1], [1, -1, 1, -1], [1, 2, 4, 8], [1, -2, 4, -8], [0, 0, 0, 1]],
    B=[[4, 0, 0, 0, 0, 0], [0, -4, 4, -2, 2, 4], [-5, -4, -4, -1, -1, 0],
       [0, 1, -1, 2, -2, -5], [1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 1]])
_F45 = dict(
    G=[[1, 0, 0, 0, 0], [-2 / 9, -2 / 9, -2 / 9, -2 / 9, -2 / 9],
       [-2 / 9, 2 / 9, -2 / 9, 2 / 9, -2 / 9], [1 / 90, 1 / 45, 2 / 45, 4 / 45, 8 / 45],
       [1 / 90, -1 / 45, 2 / 45, -4 / 45, 8 / 45], [4 / 45, 2 / 45, 1 / 45, 1 / 90, 1 / 180],
       [4 / 45, -2 / 45, 1 / 45, -1 / 90, 1 / 180], [0, 0, 0, 0, 1]],
    A=[[1, 0, 0, 0], [1, 1, 1, 1], [1, -1, 1, -1], [1, 2, 4, 8], [1, -2, 4, -8], [8, 4, 2, 1],
       [8, -4, 2, -1], [0, 0, 0, 1]],
    B=[[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, -1, 1 / 2, -1 / 2, 2, -2, -1],
       [-21 / 4, 1, 1, 1 / 4, 1 / 4, 4, 4, 0], [0, -17 / 4, 17 / 4, -5 / 2, 5 / 2, -5 / 2, 5 / 2, 21 / 4],
       [21 / 4, -17 / 4, -17 / 4, -5 / 4, -5 / 4, -5, -5, 0], [0, 1, -1, 2, -2, 1 / 2, -1 / 2, -21 / 4],
       [-1, 1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0, 1]])
TRANSFORMS = {k: {name: np.array(m, dtype=np.float64) for name, m in t.items()}
              for k, t in ((3, _F43), (5, _F45))}


def to_winograd_domain(g, kernel):
    """W'[i, j, o, c] = (G g[o, c] G^T)[i, j]: spatial weights (O, C, k, k) -> (M, M, O, C)."""
    G = TRANSFORMS[kernel]["G"]
    return np.einsum("ia,ocab,jb->ijoc", G, g, G)


@register_layer("Winograd")
class WinogradLayer(_ConvolutionBase):
    """A 2-d convolution computed by F(4x4, k x k) Winograd tiles, its weights kept in the
    Winograd domain (k = 3: tiles of M = 6; k = 5: M = 8; the fork's matrices):

        d    = the M x M input tile at rows / columns 4 t - pad + [0, M) (zero outside)
        V    = B^T d B,   U[o] = sum_c W'[:, :, o, c] . V[c]  (element-wise, per group)
        Y[o] = A^T U[o] A  (the 4 x 4 outputs of the tile; + bias[o])

    With W' = G g G^T for spatial weights g (how the weight filler's draw is transformed, and how a
    spatial weight blob given with the layer is read) this is Caffe's convolution of g; trained
    in the Winograd domain, W' is free (the fork prunes it there). Gradients: dU = A dY A^T,
    dW' += sum_tiles dU . V, dV = sum_o W' . dU, dd = B dV B^T added back over the tiles.

    prototxt: ``convolution_param`` (num_output, kernel_size 3 or 5 square, pad, group, bias_term,
    weight_filler, bias_filler; stride and dilation 1, as the fork requires). Blobs: weight
    (M, M, num_output, channels / group), bias (num_output,). Bottom N x C x H x W; top N x
    num_output x (H + 2 pad - k + 1) x (W + 2 pad - k + 1). The fork's double-precision backward
    is NOT_IMPLEMENTED; here both precisions run it.
    """
    type = "Winograd"

    def compute_output_shape(self, spatial):
        return tuple(s + 2 * p - k + 1 for s, p, k in zip(spatial, self.pad, self.kernel))

    def layer_setup(self, bottom, top):
        given, self.blobs = self.blobs, []
        super().layer_setup(bottom, top)        # geometry; declares the spatial weight shape
        k = self.kernel
        if self.num_spatial != 2 or k[0] != k[1] or k[0] not in TRANSFORMS:
            raise self.error("needs a square 3 x 3 or 5 x 5 kernel over 2 spatial axes, got %s"
                             % (k,))
        if any(s != 1 for s in self.stride) or any(d != 1 for d in self.dilation):
            raise self.error("stride and dilation must be 1 (got %s, %s)"
                             % (self.stride, self.dilation))
        self.k, self.M = k[0], k[0] + 3
        self.spatial_shape = self.blobs[0].shape
        wshape = (self.M, self.M, self.spatial_shape[0], self.spatial_shape[1])
        if not given:
            self.blobs[0] = ShapeBlob(wshape, dtype=self.dtype)
            return
        self.__dict__.pop("_declared_fillers", None)
        if len(given) != len(self.blobs):
            raise self.error("expected %d parameter blobs, got %d" % (len(self.blobs), len(given)))
        if given[0].shape == self.spatial_shape:      # spatial weights: the fork's WeightAlign
            w = self.new_blob(wshape)
            w.data[...] = to_winograd_domain(given[0].data, self.k)
            given[0] = w
        self.check_shape("parameter blob 0", wshape, given[0].shape)
        if self.bias_term:
            self.check_shape("parameter blob 1", (self.num_output,), given[1].shape)
        self.blobs = given

    def fill_weights(self, blob, filler):
        spatial = self.new_blob(self.spatial_shape)
        filler.fill(spatial)
        blob.data[...] = to_winograd_domain(spatial.data, self.k)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        (h, w), (oh, ow), (ph, pw), m = self.in_spatial, self.out_spatial, self.pad, self.M
        self.tiles = tuple((max(s + p - m + 1, o) + 3) // 4 for s, p, o in
                           ((h, ph, oh), (w, pw, ow)))

    def _weights(self):
        """W' as (M, M, G, O / G, C / G)."""
        g = self.group
        w = self.blobs[0].data
        return w.reshape(self.M, self.M, g, w.shape[2] // g, w.shape[3])

    def _input_tiles(self, x):
        """V (N, G, C / G, tiles_h, tiles_w, M, M) of x (N, C, H, W)."""
        n, c, h, w = x.shape
        (ph, pw), (th, tw), m = self.pad, self.tiles, self.M
        rows, cols = 4 * th + m - 4, 4 * tw + m - 4
        p = np.zeros((n, c, rows, cols), dtype=x.dtype)
        hh, ww = min(h, rows - ph), min(w, cols - pw)
        p[:, :, ph:ph + hh, pw:pw + ww] = x[:, :, :hh, :ww]
        d = np.lib.stride_tricks.sliding_window_view(p, (m, m), axis=(2, 3))[:, :, ::4, ::4]
        B = TRANSFORMS[self.k]["B"]
        v = np.einsum("ai,ncxyab,bj->ncxyij", B, d, B, optimize=True)
        return v.reshape((n, self.group, c // self.group) + v.shape[2:])

    def forward_cpu(self, bottom, top):
        A = TRANSFORMS[self.k]["A"]
        (th, tw), (oh, ow) = self.tiles, self.out_spatial
        wt = self._weights()
        for b, t in zip(bottom, top):
            x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
            u = np.einsum("ijgoc,ngcxyij->ngoxyij", wt, self._input_tiles(x), optimize=True)
            y = np.einsum("ip,ngoxyij,jq->ngoxpyq", A, u, A, optimize=True)
            y = y.reshape(self.outer, self.num_output, 4 * th, 4 * tw)[:, :, :oh, :ow]
            out = t.data.reshape(self.outer, self.num_output, oh, ow)
            out[...] = y
            self._add_bias(out)

    def backward_cpu(self, top, propagate_down, bottom):
        A, B = TRANSFORMS[self.k]["A"], TRANSFORMS[self.k]["B"]
        (th, tw), (oh, ow), (ph, pw), m = self.tiles, self.out_spatial, self.pad, self.M
        g, og = self.group, self.num_output // self.group
        wt = self._weights()
        for b, t, down in zip(bottom, top, propagate_down):
            dy = t.diff.reshape(self.outer, self.num_output, oh, ow)
            self._bias_grad(dy)
            if not (down or self.param_propagate_down[0]):
                continue
            dyp = np.zeros((self.outer, self.num_output, 4 * th, 4 * tw), dtype=dy.dtype)
            dyp[:, :, :oh, :ow] = dy
            dyt = dyp.reshape(self.outer, g, og, th, 4, tw, 4)
            du = np.einsum("ip,ngoxpyq,jq->ngoxyij", A, dyt, A, optimize=True)
            x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
            if self.param_propagate_down[0]:
                dw = np.einsum("ngoxyij,ngcxyij->ijgoc", du, self._input_tiles(x), optimize=True)
                self.blobs[0].diff += dw.reshape(self.blobs[0].shape)
            if not down:
                continue
            dv = np.einsum("ijgoc,ngoxyij->ngcxyij", wt, du, optimize=True)
            dd = np.einsum("ai,ngcxyij,bj->ngcxyab", B, dv, B, optimize=True)
            dd = dd.reshape((self.outer, self.channels, th, tw, m, m))
            dp = np.zeros((self.outer, self.channels, 4 * th + m - 4, 4 * tw + m - 4), dy.dtype)
            for a in range(m):
                for c in range(m):
                    dp[:, :, a:a + 4 * th:4, c:c + 4 * tw:4] += dd[..., a, c]
            h, w = self.in_spatial
            dx = b.diff.reshape(x.shape)
            dx[...] = 0
            hh, ww = min(h, dp.shape[2] - ph), min(w, dp.shape[3] - pw)
            dx[:, :, :hh, :ww] = dp[:, :, ph:ph + hh, pw:pw + ww]


class _Winograd2x2Layer(ConvolutionLayer):
    """Swas99/caffe's Winograd2x2Trans / Winograd2x2Conv (one class there, BaseWinograd2x2Layer,
    under two names): Caffe's convolution, y = W * x + b, with its im2col + GEMM forward for
    kernels below 3 and F(4x4, 3x3) Winograd tiles for a 3 x 3 kernel (winograd_4_4_3_3: the
    same convolution up to rounding); backward is the GEMM convolution's. The fork's Winograd
    path takes a 2-d 3 x 3 kernel only, at stride 1 without groups (LOG(FATAL) otherwise; it
    ignores stride and dilation), so those are refused here too.

    prototxt: ``convolution_param`` as Convolution's. Blobs: weight (num_output, C / group, kh,
    kw), bias (num_output,).
    """

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        if self.kernel[0] >= 3:
            if self.num_spatial != 2 or self.kernel != (3, 3):
                raise self.error("kernel size must be 3 x 3 (or below 3), got %s" % (self.kernel,))
            if self.group != 1 or any(s != 1 for s in self.stride) or \
                    any(d != 1 for d in self.dilation):
                raise self.error("the 3 x 3 Winograd path takes group 1, stride 1, dilation 1")
            if max(self.pad) > 4:
                raise self.error("padding must be at most 4, got %s" % (self.pad,))


@register_layer("Winograd2x2Trans")
class Winograd2x2TransLayer(_Winograd2x2Layer):
    __doc__ = _Winograd2x2Layer.__doc__
    type = "Winograd2x2Trans"


@register_layer("Winograd2x2Conv")
class Winograd2x2ConvLayer(_Winograd2x2Layer):
    __doc__ = _Winograd2x2Layer.__doc__
    type = "Winograd2x2Conv"
