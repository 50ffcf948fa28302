"""numba kernels of the convolution in the 'last' column order (C * kh * kw, OH * OW * N), image
index innermost (reached through :mod:`caffepy.math.kernels`: :mod:`caffepy.math._numba_kernels`
re-exports them): padding, im2col, col2im, the transposes between the images (N, M, P) and the
GEMM's order (M, P * N), the bias gradient summed in the same pass; and MAX / AVE pooling's forward.
Cached on disk.

The copies and adds run as loops over a slice of each row (``seg = row[a:b]; for e in
range(len)``): indices from 0 need no negative-index wrap-around, so LLVM vectorises them
(measured, one thread: col2im 3.5x, im2col with stride 4 1.4x faster than loops that index the
whole row; slice assignment is as fast for long runs, slower for short ones)."""
import numpy as np
from numba import njit, prange

from ._numba_fused import relu_value

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def image_to_rows(dy, bsum, out):
    """dy (N, M, P) -> out (M, P * N) (image index innermost); bsum[m] += sum of dy[:, m] when
    bsum is not empty (the bias gradient, summed in float64)."""
    n, m, p = dy.shape
    want = bsum.shape[0] > 0
    for mi in prange(m):
        dst = out[mi]
        s = 0.0
        for q0 in range(0, p, 16):
            q1 = min(q0 + 16, p)
            for b in range(n):
                src = dy[b, mi]
                for q in range(q0, q1):
                    v = src[q]
                    s += v
                    dst[q * n + b] = v
        if want:
            bsum[mi] += s


@njit(**_opts)
def bias_sum(dy, bsum):
    """bsum[m] += sum of dy[:, m] for dy (N, M, P), summed in float64: eight running sums per
    channel (position q into sum q % 8, vectorised), then added together. Every convolution path
    sums its bias gradient here (numba on), so all give the same result."""
    n, m, p = dy.shape
    body = p - p % 8
    for mi in prange(m):
        acc = np.zeros(8)
        for b in range(n):
            src = dy[b, mi]
            for q0 in range(0, body, 8):
                for lane in range(8):
                    acc[lane] += src[q0 + lane]
            for q in range(body, p):
                acc[q - body] += src[q]
        bsum[mi] += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


@njit(**_opts)
def rows_to_image(a, bias, slope, relu, out):
    """a (M, P * N) -> out (N, M, P) [+ bias[m]] [then leaky ReLU with ``slope`` if relu]: each
    image's row written in one contiguous run (the strided reads stay in the cache). For one
    image (N = 1) ``a`` may be ``out`` itself: each element is read before it is written."""
    n, m, p = out.shape
    has_bias = bias.shape[0] > 0
    for mi in prange(m):
        bv = bias[mi] if has_bias else 0.0
        src = a[mi]
        for b in range(n):
            dst = out[b, mi]
            for q in range(p):
                v = src[q * n + b] + bv
                dst[q] = relu_value(v, slope) if relu else v


@njit(**_opts)
def pad_last(x, ph, pw, out):
    """x (N, C, H, W) -> out (C, Hp, Wp, N), Hp >= H + 2 ph and Wp >= W + 2 pw: x at offset
    (ph, pw), zeros elsewhere."""
    n, c, h, w = x.shape
    for ci in prange(c):
        flat = out[ci].reshape(-1)
        for e in range(flat.shape[0]):
            flat[e] = 0
        for y in range(h):
            row = out[ci, y + ph].reshape(-1)
            for b in range(n):
                src = x[b, ci, y]
                seg = row[pw * n + b:]
                for xx in range(w):
                    seg[xx * n] = src[xx]


@njit(**_opts)
def im2col_image(x, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow, col):
    """x (C, H, W) -> col (C * kh * kw, OH * OW), one image (the 'last' order of a batch of one,
    and inference mode's per-image columns, whose rows may be strided: a slice of a batch's
    columns); zero where the window reads padding, which is never copied: each output row is
    its zero ends and one (strided) slice of an input row, so the copies vectorize."""
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
            out = dst[oy * ow:(oy + 1) * ow]
            yy = oy * sh - ph + i * dh
            if yy < 0 or yy >= h:
                out[:] = 0
                continue
            out[:lo] = 0
            if hi > lo:
                out[lo:hi] = x[ci, yy, lo * sw + xo:(hi - 1) * sw + xo + 1:sw]
            out[hi:] = 0


