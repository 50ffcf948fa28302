"""numba kernels behind :mod:`caffepy.math.kernels` (imported only through it, only when numba is
installed). Every kernel writes into arrays its caller allocated, loops with ``prange`` over an
axis whose iterations touch disjoint outputs (channels, kernel rows, image planes), and is
compiled once per dtype and cached on disk (``cache=True``)."""
import numpy as np
from numba import njit, prange

from ._numba_fused import (bn_scale_relu_train, bn_scale_relu_train_backward,  # noqa: F401
                           relu_grad_sum2_to2, relu_grad_to2, relu_value, sum2_relu)
from ._numba_lattice import lattice_filter  # noqa: F401
from ._numba_libm import (bnll_c, bnll_c_backward, elu_c, exp_c, log_c,  # noqa: F401
                          lstm_unit_c, lstm_unit_c_backward,
                          powx, sigmoid_c, sigmoid_c_backward, sigmoid_ce_loss_c,
                          swish_c_backward, tanh_c)
from ._numba_pool import (ave_pool_rows, ave_pool_rows_backward,  # noqa: F401
                          max_pool_3x3_s2_phases)
from ._numba_roi import nnop_roi_align_bins  # noqa: F401
from ._numba_norm import (batch_norm_train, batch_norm_train_backward,  # noqa: F401
                          channel_affine_keep, lrn_across_backward, lrn_across_scale,
                          scale_backward)
