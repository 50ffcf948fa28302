"""Training's 3x3 convolutions by Winograd F(2x2, 3x3) (caffepy.math._numba_winograd): forward,
weight gradient and data gradient each as 16 GEMMs between cheap tile transforms, 2.25x fewer
multiply-adds than the direct sum.

Taken (before oneDNN and im2col + GEMM) by a float32 Convolution in a net that runs its weight
gradient (``keep_columns``: a TRAIN net; TEST and deploy nets keep the exact path's GEMM),
numba on, 2-d, group 1, kernel 3x3, stride 1, dilation 1, any padding, channel axis 1, an output
plane of at least ``MIN_PLANE`` positions, at least ``MIN_CHANNELS`` input channels and
``MIN_CHANNEL_PRODUCT`` input channels x outputs (below, the edge tiles and the transforms cost
more than the smaller GEMMs save), unless ``CAFFEPY_WINOGRAD=0``.
BVLC Caffe's cuDNN builds likewise let cuDNN pick each convolution's algorithm, Winograd among
them. The values are within float32 rounding of the direct sum, not its bits: the top, data
gradient and weight gradient differ from oneDNN's direct kernels by 0.4-2e-6 of their largest
value (tests/layers/test_conv_winograd.py, 64-256 channels), where oneDNN's and Caffe's own
orders of summation already differ from each other in the last places. The bias gradient is
the layer's float64 sum (``_bias_grad``), as on every path.

A batch is split into groups of images whose transformed input and GEMM product fit in
``CHUNK`` elements; the buffers are the net's shared workspace (``layer._scratch``).
"""
import os

import numpy as np

from ..math import kernels

# Below these sizes the transforms and the edge tiles cost more than the GEMMs save. A layer's
# forward + backward at batch 8, 2 threads, Winograd / oneDNN 3.2's direct kernels (2026-12-02,
# the AVX2 machine of BENCHMARKS.md, median of 4 alternated rounds): 64 -> 192 at 56 x 56 0.68,
# 96 -> 128 at 28 0.79, 128 -> 192 at 28 0.66, 96 -> 208 at 14 0.89, 160 -> 320 at 14 0.80,
# 128 -> 128 at 28 0.90, 256 -> 256 at 14 0.75; 64 -> 64 at 56 0.86-1.06, 64 -> 128 at 28
# 0.94-1.10, 32 -> 64 at 28 1.5-2.7, 32 -> 32 at 16 1.7, 16 -> 16 at 28 1.4; at batch 16,
# 256 -> 384 at 13 x 13 (CaffeNet's conv3) 0.73, 128 -> 128 at 13 0.91; at 7 x 7 (4 tiles
# for 7 positions a side) 512 -> 512 1.05, 192 -> 384 1.12.
MIN_PLANE = 13 * 13
MIN_CHANNELS = 64
MIN_CHANNEL_PRODUCT = 96 * 128       # input channels x outputs
CHUNK = 1 << 23          # elements of V + M per group of images (32 MiB in float32)
ENV = "CAFFEPY_WINOGRAD"


def eligible(layer):
    """Whether ``layer``'s current shape trains through the Winograd kernels (module doc)."""
    if (os.environ.get(ENV, "1") == "0" or not layer.keep_columns or layer.dtype != np.float32
            or kernels.get() is None or layer.num_spatial != 2 or layer.axis != 1
            or layer.group != 1 or tuple(layer.kernel) != (3, 3)
            or tuple(layer.stride) != (1, 1) or tuple(layer.dilation) != (1, 1)
            or getattr(layer, "fused_relu", None) is not None
            or getattr(layer, "shape_offset", None) or getattr(layer, "reverse", False)):
        return False
    oh, ow = layer.out_spatial
    if layer.blobs[0].shape != (layer.num_output, layer.channels, 3, 3):
        return False
    return (oh * ow >= MIN_PLANE and layer.channels >= MIN_CHANNELS
            and layer.channels * layer.num_output >= MIN_CHANNEL_PRODUCT)


