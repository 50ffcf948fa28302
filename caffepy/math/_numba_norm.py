"""numba kernels of the training-mode channel layers (BatchNorm with batch statistics, Scale's
backward), imported through :mod:`caffepy.math._numba_kernels`.

Each loops with ``prange`` over the channels of a (N, C, S) view, a channel's values being
N blocks of S contiguous numbers, and makes every pass over one channel before the next (its
data stays in cache): sums are accumulated in float64, in SIMD partial sums. A top may be its bottom (in place) and a
bottom's diff its top's: every element is read before it is written."""
import numpy as np
from numba import njit, prange

# reassociation lets the per-channel sums run in SIMD lanes (each a float64 partial sum); no
# other fast-math assumption (NaN and infinity propagate as in numpy)
_opts = dict(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})


@njit(cache=True, inline="always")
def channel_stats(x, ci, eps, mu, var, std):
    """Channel ci of x (N, C, S): mu[ci] = mean, var[ci] = biased variance (two passes, float64
    sums), std[ci] = sqrt(var[ci] + eps); returns (mean, std)."""
    n, s = x.shape[0], x.shape[2]
    count = n * s
    acc = 0.0
    for b in range(n):
        for k in range(s):
            acc += x[b, ci, k]
    m = acc / count
    acc = 0.0
    for b in range(n):
        for k in range(s):
            d = x[b, ci, k] - m
            acc += d * d
    v = acc / count
    mu[ci] = m
    var[ci] = v
    sd = np.sqrt(v + eps)
    std[ci] = sd
    return m, sd


@njit(**_opts)
def batch_norm_train(x, eps, mu, var, std, x_norm, y):
    """Per channel c of x (N, C, S): mu[c] = mean, var[c] = biased variance (two passes),
    std[c] = sqrt(var[c] + eps), x_norm = y = (x - mu[c]) / std[c]."""
    n, c, s = x.shape
    for ci in prange(c):
        m, sd = channel_stats(x, ci, eps, mu, var, std)
        for b in range(n):
            for k in range(s):
                val = (x[b, ci, k] - m) / sd
                x_norm[b, ci, k] = val
                y[b, ci, k] = val


@njit(**_opts)
def batch_norm_train_backward(dy, x_norm, std, dx):
    """dx = (dy - mean(dy) - x_norm * mean(dy * x_norm)) / std[c], means per channel."""
    n, c, s = dy.shape
    count = n * s
    for ci in prange(c):
        a = 0.0
        b2 = 0.0
        for b in range(n):
            for k in range(s):
                d = dy[b, ci, k]
                a += d
                b2 += d * x_norm[b, ci, k]
        ma, mb, sd = a / count, b2 / count, std[ci]
        for b in range(n):
            for k in range(s):
                dx[b, ci, k] = (dy[b, ci, k] - ma - x_norm[b, ci, k] * mb) / sd


@njit(**_opts)
def scale_backward(dy, x, scale, dscale, dbias, want_scale, want_bias, dx):
    """Scale (outer, C, inner) with a per-channel scale: dscale[c] += sum(dy * x),
    dbias[c] += sum(dy) (each when wanted), dx = dy * scale[c]."""
    outer, c, inner = dy.shape
    for ci in prange(c):
        a = 0.0
        b2 = 0.0
        sc = scale[ci]
        for o in range(outer):
            for k in range(inner):
                d = dy[o, ci, k]
                a += d * x[o, ci, k]
                b2 += d
                dx[o, ci, k] = d * sc
        if want_scale:
            dscale[ci] += a
        if want_bias:
            dbias[ci] += b2


@njit(parallel=True, cache=True, nogil=True, fastmath=False)     # as channel_affine, bit for bit
def channel_affine_keep(x, scale, shift, kept, y):
    """x, y (N, C, S), y possibly x itself: kept = x (for the gradient), y = x * scale[c] +
    shift[c], in one pass (an in-place Scale layer's forward)."""
    n, c, s = x.shape
    for t in prange(n * c):
        b, ci = t // c, t % c
        a, o = scale[ci], shift[ci]
        for k in range(s):
            v = x[b, ci, k]
            kept[b, ci, k] = v
            y[b, ci, k] = v * a + o