from ._numba_train import (ave_pool, bias_sum, col2im_last, im2col_image,  # noqa: F401
                           im2col_last,
                           image_to_rows, max_pool, max_pool_2x2, max_pool_2x2_backward,
                           max_pool_3x3_s1, max_pool_3x3_s2,
                           pad_last, rows_to_image)

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(cache=True, inline="always")
def _span(o_count, stride, pad, off, size):
    """[lo, hi): the outputs o whose input index o * stride - pad + off lies in [0, size)."""
    lo = max(0, (pad - off + stride - 1) // stride)
    hi = min(o_count, (size - 1 + pad - off) // stride + 1)
    return lo, max(lo, hi)


# -- depthwise convolution: weight (M, 1, kh, kw), output channel m reads input m // (M / C) -----
@njit(**_opts)
def dw_forward(x, w, bias, kh, kw, ph, pw, sh, sw, dh, dw, slope, relu, y):
    """y[n, m] = sum_ij w[m, 0, i, j] x[n, m // mult] shifted (+ bias, then the fused ReLU)."""
    n, c, h, wd = x.shape
    m, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    mult = m // c
    has_bias = bias.shape[0] > 0
    for t in prange(n * m):
        b, mi = t // m, t % m
        ci = mi // mult
        out = y[b, mi]
        src = x[b, ci]
        out[:] = bias[mi] if has_bias else 0.0
        for i in range(kh):
            oy0, oy1 = _span(oh, sh, ph, i * dh, h)
            for j in range(kw):
                ox0, ox1 = _span(ow, sw, pw, j * dw, wd)
                wv = w[mi, 0, i, j]
                for oy in range(oy0, oy1):
                    row = src[oy * sh - ph + i * dh]
                    base = j * dw - pw
                    for ox in range(ox0, ox1):
                        out[oy, ox] += wv * row[ox * sw + base]
        if relu:
            for oy in range(oh):
                for ox in range(ow):
                    out[oy, ox] = relu_value(out[oy, ox], slope)


@njit(**_opts)
def dw_backward_data(dy, w, kh, kw, ph, pw, sh, sw, dh, dw, dx):
    n, c, h, wd = dx.shape
    m, oh, ow = dy.shape[1], dy.shape[2], dy.shape[3]
    mult = m // c
    for t in prange(n * c):
        b, ci = t // c, t % c
        dst = dx[b, ci]
        dst[:] = 0
        for mi in range(ci * mult, (ci + 1) * mult):
            g = dy[b, mi]
            for i in range(kh):
                oy0, oy1 = _span(oh, sh, ph, i * dh, h)
                for j in range(kw):
                    ox0, ox1 = _span(ow, sw, pw, j * dw, wd)
                    wv = w[mi, 0, i, j]
                    base = j * dw - pw
                    for oy in range(oy0, oy1):
                        row = dst[oy * sh - ph + i * dh]
                        for ox in range(ox0, ox1):
                            row[ox * sw + base] += wv * g[oy, ox]


@njit(**_opts)
def dw_backward_weight(dy, x, kh, kw, ph, pw, sh, sw, dh, dw, dwt):
    """dwt (M, 1, kh, kw) += sum over images and positions of dy * x."""
    n, c, h, wd = x.shape
    m, oh, ow = dy.shape[1], dy.shape[2], dy.shape[3]
    mult = m // c
    for mi in prange(m):
        ci = mi // mult
        for i in range(kh):
            oy0, oy1 = _span(oh, sh, ph, i * dh, h)
            for j in range(kw):
                ox0, ox1 = _span(ow, sw, pw, j * dw, wd)
                base = j * dw - pw
                acc = 0.0
                for b in range(n):
                    for oy in range(oy0, oy1):
                        row = x[b, ci, oy * sh - ph + i * dh]
                        g = dy[b, mi, oy]
                        for ox in range(ox0, ox1):
                            acc += g[ox] * row[ox * sw + base]
                dwt[mi, 0, i, j] += acc


# -- pooling over (P, H, W) planes (P = N * C) -----------------------------------------------------
@njit(**_opts)
def max_pool_backward(dy, arg, kw, sh, sw, ph, pw, dx):
    p, h, w = dx.shape
    oh, ow = dy.shape[1], dy.shape[2]
    for t in prange(p):
        dx[t] = 0
        for oy in range(oh):
            for ox in range(ow):
                a = arg[t, oy, ox]
                yy = oy * sh - ph + a // kw
                xx = ox * sw - pw + a % kw
                if yy >= 0 and yy < h and xx >= 0 and xx < w:
                    dx[t, yy, xx] += dy[t, oy, ox]


@njit(**_opts)
def ave_pool_backward(dy, kh, kw, sh, sw, ph, pw, div, dx):
    """Caffe's AVE backward, in its float order: dx = 0, then per output (rows, then columns)
    dy / div (of dy's type) added to every input of its window clipped to the image."""
    p, h, w = dx.shape
    oh, ow = dy.shape[1], dy.shape[2]
    for t in prange(p):
        dx[t] = 0
        for oy in range(oh):
            y0 = oy * sh - ph
            ya, yb = max(y0, 0), min(y0 + kh, h)
            for ox in range(ow):
                x0 = ox * sw - pw
                xa, xb = max(x0, 0), min(x0 + kw, w)
                g = dy[t, oy, ox] / div[oy, ox]
                for yy in range(ya, yb):
                    for xx in range(xa, xb):
                        dx[t, yy, xx] += g


# -- element-wise ------------------------------------------------------------------------------
@njit(**_opts)
def relu(x, slope, y):
    """Flat x, y: Caffe's y = max(x, 0) + slope * min(x, 0) (std::max / std::min: the first
    argument unless the other compares greater / smaller), so that a negative x gives +0, not
    -0, at slope 0, and a NaN stays NaN, as in Caffe."""
    for i in prange(x.shape[0]):
        y[i] = relu_value(x[i], slope)


@njit(**_opts)
def add(a, b, y):
    """Flat a, b, y: y = a + b (y may be a or b)."""
    for i in prange(a.shape[0]):
        y[i] = a[i] + b[i]


@njit(**_opts)
def copy(src, dst):
    for i in prange(src.shape[0]):
        dst[i] = src[i]


@njit(**_opts)
def relu_backward(x, dy, slope, dx):
    for i in prange(x.shape[0]):
        dx[i] = dy[i] if x[i] > 0 else dy[i] * slope


@njit(**_opts)
def channel_affine(x, scale, shift, y):
    """x, y (N, C, S): y = x * scale[c] + shift[c] (BatchNorm with fixed statistics, Scale+Bias)."""
    n, c, s = x.shape
    for t in prange(n * c):
        b, ci = t // c, t % c
        a, o = scale[ci], shift[ci]
        for k in range(s):
            y[b, ci, k] = x[b, ci, k] * a + o


@njit(**_opts)
def channel_norm(x, mu, std, y):
    """x, y (N, C, S): y = (x - mu[c]) / std[c] (BatchNorm with fixed statistics)."""
    n, c, s = x.shape
    for t in prange(n * c):
        b, ci = t // c, t % c
        m, d = mu[ci], std[ci]
        for k in range(s):
            y[b, ci, k] = (x[b, ci, k] - m) / d


@njit(**_opts)
def softmax(x, y):
    """x, y (outer, C, inner): softmax over axis 1 (exp(x - max) / sum)."""
    outer, c, inner = x.shape
    for t in prange(outer * inner):
        o, k = t // inner, t % inner
        mx = x[o, 0, k]
        for ci in range(1, c):
            mx = max(mx, x[o, ci, k])
        s = 0.0
        for ci in range(c):
            e = np.exp(x[o, ci, k] - mx)
            y[o, ci, k] = e
            s += e
        for ci in range(c):
            y[o, ci, k] /= s
