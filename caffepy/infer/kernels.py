"""numba kernels for inference mode's steps (caffepy.infer.steps), forward only.

Imported only through :func:`caffepy.math.kernels.get` having succeeded (numba installed and on).
Unlike the training kernels they never keep state for a backward pass (no argmax, no column
buffer per layer) and they read and write strided views, so a convolution can write straight
into its slice of a Concat's top. Each splits its outer loop over numba's threads (``prange``),
compiled once per dtype and layout and cached on disk (``cache=True``).
"""
import numpy as np
from numba import njit, prange

from ..math._numba_train import im2col_image as im2col  # noqa: F401  (one image's columns)
from ..math._numba_winograd import wino_input, wino_output, wino_weights  # noqa: F401

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


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
def max_pool_rows(x, kh, kw, sh, sw, ph, pw, lowest, y):
    """x (T, H, W) planes -> y (T, OH, OW): the maximum of each window clipped to the image
    (``lowest`` for a window with no pixel), by rows then columns, without an argmax. The
    columns whose window lies inside the row are taken tap by tap over all of them (a loop
    that vectorizes); the clipped ones at the ends one by one."""
    t, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    lo = min(ow, (pw + sw - 1) // sw)
    hi = max(lo, min(ow, (w - kw + pw) // sw + 1))
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
            for end in range(2):
                for ox in range(0, lo) if end == 0 else range(hi, ow):
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
            if hi > lo:
                base = lo * sw - pw
                out = yr[lo:hi]
                for j in range(kw):
                    tap = row[base + j:base + j + (hi - lo - 1) * sw + 1:sw]
                    if j == 0:
                        for q in range(hi - lo):
                            out[q] = tap[q]
                    else:
                        for q in range(hi - lo):
                            v = tap[q]
                            r = out[q]
                            out[q] = v if v > r else r


@njit(**_opts)
def max_pool_flat(x, kh, kw, sh, sw, ph, pw, lowest, y):
    """x (T, H, W) planes -> y (T, OH, OW): the maximum of each window clipped to the image
    (``lowest`` for a window with no pixel), without an argmax. Each plane is copied into a
    buffer bordered with ``lowest`` that covers every window, so no window needs clipping and
    every pass is one long loop over the plane at its padded row pitch (vectorized): the
    maximum over kh rows (all rows at once with stride 1), then over kw columns, of which
    every ``sw``-th is kept. 2-2.5x faster than :func:`max_pool_rows` with stride 1 (small
    planes), 1.4x slower with stride 2 (measured on GoogLeNet's pools)."""
    t, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    hp, wp = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    rows_in = max(0, min(h, hp - ph))
    cols_in = max(0, min(w, wp - pw))
    span = oh * wp
    for k in prange(t):
        xp = np.full(hp * wp, lowest, x.dtype)
        for yy in range(rows_in):
            d = xp[(yy + ph) * wp + pw:(yy + ph) * wp + pw + cols_in]
            src = x[k, yy]
            for q in range(cols_in):
                d[q] = src[q]
        rm = np.empty(span, x.dtype)
        for oy in range(oh if sh != 1 else 1):
            lo = oy * wp
            n_out = wp if sh != 1 else span
            dst = rm[lo:lo + n_out]
            for i in range(kh):
                o = (oy * sh + i) * wp
                tap = xp[o:o + n_out]
                if i == 0:
                    for q in range(n_out):
                        dst[q] = tap[q]
                else:
                    for q in range(n_out):
                        v = tap[q]
                        r = dst[q]
                        dst[q] = v if v > r else r
        n_cm = span - kw + 1
        cm = np.empty(n_cm, x.dtype)
        for j in range(kw):
            tap = rm[j:j + n_cm]
            if j == 0:
                for q in range(n_cm):
                    cm[q] = tap[q]
            else:
                for q in range(n_cm):
                    v = tap[q]
                    r = cm[q]
                    cm[q] = v if v > r else r
        for oy in range(oh):
            src = cm[oy * wp:oy * wp + (ow - 1) * sw + 1:sw]
            d = y[k, oy]
            for q in range(ow):
                d[q] = src[q]


@njit(**_opts)
def dw_conv(x, w, bias, kh, kw, ph, pw, sh, sw, dh, dw, slope, relu, y):
    """Depthwise convolution x (N, C, H, W) -> y (N, M, OH, OW), M = mult * C, weights
    (M, 1, kh, kw). Each plane is copied once into a zero-bordered buffer, so every tap is one
    loop over a contiguous slice with no bounds to clip, which vectorizes: with stride 1 the
    whole plane at the padded row pitch (the columns past OW are dropped), otherwise one output
    row at every column (stride 1) of which every ``sw``-th is kept. Then the bias and the
    fused leaky ReLU, written once. The sum runs in the exact kernel's order (bias, then the
    taps row by row)."""
    n, c, h, wd = x.shape
    m, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    mult = m // c
    # the border also holds the last window's overhang past the padded plane (Caffe's
    # truncating output size, caffepy.math.sizes), so no tap reads past the buffer
    hp = max(h + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(wd + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    has_bias = bias.shape[0] > 0
    strided = sh != 1 or sw != 1      # one output row at a time, every column at stride 1
    span = (ow - 1) * sw + 1 if strided else (oh - 1) * wp + ow
    for t in prange(n * m):
        b, mi = t // m, t % m
        xp = np.zeros(hp * wp, x.dtype)
        src = x[b, mi // mult]
        for yy in range(h):
            d = xp[(yy + ph) * wp + pw:(yy + ph) * wp + pw + wd]
            r = src[yy]
            for q in range(wd):
                d[q] = r[q]
        acc = np.empty(span, x.dtype)
        bv = bias[mi] if has_bias else 0.0
        dst = y[b, mi]
        for oy in range(oh if strided else 1):
            for q in range(span):
                acc[q] = bv
            for i in range(kh):
                for j in range(kw):
                    wv = w[mi, 0, i, j]
                    o = (oy * sh + i * dh) * wp + j * dw
                    tap = xp[o:o + span]
                    for q in range(span):
                        acc[q] += wv * tap[q]
            for ry in range(oy, oy + 1 if strided else oh):
                a = acc[0:span:sw] if strided else acc[ry * wp:ry * wp + ow]
                d = dst[ry]
                for q in range(ow):
                    v = a[q]
                    if relu and v <= 0:
                        v = v * slope
                    d[q] = v


@njit(**_opts)
def lrn_across(x, size, a, beta, k, y):
    """LRN across channels, x and y (N, C, P): y = x * (k + a * sum of x^2 over the channels
    [c - (size - 1) / 2, c + (size - 1) / 2] clipped to the blob) ^ -beta, a = alpha / size
    and k given in x's dtype; beta 0.75 as 1 / (sqrt(s) sqrt(sqrt(s))), which vectorizes
    (pow does not)."""
    n, c, p = x.shape
    half = (size - 1) // 2
    three_q = beta == 0.75
    for t in prange(n * c):
        b, ci = t // c, t % c
        lo, hi = max(0, ci - half), min(c, ci + size - half)
        s = np.zeros(p, x.dtype)
        for cc in range(lo, hi):
            src = x[b, cc]
            for q in range(p):
                s[q] += src[q] * src[q]
        src = x[b, ci]
        dst = y[b, ci]
        if three_q:
            for q in range(p):
                r = np.sqrt(k + a * s[q])
                dst[q] = src[q] / (r * np.sqrt(r))
        else:
            for q in range(p):
                dst[q] = src[q] * (k + a * s[q]) ** -beta


@njit(**_opts)
def sum2_act(a, b, ca, cb, slope, relu, y):
    """y = ca a + cb b, then the leaky ReLU if ``relu``; flat, same-sized arrays (y may be a or
    b: each element is read before it is written)."""
    for i in prange(y.shape[0]):
        v = ca * a[i] + cb * b[i]
        if relu and v <= 0:
            v = v * slope
        y[i] = v
