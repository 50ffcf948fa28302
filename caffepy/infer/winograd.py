"""Winograd F(2x2, 3x3) convolutions of inference mode (caffepy.infer.steps).

A 3x3 / stride 1 / dilation 1 convolution computes each 2x2 output tile from a 4x4 input
patch ``d`` as ``Y = A^T [(G g G^T) . (B^T d B)] A`` (Lavin & Gray, "Fast Algorithms for
Convolutional Neural Networks", 2016; the matrices are in caffepy.infer.kernels): 16
multiplications per tile and input channel instead of 36, and the sums over input channels
are 16 GEMMs ``M_k = U_k V_k`` (U_k: M x C filters transformed once, V_k: C x tiles). Compared
with im2col + one GEMM it does 2.25x fewer multiply-adds and writes a 4x (not 9x) copy of the
input. The transforms only add, subtract and halve, so the result stays within float32
rounding of the direct sum (about 1e-6 relative; tests/infer/test_parts.py).

Used when the output plane has at least ``MIN_PLANE`` pixels and the layer at least
``MIN_CHANNELS`` input channels (below that the tiles at the edge and the weight transform
cost more than they save), on groups of images whose transformed input and GEMM result fit
in ``CHUNK`` elements. The transformed filters (16/9 of the layer's 3x3 weights) are kept per
compiled plan.
"""
import numpy as np

MIN_PLANE = 14 * 14
MIN_CHANNELS = 16
CHUNK = 1 << 21          # elements of V + M per group of images (8 MiB in float32)


def eligible(layer, x_shape):
    oh, ow = layer.out_spatial
    return (layer.group == 1 and layer.kernel == (3, 3) and layer.stride == (1, 1)
            and layer.dilation == (1, 1)
            and oh * ow >= MIN_PLANE and x_shape[1] >= MIN_CHANNELS)


def _tiles(layer):
    oh, ow = layer.out_spatial
    return (oh + 1) // 2, (ow + 1) // 2


def _chunk(layer, n, c):
    th, tw = _tiles(layer)
    per_image = 16 * (c + layer.num_output) * th * tw
    return max(1, min(n, CHUNK // per_image))


def buffers(layer, x_shape):
    """(V elements, M elements) of the scratch buffers for a batch of x_shape."""
    n, c = x_shape[0], x_shape[1]
    th, tw = _tiles(layer)
    t = _chunk(layer, n, c) * th * tw
    return 16 * c * t, 16 * layer.num_output * t


def weights(plan, layer):
    """U (16, M, C) of ``layer``, transformed once per compiled plan."""
    from . import kernels as ik
    cache = plan.__dict__.setdefault("wino", {})
    u = cache.get(id(layer))
    if u is None:
        w = layer.blobs[0].data
        u = cache[id(layer)] = np.empty((16,) + w.shape[:2], w.dtype)
        ik.wino_weights(w, u)
    return u


def step(layer, u, x, out, bias, slope, relu, scratch):
    """The closure from x (N, C, H, W) into out (N, M, OH * OW) (a view, maybe strided)."""
    from . import kernels as ik
    n, c = x.shape[0], x.shape[1]
    m = layer.num_output
    oh, ow = layer.out_spatial
    th, tw = _tiles(layer)
    ph, pw = layer.pad
    out4 = out.reshape(n, m, oh, ow)
    assert np.shares_memory(out4, out)
    k = _chunk(layer, n, c)
    groups = []
    for lo in range(0, n, k):
        hi = min(n, lo + k)
        t = (hi - lo) * th * tw
        v = scratch.col[:16 * c * t].reshape(16, c, t)
        res = scratch.res[:16 * m * t].reshape(16, m, t)
        groups.append((x[lo:hi], v, res, out4[lo:hi]))
    tin, tout, matmul = ik.wino_input, ik.wino_output, np.matmul

    def run():
        for xg, v, res, og in groups:
            tin(xg, ph, pw, th, tw, v)
            matmul(u, v, out=res)
            tout(res, th, tw, bias, slope, relu, og)
    return run
