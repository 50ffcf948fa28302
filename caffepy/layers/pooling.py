"""Pooling (MAX / AVE / STOCHASTIC), vectorised over windows (SPP, built on it, is in spp.py).

The kernels below loop over the kh * kw offsets of a window (never over pixels or images): each
step reads one strided slab of the padded input that holds that offset of every window.
"""
import numpy as np

from ..errors import ShapeError
from ..math import kernels
from ..math.cpu import pad_spatial
from ..math.sizes import overhang, pooled_shape, pooled_size  # noqa: F401  (pooled_size: forks)
from .base import Layer, register_layer

FLT_MIN = float(np.finfo(np.float32).tiny)
# AVE pooling's whole-row kernels against the per-window ones, forward / backward time (2 threads,
# AVX2, 2026-12-02, median of 11 alternated rounds; batch 8, or 100 x 32 planes for the 32, 16
# and 8 wide ones): stride 1, 3x3 pad 1 at 35 x 35 0.26 / 0.24, 17 x 17 0.51 / 0.45, 8 x 8
# 0.86 / 0.82; stride 2, 2x2 at 56 0.80 / 0.44, 28 0.90 / 0.51, 14 (7 outputs a row) 1.29 /
# 0.96; 3x3 stride 2 at 32 0.77 / 0.48, at 16 (8 outputs: CIFAR10-quick's pool2) 1.00 / 0.82,
# at 8 (its pool3) 1.34 / 1.24; a global 7x7 pool (1 output) 2.8-4.0.
ROWS_MIN_WIDTH = 8
ROWS_MIN_WIDTH_STRIDED = 14
# MAX 3x3 at stride 2 from the rows' even / odd columns (caffepy.math._numba_pool) against the
# per-window kernel, forward time (2 threads, AVX2, 2026-12-02, median of 11 alternated rounds):
# CIFAR10-quick's 100 x 32 planes of 32 x 32 0.50-0.57, 8 x 192 of 56 x 56 0.52-0.60, 8 x 64 of
# 112 x 112 0.85-1.05; 8 x 480 of 28 x 28 (14 outputs a row) 1.09-1.15, 8 x 832 of 14 x 14
# 1.08-1.21.
PHASES_MIN_WIDTH = 16


class PoolGeometry(object):
    """Kernel, stride, pad and output size for (H, W) inputs; slabs of the padded input."""

    def __init__(self, in_hw, kernel, stride, pad, ceil=True, grow=(0, 0)):
        self.in_hw = tuple(in_hw)
        self.kernel, self.stride, self.pad = tuple(kernel), tuple(stride), tuple(pad)
        self.out_hw = pooled_shape(self.in_hw, self.kernel, self.stride, self.pad, ceil, grow)
        # extra bottom/right padding so that every (ceil-rounded) window lies inside the buffer
        self.extra = tuple(overhang(s, k, p, st, 1, o) for s, k, st, p, o in
                           zip(in_hw, kernel, stride, pad, self.out_hw))

    def padded(self, x, value, pad=None):
        return pad_spatial(x, self.pad if pad is None else pad, value=value, extra=self.extra)

    def offsets(self):
        kh, kw = self.kernel
        return [(i, j) for i in range(kh) for j in range(kw)]

    def slab(self, i, j):
        (sh, sw), (oh, ow) = self.stride, self.out_hw
        return (Ellipsis, slice(i, i + sh * (oh - 1) + 1, sh), slice(j, j + sw * (ow - 1) + 1, sw))

    def crop(self, xp, pad=None):
        (ph, pw), (h, w) = self.pad if pad is None else pad, self.in_hw
        return xp[..., ph:ph + h, pw:pw + w]

    def pool_size(self):
        """AVE divisor per output (Caffe: the window clipped to the padded image, not the image)."""
        sizes = []
        for s, k, st, p, o in zip(self.in_hw, self.kernel, self.stride, self.pad, self.out_hw):
            start = np.arange(o) * st - p
            sizes.append(np.minimum(start + k, s + p) - start)
        return np.outer(sizes[0], sizes[1])


