"""WinoConvolution: FredJeong/caffe's convolution through Winograd F(m x m, 3 x 3) tiles, m chosen
by ``convolution_param.wino_tile`` (src/caffe/layers/wino_conv_layer.cpp, .cu,
src/caffe/util/winograd.cu; its examples/cifar10_practice nets).
"""
import numpy as np

from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer
from ...math import cpu

#: The interpolation points of F(m, 3) (the last point, infinity, is implied): 0, +-1, +-2, +-1/2.
POINTS = {2: (0.0, 1.0, -1.0), 4: (0.0, 1.0, -1.0, 2.0, -2.0),
          6: (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)}


def transforms(m, r=3):
    """(A^T, G, B^T) of the Toom-Cook algorithm F(m, r) at :data:`POINTS`: for a tile d of n = m
    + r - 1 inputs and a filter g of r taps, y = A^T [(G g) . (B^T d)] is the correlation
    y[i] = sum_k g[k] d[i + k], i < m. A^T and G come from the points (G scaled by 1 / prod(a_j -
    a_l)); B^T is the one matrix that makes the identity hold, solved for here (exactly
    determined; its entries are eighths, and the residual is checked)."""
    a = np.array(POINTS[m], dtype=np.float64)
    n = m + r - 1
    at = np.zeros((m, n))
    at[:, :-1] = a[None, :] ** np.arange(m)[:, None]
    at[m - 1, n - 1] = 1.0
    g = np.zeros((n, r))
    for j in range(n - 1):
        f = np.prod([a[j] - a[l] for l in range(n - 1) if l != j])
        g[j] = a[j] ** np.arange(r) / f
    g[n - 1, r - 1] = 1.0
    # sum_j AT[i, j] G[j, k] BT[j, l] = [l == i + k]: for each l, a linear system in BT[:, l]
    coef = np.einsum("ij,jk->ikj", at, g).reshape(m * r, n)
    rhs = np.zeros((m * r, n))
    for i in range(m):
        for k in range(r):
            rhs[i * r + k, i + k] = 1.0
    bt, *_ = np.linalg.lstsq(coef, rhs, rcond=None)
    bt = np.round(bt * 8) / 8                  # the entries are eighths; drop lstsq's rounding
    if np.abs(coef @ bt - rhs).max() > 1e-9:
        raise ArithmeticError("no Winograd F(%d, %d) transform at these points" % (m, r))
    return at, g, bt


_TRANSFORMS = {m: transforms(m) for m in POINTS}


@register_layer("WinoConvolution")
class WinoConvolutionLayer(ConvolutionLayer):
    """Caffe's convolution, y = W * x + b, its forward computed in Winograd tiles:

        m = wino_tile % 10 (2, 4 or 6; 12 / 14 / 16 are the fork's "AddOpt" spellings of the same)
        U = G g G^T per (output, input) channel pair, V = B^T d B for each (m + 2) x (m + 2) input
        tile d at rows / columns m t - pad (zero outside),
        Y = A^T (sum_c U[o, c] . V[c]) A: the m x m outputs of the tile (+ bias[o])

    with the F(m, 3) matrices of :func:`transforms`: the same numbers as the direct convolution up
    to float rounding (the transforms of larger tiles round more: F(6, 3)'s entries reach 1/90).
    That is the fork's GPU forward (forward_gpu_wino: padSrc, winoSrc, winoMulti, winoDst,
    trimDst) for 2-d 3 x 3 kernels at stride and dilation 1; its CPU forward is the plain
    im2col + GEMM convolution, which is what other geometries get here. Backward is the fork's
    Backward_cpu, the convolution's gradients (dW += dY col^T, db += sum dY, dx = col2im(W^T dY));
    its GPU backward leaves the weight gradient empty (weight_gpu_wino has no body) and
    computes the weight transform only at the first two Reshapes, GPU quirks not reproduced.

    prototxt: ``convolution_param`` as Convolution's, plus ``wino_tile`` (default 2) and
    ``wino_zero_idx``, which the fork stores (wino_conv_layer.cpp LayerSetUp, wino_zero_idx_) and
    never reads: it changes nothing. Groups are computed per group. Blobs: weight (num_output,
    C / group, kh, kw), bias (num_output,) -- the weights stay spatial, as the fork keeps them.
    """
    type = "WinoConvolution"

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        tile = int(self.layer_param.convolution_param.wino_tile)
        self.tile = tile % 10
        if self.tile not in _TRANSFORMS:
            raise self.error("wino_tile %% 10 must be 2, 4 or 6 (the fork's tile sizes), got %d"
                             % tile)

    def _winograd(self):
        return (self.num_spatial == 2 and self.kernel == (3, 3) and self.stride == (1, 1)
                and self.dilation == (1, 1))

    def forward_cpu(self, bottom, top):
        if not self._winograd():
            return super().forward_cpu(bottom, top)
        m = self.tile
        at, gm, bt = (t.astype(self.dtype) for t in _TRANSFORMS[m])
        (oh, ow), (ph, pw), g = self.out_spatial, self.pad, self.group
        th, tw = -(-oh // m), -(-ow // m)
        w = self.blobs[0].data
        og, cg = w.shape[0] // g, w.shape[1]
        u = np.einsum("ia,ocab,jb->ocij", gm, w, gm).reshape(g, og, cg, m + 2, m + 2)
        for i, (b, t) in enumerate(zip(bottom, top)):
            self._cols.pop(i, None)
            n = self.outer
            x = b.data.reshape((n, self.channels) + tuple(self.in_spatial))
            h, wd = x.shape[2:]
            p = np.zeros((n, self.channels, th * m + 2, tw * m + 2), dtype=self.dtype)
            hh, ww = min(h, p.shape[2] - ph), min(wd, p.shape[3] - pw)
            p[:, :, ph:ph + hh, pw:pw + ww] = x[:, :, :hh, :ww]
            d = np.lib.stride_tricks.sliding_window_view(p, (m + 2, m + 2), axis=(2, 3))
            d = d[:, :, ::m, ::m]                                   # (N, C, th, tw, n, n)
            v = np.einsum("ia,ncxyab,jb->ncxyij", bt, d, bt, optimize=True)
            v = v.reshape((n, g, cg) + v.shape[2:])
            mm = np.einsum("gocij,ngcxyij->ngoxyij", u, v, optimize=True)
            y = np.einsum("pi,ngoxyij,qj->ngoxpyq", at, mm, at, optimize=True)
            y = y.reshape(n, self.num_output, th * m, tw * m)[:, :, :oh, :ow]
            out = t.data.reshape(n, self.num_output, oh, ow)
            out[...] = y
            self._add_bias(out)
            cpu.relu_inplace(out, self.fused_relu)