_LRN_BLOCK = 512      # positions of one image handled by one prange iteration


@njit(cache=True, inline="always")
def _lrn_block(t, nb, s):
    """Iteration t of nb blocks per image: (image, first position, end position)."""
    lo = (t % nb) * _LRN_BLOCK
    return t // nb, lo, min(s, lo + _LRN_BLOCK)


@njit(parallel=True, cache=True, nogil=True, fastmath=False)    # Caffe's order of float32 ops
def lrn_across_scale(x, size, a_over_n, k, scale):
    """LRN ACROSS_CHANNELS on x (N, C, S), as Caffe's CPU layer sums its window: channel 0's
    scale = k, then + a_over_n x^2 of each channel of its window in turn; channel c's = channel
    (c - 1)'s + a_over_n x^2 of the channel entering the window - a_over_n x^2 of the one leaving
    it. Channels outside the blob are zeros there (adding them changes nothing: skipped)."""
    n, c, s = x.shape
    pre = (size - 1) // 2
    nb = (s + _LRN_BLOCK - 1) // _LRN_BLOCK
    for t in prange(n * nb):
        b, lo, hi = _lrn_block(t, nb, s)
        for q in range(lo, hi):
            scale[b, 0, q] = k
        for cj in range(max(0, -pre), min(c, size - pre)):
            for q in range(lo, hi):
                v = x[b, cj, q]
                scale[b, 0, q] = a_over_n * (v * v) + scale[b, 0, q]
        for ci in range(1, c):
            head, tail = ci + size - 1 - pre, ci - 1 - pre
            if head < c and tail >= 0:
                for q in range(lo, hi):
                    v, u = x[b, head, q], x[b, tail, q]
                    sc = a_over_n * (v * v) + scale[b, ci - 1, q]
                    scale[b, ci, q] = sc - a_over_n * (u * u)
            elif head < c:
                for q in range(lo, hi):
                    v = x[b, head, q]
                    scale[b, ci, q] = a_over_n * (v * v) + scale[b, ci - 1, q]
            elif tail >= 0:
                for q in range(lo, hi):
                    u = x[b, tail, q]
                    scale[b, ci, q] = scale[b, ci - 1, q] - a_over_n * (u * u)
            else:
                for q in range(lo, hi):
                    scale[b, ci, q] = scale[b, ci - 1, q]


@njit(parallel=True, cache=True, nogil=True, fastmath=False)
def lrn_across_backward(x, y, dy, scale, powed, size, coef, dx):
    """dx = dy * powed - coef * (x * acc), coef = 2 alpha beta / n, powed = scale^-beta (the
    forward's), acc = the window's sum of dy * y / scale, slid over the channels as Caffe's CPU
    layer does (the first window's channels added in turn, then per channel the entering one
    added and, after dx, the leaving one subtracted), in its order of float32 operations."""
    n, c, s = x.shape
    pre = (size - 1) // 2
    nb = (s + _LRN_BLOCK - 1) // _LRN_BLOCK
    for t in prange(n * nb):
        b, lo, hi = _lrn_block(t, nb, s)
        m = hi - lo
        ratio = np.empty((c, m), x.dtype)
        for ci in range(c):
            for q in range(lo, hi):
                ratio[ci, q - lo] = dy[b, ci, q] * y[b, ci, q] / scale[b, ci, q]
        acc = np.zeros(m, x.dtype)
        for cj in range(max(0, -pre), min(c, size - 1 - pre)):
            for q in range(m):
                acc[q] = ratio[cj, q] + acc[q]
        for ci in range(c):
            head, tail = ci + size - 1 - pre, ci - pre
            # one pass per channel: the entering channel added, dx, the leaving one subtracted
            hd, tl = min(head, c - 1), max(tail, 0)
            add, sub = head < c, tail >= 0
            for q in range(m):
                a = ratio[hd, q] + acc[q] if add else acc[q]
                g = x[b, ci, lo + q] * a
                dx[b, ci, lo + q] = dy[b, ci, lo + q] * powed[b, ci, lo + q] - coef * g
                acc[q] = a - ratio[tl, q] if sub else a