def max_pool(x, g):
    """(y, arg): max over each window and the offset index (i * kw + j) of its first maximum
    in row-major order, as Caffe's scan finds it. The max is taken separably (rows, then
    columns); ``arg`` is the first offset whose value equals it. A NaN is never the maximum
    (Caffe compares ``value > max`` from -FLT_MAX): a window of NaNs gives -FLT_MAX, arg 0, as
    the numba kernels do."""
    (kh, kw), (sh, sw), (oh, ow) = g.kernel, g.stride, g.out_hw
    lowest = -np.finfo(x.dtype).max
    xp = g.padded(x, lowest)
    rows = np.fmax(xp[..., :, 0:sw * (ow - 1) + 1:sw], lowest)
    for j in range(1, kw):
        np.fmax(rows, xp[..., :, j:j + sw * (ow - 1) + 1:sw], out=rows)
    y = rows[..., 0:sh * (oh - 1) + 1:sh, :].copy()
    for i in range(1, kh):
        np.fmax(y, rows[..., i:i + sh * (oh - 1) + 1:sh, :], out=y)
    n = kh * kw
    arg_type = np.uint8 if n <= 256 else np.int32
    arg = np.zeros(y.shape, dtype=arg_type)
    for idx in range(n - 1, -1, -1):
        arg = np.where(xp[g.slab(idx // kw, idx % kw)] == y, arg_type(idx), arg)
    return y, arg


def max_pool_mask(arg, g):
    """Caffe's mask: the index h * W + w of each window's maximum in the input plane."""
    kw = g.kernel[1]
    (sh, sw), (ph, pw), (oh, ow) = g.stride, g.pad, g.out_hw
    h = (np.arange(oh) * sh - ph)[:, None] + arg // kw
    w = (np.arange(ow) * sw - pw)[None, :] + arg % kw
    return h * g.in_hw[1] + w


def max_pool_backward(dy, arg, g):
    dxp = np.zeros(dy.shape[:-2] + tuple(s + 2 * p + e for s, p, e in
                                         zip(g.in_hw, g.pad, g.extra)), dtype=dy.dtype)
    tmp = np.empty_like(dy)
    for idx, (i, j) in enumerate(g.offsets()):
        np.multiply(dy, arg == idx, out=tmp)
        dxp[g.slab(i, j)] += tmp
    return g.crop(dxp)


def ave_pool(x, g):
    """Caffe's AVE forward in its float order: from 0, the window's values added one by one
    (rows, then columns; the zeros of the padding add nothing), then / pool_size."""
    xp = g.padded(x, 0)
    y = np.zeros(x.shape[:-2] + g.out_hw, dtype=x.dtype)
    for i, j in g.offsets():
        y += xp[g.slab(i, j)]
    y /= g.pool_size().astype(x.dtype)
    return y


def ave_pool_backward(dy, g):
    """Caffe's AVE backward in its float order: each input gets dy / pool_size of the windows
    holding it in the order of the outputs (rows, then columns), i.e. window offsets from the
    last to the first."""
    dyn = dy / g.pool_size().astype(dy.dtype)
    hp, wp = (s + 2 * p + e for s, p, e in zip(g.in_hw, g.pad, g.extra))
    dxp = np.zeros(dy.shape[:-2] + (hp, wp), dtype=dy.dtype)
    for i, j in reversed(g.offsets()):
        dxp[g.slab(i, j)] += dyn
    return g.crop(dxp)


def stochastic_pool(x, g, uniform=None):
    """TEST (uniform None): sum x^2 / (FLT_MIN + sum x) per window. TRAIN: sample the element where
    the running sum first reaches uniform * sum. Returns (y, arg). Windows ignore ``pad``."""
    nopad = (0, 0)
    xp = g.padded(x, 0, pad=nopad)
    total = sq = None
    for i, j in g.offsets():
        v = xp[g.slab(i, j)]
        total = v.astype(x.dtype) if total is None else total + v
        sq = v * v if sq is None else sq + v * v
    if uniform is None:
        return sq / (total + x.dtype.type(FLT_MIN)), None
    thres = uniform.astype(x.dtype) * total
    y = np.zeros_like(total)
    arg = np.zeros(total.shape, dtype=np.int32)
    found = np.zeros(total.shape, dtype=bool)
    cum = np.zeros_like(total)
    for idx, (i, j) in enumerate(g.offsets()):
        v = xp[g.slab(i, j)]
        cum += v
        hit = ~found & (cum >= thres)
        np.copyto(y, v, where=hit)
        arg[hit] = idx
        found |= hit
    return y, arg


def stochastic_pool_backward(dy, x, arg, g):
    nopad = (0, 0)
    shape = dy.shape[:-2] + tuple(s + e for s, e in zip(g.in_hw, g.extra))
    dxp = np.zeros(shape, dtype=dy.dtype)
    if arg is not None:
        for idx, (i, j) in enumerate(g.offsets()):
            dxp[g.slab(i, j)] += np.where(arg == idx, dy, 0)
        return g.crop(dxp, nopad)
    # TEST phase: the gradient of sum x^2 / (FLT_MIN + sum x)
    xp = g.padded(x, 0, pad=nopad)
    total = sum(xp[g.slab(i, j)] for i, j in g.offsets()) + FLT_MIN
    y = sum(xp[g.slab(i, j)] ** 2 for i, j in g.offsets()) / total
    for i, j in g.offsets():
        dxp[g.slab(i, j)] += dy * (2 * xp[g.slab(i, j)] - y) / total
    return g.crop(dxp, nopad)


#: The class that pools a bottom of more than 4 axes given to a plain Pooling layer (BVLC's
#: refuses it): the OpenCL branch's PoolingLayer is N-d (``kernel_size: 2`` for every spatial
#: axis). caffepy.forks.video.nd puts its N-d Pooling here when it is imported.
ND_POOLING = []


def pool_input_hw(layer, blob):
    """(H, W) of Pooling's and SPP's bottom, which must be N x C x H x W."""
    if blob.num_axes != 4:
        raise layer.error("input must have 4 axes (num, channels, height, width), got shape %s"
                          % (blob.shape,), ShapeError)
    return blob.shape[2:]


def rounds_up(p):
    """Whether pooling ``p`` (a PoolingParameter) rounds its output size up, as Caffe does: not
    with ``round_mode: FLOOR``, a fork's ``ceil_mode: false`` or the Facebook port's (NVCaffe's,
    TensorRT's) ``torch_pooling: true``, all of which floor it."""
    return (p.round_mode == type(p).CEIL and getattr(p, "ceil_mode", True)
            and not getattr(p, "torch_pooling", False))


@register_layer("Pooling")
class PoolingLayer(Layer):
    """2-d pooling over (N, C, H, W) windows.

    Output size: PH = ceil((H + 2 pad - kernel) / stride) + 1 (floor as :func:`rounds_up` says:
    ``round_mode: FLOOR``, the fork field ``ceil_mode: false`` or NVCaffe's / TensorRT's
    ``torch_pooling: true``; a ratio in (-1, 0) gives one output under ceil), minus
    1 on each axis whose last window would start at or past H + pad when either pad is nonzero
    (caffepy.math.sizes). MAX: maximum over the window's image pixels (first one wins ties); the
    optional second top is the mask, index h * W + w of the maximum. AVE: sum over the window /
    pool_size, pool_size = the window clipped to the padded image (H + pad), so padding counts
    as zeros. STOCHASTIC (no padding): TRAIN samples an element with probability x / sum(window)
    (inputs must be >= 0); TEST outputs sum x^2 / sum x (the probability-weighted average).

    prototxt: ``pooling_param { pool: MAX kernel_size | kernel_h kernel_w  stride: 1 |
    stride_h stride_w  pad: 0 | pad_h pad_w  global_pooling: false  round_mode: CEIL
    ceil_mode: true  torch_pooling: false }``; global pooling takes the whole H x W (no kernel,
    pad 0, stride 1).
    Blobs: bottom (N, C, H, W) -> top (N, C, PH, PW) [, mask (N, C, PH, PW) for MAX].
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def _pair(self, p, name, h_name, w_name, default):
        if p.HasField(h_name) or p.HasField(w_name):
            if p.HasField(name):
                raise self.error("%s may be given as %s or as %s and %s, not both"
                                 % (name, name, h_name, w_name))
            if not (p.HasField(h_name) and p.HasField(w_name)):
                raise self.error("both %s and %s are required" % (h_name, w_name))
            return int(getattr(p, h_name)), int(getattr(p, w_name))
        v = int(getattr(p, name)) if p.HasField(name) else default
        return v, v

    def layer_setup(self, bottom, top):
        if bottom[0].num_axes > 4 and ND_POOLING:    # BVLC refuses it; the N-d forks pool it
            self.__class__ = ND_POOLING[0]
            return self.layer_setup(bottom, top)
        p = self.layer_param.pooling_param
        P = type(p)
        self.method = p.pool
        self.global_pooling = p.global_pooling
        self.ceil = rounds_up(p)
        if len(top) > 1 and self.method != P.MAX:
            raise self.error("a second (mask) top is only produced by MAX pooling")
        has_kernel = p.HasField("kernel_size") or p.HasField("kernel_h") or p.HasField("kernel_w")
        if self.global_pooling:
            if has_kernel:
                raise self.error("with global_pooling: true the kernel size cannot be specified")
            self.kernel = None
        else:
            if not has_kernel:
                raise self.error("kernel_size (or kernel_h and kernel_w) is required")
            self.kernel = self._pair(p, "kernel_size", "kernel_h", "kernel_w", None)
            if min(self.kernel) <= 0:
                raise self.error("kernel size must be positive, got %s" % (self.kernel,))
        self.pad = self._pair(p, "pad", "pad_h", "pad_w", 0)
        self.stride = self._pair(p, "stride", "stride_h", "stride_w", 1)
        if min(self.stride) <= 0:
            raise self.error("stride must be positive, got %s" % (self.stride,))
        if self.global_pooling and (any(self.pad) or self.stride != (1, 1)):
            raise self.error("with global_pooling: true only pad = 0 and stride = 1 are allowed")
        if any(self.pad):
            if self.method not in (P.MAX, P.AVE):
                raise self.error("padding is implemented only for MAX and AVE pooling")
            if self.kernel and (self.pad[0] >= self.kernel[0] or self.pad[1] >= self.kernel[1]):
                raise self.error("pad %s must be smaller than the kernel %s"
                                 % (self.pad, self.kernel))

    def reshape(self, bottom, top):
        b = bottom[0]
        hw = pool_input_hw(self, b)
        kernel = hw if self.global_pooling else self.kernel
        self.geom = PoolGeometry(hw, kernel, self.stride, self.pad, self.ceil,
                                 self.output_growth(kernel))
        if min(self.geom.out_hw) <= 0:
            raise self.error("pooled output %s is empty for input %s" % (self.geom.out_hw, hw),
                             ShapeError)
        for t in top:
            t.reshape(b.shape[:2] + self.geom.out_hw)

    def output_growth(self, kernel):
        """Outputs added per axis before the padding check: none (a fork's variant adds some)."""
        return (0, 0)

    def _planes(self, a):
        return a.reshape((-1,) + a.shape[2:])

    def _two_by_two(self, x, y):
        """2 x 2 windows at stride 2, no padding, the planes exactly twice the output's size:
        the kernels of max_pool_2x2."""
        g = self.geom
        return (g.kernel == (2, 2) and g.stride == (2, 2) and g.pad == (0, 0)
                and x.shape[1:] == (2 * y.shape[1], 2 * y.shape[2]))

    def _divisors(self, dtype):
        """Caffe's AVE pool_size per output, in ``dtype`` (kept while the geometry stays)."""
        key = (self.geom.in_hw, self.geom.out_hw, np.dtype(dtype))
        if getattr(self, "_div_key", None) != key:
            self._div = np.ascontiguousarray(self.geom.pool_size().astype(dtype))
            self._div_key = key
        return self._div

    def _forward_kernel(self, k, bottom, top):
        """MAX / AVE by the numba kernels, written straight into the top."""
        P = type(self.layer_param.pooling_param)
        g = self.geom
        geo = g.kernel + g.stride + g.pad
        x, y = self._planes(bottom[0].data), self._planes(top[0].data)
        if self.method == P.AVE:
            pool = k.ave_pool_rows if self._rows() else k.ave_pool
            pool(x, *geo, self._divisors(x.dtype), x.dtype.type(0), y)
            return
        n = g.kernel[0] * g.kernel[1]
        self.arg = np.empty(top[0].shape, np.uint8 if n <= 256 else np.int32)
        lowest, arg = -np.finfo(x.dtype).max, self._planes(self.arg)
        if self._two_by_two(x, y):
            k.max_pool_2x2(x, lowest, y, arg)
        elif g.kernel == (3, 3) and g.stride in ((1, 1), (2, 2)):
            three = k.max_pool_3x3_s1 if g.stride == (1, 1) else (
                k.max_pool_3x3_s2_phases if g.out_hw[1] >= PHASES_MIN_WIDTH else k.max_pool_3x3_s2)
            three(x, *g.pad, lowest, y, arg)
        else:
            k.max_pool(x, *geo, lowest, y, arg)
        if len(top) > 1:
            top[1].data[...] = max_pool_mask(self.arg, g)

    def _rows(self):
        """Whether AVE runs the whole-row kernels (caffepy.math._numba_pool): from output rows
        of ROWS_MIN_WIDTH (stride 1) or ROWS_MIN_WIDTH_STRIDED columns."""
        ow, sw = self.geom.out_hw[1], self.geom.stride[1]
        return ow >= (ROWS_MIN_WIDTH if sw == 1 else ROWS_MIN_WIDTH_STRIDED)

    def _backward_kernel(self, k, top, bottom):
        P = type(self.layer_param.pooling_param)
        g = self.geom
        dy, dx = self._planes(top[0].diff), self._planes(bottom[0].diff)
        if self.method == P.AVE:
            grad = k.ave_pool_rows_backward if self._rows() else k.ave_pool_backward
            grad(dy, *(g.kernel + g.stride + g.pad), self._divisors(dy.dtype), dx)
        elif self._two_by_two(dx, dy):
            k.max_pool_2x2_backward(dy, self._planes(self.arg), dx)
        else:
            k.max_pool_backward(dy, self._planes(self.arg), g.kernel[1], *(g.stride + g.pad), dx)

    def _kernel(self):
        P = type(self.layer_param.pooling_param)
        return kernels.get() if self.method in (P.MAX, P.AVE) else None

    def forward_cpu(self, bottom, top):
        P = type(self.layer_param.pooling_param)
        x = bottom[0].data
        self.arg = None
        k = self._kernel()
        if k is not None:
            return self._forward_kernel(k, bottom, top)
        if self.method == P.MAX:
            y, self.arg = max_pool(x, self.geom)
            if len(top) > 1:
                top[1].data[...] = max_pool_mask(self.arg, self.geom)
        elif self.method == P.AVE:
            y = ave_pool(x, self.geom)
        elif self.method == P.STOCHASTIC:
            train = self.phase == self._caffe_pb2.TRAIN
            u = self.rng().random(top[0].shape) if train else None
            y, self.arg = stochastic_pool(x, self.geom, u)
        else:
            raise self.error("unknown pooling method %d" % self.method)
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        P = type(self.layer_param.pooling_param)
        k = self._kernel()
        if k is not None and (self.method == P.AVE or self.arg is not None):
            return self._backward_kernel(k, top, bottom)
        dy = top[0].diff
        if self.method == P.MAX:
            dx = max_pool_backward(dy, self.arg, self.geom)
        elif self.method == P.AVE:
            dx = ave_pool_backward(dy, self.geom)
        else:
            dx = stochastic_pool_backward(dy, bottom[0].data, self.arg, self.geom)
        bottom[0].diff[...] = dx
