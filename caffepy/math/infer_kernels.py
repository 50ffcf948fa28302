"""numba kernels for inference mode's steps (caffepy.optimize_steps), forward only.

Imported only through :func:`caffepy.math.kernels.get` having succeeded (numba installed and on).
Unlike the training kernels they never keep state for a backward pass (no argmax, no column
buffer per layer) and they read and write strided views, so a convolution can write straight
into its slice of a Concat's top. Each splits its outer loop over numba's threads (``prange``),
compiled once per dtype and layout and cached on disk (``cache=True``).
"""
import numpy as np
from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def im2col(x, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow, col):
    """x (C, H, W) -> col (C * kh * kw, OH * OW) (rows may be strided: a slice of a batch's
    columns); zero where the window reads padding."""
    c, h, w = x.shape
    for r in prange(c * kh * kw):
        ci = r // (kh * kw)
        i = (r // kw) % kh
        j = r % kw
        dst = col[r]
        xo = j * dw - pw
        # ox with 0 <= ox * sw + xo < w
        lo = max(0, (-xo + sw - 1) // sw)
        hi = min(ow, (w - 1 - xo) // sw + 1)
        if hi < lo:
            hi = lo
        for oy in range(oh):
            base = oy * ow
            yy = oy * sh - ph + i * dh
            if yy < 0 or yy >= h:
                for q in range(ow):
                    dst[base + q] = 0
                continue
            src = x[ci, yy]
            for q in range(lo):
                dst[base + q] = 0
            if sw == 1:
                for q in range(lo, hi):
                    dst[base + q] = src[q + xo]
            else:
                for q in range(lo, hi):
                    dst[base + q] = src[q * sw + xo]
            for q in range(hi, ow):
                dst[base + q] = 0


@njit(**_opts)
def bias_act(y, bias, slope, relu):
    """In place on y (M, P): y += bias[m] (bias may be empty), then leaky ReLU if ``relu``."""
    m, p = y.shape
    has_bias = bias.shape[0] > 0
    for mi in prange(m):
        bv = bias[mi] if has_bias else 0.0
        row = y[mi]
        for q in range(p):
            v = row[q] + bv
            if relu and v <= 0:
                v = v * slope
            row[q] = v


@njit(**_opts)
def gather(x, col):
    """x (N, C, P) -> col (C, N * P): each image's plane a block of columns."""
    n, c, p = x.shape
    for ci in prange(c):
        for b in range(n):
            col[ci, b * p:(b + 1) * p] = x[b, ci]


@njit(**_opts)
def scatter_bias_act(a, bias, slope, relu, out):
    """a (M, N * P) -> out (N, M, P) (may be strided) + bias[m], then the leaky ReLU."""
    n, m, p = out.shape
    has_bias = bias.shape[0] > 0
    for mi in prange(m):
        bv = bias[mi] if has_bias else 0.0
        src = a[mi]
        for b in range(n):
            dst = out[b, mi]
            for q in range(p):
                v = src[b * p + q] + bv
                if relu and v <= 0:
                    v = v * slope
                dst[q] = v


@njit(**_opts)
def max_pool(x, kh, kw, sh, sw, ph, pw, lowest, y):
    """x (T, H, W) planes -> y (T, OH, OW): the maximum of each window clipped to the image
    (``lowest`` for a window with no pixel), by rows then columns, without an argmax."""
    t, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    for k in prange(t):
        row = np.empty(w, x.dtype)
        for oy in range(oh):
            y0 = oy * sh - ph
            ya, yb = max(y0, 0), min(y0 + kh, h)
            yr = y[k, oy]
            if ya >= yb:
                for ox in range(ow):
                    yr[ox] = lowest
                continue
            src = x[k, ya]
            for q in range(w):
                row[q] = src[q]
            for yy in range(ya + 1, yb):
                src = x[k, yy]
                for q in range(w):
                    v = src[q]
                    r = row[q]
                    row[q] = v if v > r else r
            for ox in range(ow):
                x0 = ox * sw - pw
                xa, xb = max(x0, 0), min(x0 + kw, w)
                if xa >= xb:
                    yr[ox] = lowest
                    continue
                best = row[xa]
                for q in range(xa + 1, xb):
                    v = row[q]
                    best = v if v > best else best
                yr[ox] = best