@njit(**_opts)
def im2col_last(xp, kh, kw, sh, sw, dh, dw, oh, ow, col):
    """xp (C, Hp, Wp, N) padded -> col (C * kh * kw, OH * OW * N)."""
    c, n = xp.shape[0], xp.shape[3]
    run = ow * n
    for r in prange(c * kh * kw):
        ci = r // (kh * kw)
        i = (r // kw) % kh
        j = r % kw
        dst = col[r]
        for oy in range(oh):
            src = xp[ci, oy * sh + i * dh].reshape(-1)
            base = oy * run
            if sw == 1:
                seg = dst[base:base + run]
                s = src[j * dw * n:j * dw * n + run]
                for e in range(run):
                    seg[e] = s[e]
                continue
            for ox in range(ow):
                s0 = (ox * sw + j * dw) * n
                seg = dst[base + ox * n:base + ox * n + n]
                s = src[s0:s0 + n]
                for e in range(n):
                    seg[e] = s[e]


@njit(**_opts)
def col2im_last(col, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow, dx):
    """Adjoint of pad_last + im2col_last: sum col back into dx (N, C, H, W) (overwritten). The
    accumulator also holds the last window's overhang past the padded input, if any."""
    n, c, h, w = dx.shape
    hp = max(h + 2 * ph, (oh - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + 2 * pw, (ow - 1) * sw + (kw - 1) * dw + 1)
    run = ow * n
    for ci in prange(c):
        acc = np.zeros(hp * wp * n, dtype=dx.dtype)
        for i in range(kh):
            for j in range(kw):
                src_row = col[(ci * kh + i) * kw + j]
                for oy in range(oh):
                    a0 = (oy * sh + i * dh) * wp * n
                    base = oy * run
                    if sw == 1:
                        seg = acc[a0 + j * dw * n:a0 + j * dw * n + run]
                        s = src_row[base:base + run]
                        for e in range(run):
                            seg[e] += s[e]
                        continue
                    for ox in range(ow):
                        s0 = a0 + (ox * sw + j * dw) * n
                        seg = acc[s0:s0 + n]
                        s = src_row[base + ox * n:base + ox * n + n]
                        for e in range(n):
                            seg[e] += s[e]
        for b in range(n):
            for y in range(h):
                d = dx[b, ci, y]
                a0 = ((y + ph) * wp + pw) * n + b
                for xx in range(w):
                    d[xx] = acc[a0 + xx * n]


@njit(inline="always")
def _window_max(src, y0, x0, kh, kw, lowest):
    """(max, arg) of the kh x kw window at (y0, x0) of plane src, clipped to the plane: Caffe's
    scan (rows, then columns), the first value above all before it, from ``lowest``."""
    h, w = src.shape
    best = lowest
    bi = 0
    for yy in range(max(y0, 0), min(y0 + kh, h)):
        row = src[yy]
        code0 = (yy - y0) * kw - x0
        for xx in range(max(x0, 0), min(x0 + kw, w)):
            v = row[xx]
            c = v > best
            best = v if c else best
            bi = (code0 + xx) if c else bi
    return best, bi


@njit(**_opts)
def max_pool(x, kh, kw, sh, sw, ph, pw, lowest, y, arg):
    """x (P, H, W) -> y, arg (P, OH, OW): Caffe's scan, the first maximum of each window clipped
    to the image (rows, then columns); arg = offset (i * kw + j) within the unclipped window
    (``lowest`` and 0 for a window with no pixel). Windows wholly inside a row are done four at
    a time, each keeping its maximum by selects, not branches: four independent chains instead
    of one (measured 1.3-1.6x faster, one thread)."""
    p, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    lo = (pw + sw - 1) // sw                            # outputs [lo, hi): no column clipped
    hi = max(lo, min(ow, (w - kw + pw) // sw + 1))
    for t in prange(p):
        src = x[t]
        for oy in range(oh):
            y0 = oy * sh - ph
            ya, yb = max(y0, 0), min(y0 + kh, h)
            yrow = y[t, oy]
            arow = arg[t, oy]
            ox = 0
            while ox < ow:
                x0 = ox * sw - pw
                if ox >= lo and ox + 4 <= hi:
                    b0 = b1 = b2 = b3 = lowest
                    i0 = i1 = i2 = i3 = 0
                    for yy in range(ya, yb):
                        row = src[yy]
                        c0 = (yy - y0) * kw
                        for j in range(kw):
                            code = c0 + j
                            v = row[x0 + j]
                            c = v > b0
                            b0 = v if c else b0
                            i0 = code if c else i0
                            v = row[x0 + sw + j]
                            c = v > b1
                            b1 = v if c else b1
                            i1 = code if c else i1
                            v = row[x0 + 2 * sw + j]
                            c = v > b2
                            b2 = v if c else b2
                            i2 = code if c else i2
                            v = row[x0 + 3 * sw + j]
                            c = v > b3
                            b3 = v if c else b3
                            i3 = code if c else i3
                    yrow[ox], yrow[ox + 1], yrow[ox + 2], yrow[ox + 3] = b0, b1, b2, b3
                    arow[ox], arow[ox + 1], arow[ox + 2], arow[ox + 3] = i0, i1, i2, i3
                    ox += 4
                    continue
                yrow[ox], arow[ox] = _window_max(src, y0, x0, kh, kw, lowest)
                ox += 1


@njit(inline="always")
def _above(v, best, bi, code):
    """One step of Caffe's scan: (v, code) where v is above the maximum so far, else (best, bi);
    two selects, no branch."""
    c = v > best
    return (v if c else best), (code if c else bi)


@njit(**_opts)
def max_pool_2x2(x, lowest, y, arg):
    """:func:`max_pool` for 2 x 2 windows at stride 2, no padding, H = 2 OH and W = 2 OW (LeNet's
    and VGG's pooling; no window clipped): the same first maximum in Caffe's scan order (from
    ``lowest``, so a NaN is never taken) and arg codes 0-3, four :func:`_above` steps over two
    rows that the compiler vectorises (measured 3-7x faster than the general kernel, 2 threads)."""
    p = x.shape[0]
    oh, ow = y.shape[1], y.shape[2]
    for t in prange(p):
        for oy in range(oh):
            r0, r1 = x[t, 2 * oy], x[t, 2 * oy + 1]
            yrow, arow = y[t, oy], arg[t, oy]
            for ox in range(ow):
                best, bi = _above(r0[2 * ox], lowest, 0, 0)
                best, bi = _above(r0[2 * ox + 1], best, bi, 1)
                best, bi = _above(r1[2 * ox], best, bi, 2)
                best, bi = _above(r1[2 * ox + 1], best, bi, 3)
                yrow[ox] = best
                arow[ox] = bi


@njit(inline="always")
def _max3x3(r0, r1, r2, x0, lowest):
    """(max, arg) of the 3 x 3 window at column x0 of rows r0-r2, none clipped; the same scan,
    written out (a loop over the nine ran 2-4x slower: not unrolled)."""
    best, bi = _above(r0[x0], lowest, 0, 0)
    best, bi = _above(r0[x0 + 1], best, bi, 1)
    best, bi = _above(r0[x0 + 2], best, bi, 2)
    best, bi = _above(r1[x0], best, bi, 3)
    best, bi = _above(r1[x0 + 1], best, bi, 4)
    best, bi = _above(r1[x0 + 2], best, bi, 5)
    best, bi = _above(r2[x0], best, bi, 6)
    best, bi = _above(r2[x0 + 1], best, bi, 7)
    best, bi = _above(r2[x0 + 2], best, bi, 8)
    return best, bi


@njit(inline="always")
def _max_pool_3x3_plane(src, s, ph, pw, lowest, y, arg):
    """One plane of a 3 x 3 MAX pooling at stride s in both axes (a constant where this is
    inlined: the loop over a row's windows then vectorises). Where a window reaches past the
    plane (padding, Caffe's ceil rounding) the plane is first copied into one padded with
    ``lowest``, which no value is above: the same maxima and arg codes as clipped windows."""
    h, w = src.shape
    oh, ow = y.shape
    hp, wp = (oh - 1) * s + 3, (ow - 1) * s + 3        # the rows and columns the windows span
    plane = src
    if ph or pw or hp > h or wp > w:
        plane = np.full((hp, wp), lowest, src.dtype)
        rows, cols = min(h, hp - ph), min(w, wp - pw)
        plane[ph:ph + rows, pw:pw + cols] = src[:rows, :cols]
    for oy in range(oh):
        r0, r1, r2 = plane[oy * s], plane[oy * s + 1], plane[oy * s + 2]
        yrow, arow = y[oy], arg[oy]
        for ox in range(ow):
            b, i = _max3x3(r0, r1, r2, ox * s, lowest)
            yrow[ox] = b
            arow[ox] = i


@njit(**_opts)
def max_pool_3x3_s1(x, ph, pw, lowest, y, arg):
    """:func:`max_pool` for 3 x 3 windows at stride 1 (GoogLeNet's inception pools): the same
    values and arg codes, 4-15x faster (measured, 2 threads)."""
    for t in prange(x.shape[0]):
        _max_pool_3x3_plane(x[t], 1, ph, pw, lowest, y[t], arg[t])


@njit(**_opts)
def max_pool_3x3_s2(x, ph, pw, lowest, y, arg):
    """:func:`max_pool` for 3 x 3 windows at stride 2 (CaffeNet, CIFAR10, GoogLeNet, ResNet)."""
    for t in prange(x.shape[0]):
        _max_pool_3x3_plane(x[t], 2, ph, pw, lowest, y[t], arg[t])


@njit(**_opts)
def max_pool_2x2_backward(dy, arg, dx):
    """The gradient of :func:`max_pool_2x2`: every input belongs to one window, so dx is written
    once (dy where arg picks it, else 0) instead of cleared and then scattered into."""
    p = dx.shape[0]
    oh, ow = dy.shape[1], dy.shape[2]
    for t in prange(p):
        for oy in range(oh):
            r0, r1 = dx[t, 2 * oy], dx[t, 2 * oy + 1]
            g, a = dy[t, oy], arg[t, oy]
            for ox in range(ow):
                v, i = g[ox], a[ox]
                r0[2 * ox] = v if i == 0 else 0.0
                r0[2 * ox + 1] = v if i == 1 else 0.0
                r1[2 * ox] = v if i == 2 else 0.0
                r1[2 * ox + 1] = v if i == 3 else 0.0


@njit(**_opts)
def ave_pool(x, kh, kw, sh, sw, ph, pw, div, zero, y):
    """Caffe's AVE forward, in its float order: per output, from ``zero`` (0 of x's type), the
    window clipped to the image added value by value (rows, then columns) in x's type, then
    divided by ``div[oy, ox]`` (the window clipped to the padded image, of x's type). Windows
    wholly inside a row four at a time (four independent sums, each in one window's order:
    measured 1.1-1.3x faster, one thread)."""
    p, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    lo = (pw + sw - 1) // sw
    hi = max(lo, min(ow, (w - kw + pw) // sw + 1))
    for t in prange(p):
        src = x[t]
        for oy in range(oh):
            y0 = oy * sh - ph
            ya, yb = max(y0, 0), min(y0 + kh, h)
            yrow, drow = y[t, oy], div[oy]
            ox = 0
            while ox < ow:
                x0 = ox * sw - pw
                if ox >= lo and ox + 4 <= hi:
                    s0 = s1 = s2 = s3 = zero
                    for yy in range(ya, yb):
                        row = src[yy]
                        for j in range(kw):
                            s0 += row[x0 + j]
                            s1 += row[x0 + sw + j]
                            s2 += row[x0 + 2 * sw + j]
                            s3 += row[x0 + 3 * sw + j]
                    yrow[ox], yrow[ox + 1] = s0 / drow[ox], s1 / drow[ox + 1]
                    yrow[ox + 2], yrow[ox + 3] = s2 / drow[ox + 2], s3 / drow[ox + 3]
                    ox += 4
                    continue
                xa, xb = max(x0, 0), min(x0 + kw, w)
                s = zero
                for yy in range(ya, yb):
                    row = src[yy]
                    for xx in range(xa, xb):
                        s += row[xx]
                yrow[ox] = s / drow[ox]
                ox += 1