def _tiles(layer):
    oh, ow = layer.out_spatial
    return (oh + 1) // 2, (ow + 1) // 2


def _groups(layer):
    """[lo, hi) image ranges of at most CHUNK elements of V + M each."""
    th, tw = _tiles(layer)
    per_image = 16 * (layer.channels + layer.num_output) * th * tw
    k = max(1, min(layer.outer, CHUNK // per_image))
    return [(lo, min(layer.outer, lo + k)) for lo in range(0, layer.outer, k)]


def _buffers(layer, lo, hi):
    th, tw = _tiles(layer)
    t = (hi - lo) * th * tw
    return (layer._scratch("wino_v", (16, layer.channels, t)),
            layer._scratch("wino_m", (16, layer.num_output, t)))


def _weights(layer, k):
    w = layer.blobs[0].data
    u = layer._scratch("wino_u", (16, w.shape[0], w.shape[1]))
    k.wino_weights(w, u)
    return u


def _views(layer, x, y):
    return (x.reshape((layer.outer, layer.channels) + tuple(layer.in_spatial)),
            y.reshape((layer.outer, layer.num_output) + tuple(layer.out_spatial)))


def forward(layer, bottom, top):
    """y = conv(x, W) + b by Winograd; False where the layer is not eligible."""
    if not eligible(layer) or not kernels.contiguous(
            layer.blobs[0].data, *(b.data for b in bottom), *(t.data for t in top)):
        return False
    from ..math import _numba_winograd as k
    th, tw = _tiles(layer)
    ph, pw = layer.pad
    u = _weights(layer, k)
    bias = layer.blobs[1].data if layer.bias_term else np.empty(0, np.float32)
    for b, t in zip(bottom, top):
        x, y = _views(layer, b.data, t.data)
        for lo, hi in _groups(layer):
            v, m = _buffers(layer, lo, hi)
            k.wino_input(x[lo:hi], ph, pw, th, tw, v)
            np.matmul(u, v, out=m)
            k.wino_output(m, th, tw, bias, np.float32(0), False, y[lo:hi])
    return True


def backward(layer, top, propagate_down, bottom):
    """Adds dW (and db) to the parameter diffs and overwrites dx by Winograd; False where the
    layer is not eligible."""
    if not eligible(layer) or not kernels.contiguous(
            layer.blobs[0].data, layer.blobs[0].diff, *(t.diff for t in top),
            *(b.data for b in bottom), *(b.diff for b in bottom)):
        return False
    from ..math import _numba_winograd as k
    th, tw = _tiles(layer)
    ph, pw = layer.pad
    want_w = layer.param_propagate_down[0]
    want_b = layer.bias_term and layer.param_propagate_down[1]
    u = _weights(layer, k) if any(propagate_down) else None
    du = layer._scratch("wino_du", (16, layer.num_output, layer.channels)) if want_w else None
    part = layer._scratch("wino_dup", du.shape) if want_w else None
    if want_w:
        du[...] = 0
    for b, t, down in zip(bottom, top, propagate_down):
        x, dy = _views(layer, b.data, t.diff)
        if want_b:
            layer._bias_grad(dy.reshape(layer.outer, layer.num_output, -1))
        if not (want_w or down):
            continue
        dx = b.diff.reshape(x.shape) if down else None
        for lo, hi in _groups(layer):
            v, m = _buffers(layer, lo, hi)
            k.wino_dy(dy[lo:hi], th, tw, m)
            if want_w:
                k.wino_input(x[lo:hi], ph, pw, th, tw, v)
                np.matmul(m, v.transpose(0, 2, 1), out=part)
                du += part
            if down:
                np.matmul(u.transpose(0, 2, 1), m, out=v)
                k.wino_dx(v, th, tw, ph, pw, dx[lo:hi])
    if want_w:
        k.wino_dw(du, layer.blobs[0].diff)
    return True
