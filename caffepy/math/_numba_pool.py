"""Pooling kernels over (P, H, W) planes (P = N * C) that work on whole output rows (reached
through :mod:`caffepy.math.kernels`; :class:`caffepy.layers.pooling.PoolingLayer` takes them for
rows wide enough and keeps the per-window kernels of ``_numba_train`` / ``_numba_kernels`` for
narrower ones).

**AVE.** Caffe's CPU layer visits one output after another and adds, in x's type and from 0, the
values of its window clipped to the image (rows, then columns), then divides by pool_size. The
forward here visits the same (output, window position) pairs grouped the other way round: for an
output row, window row ``i`` and window column ``j``, one pass adds input ``ox * sw - pw + j`` to
every output column ``ox`` whose input lies in the image (``_span``). Each output still gets its
window's values in Caffe's order, so the sums are Caffe's bit for bit; the pass is one add per
output over a contiguous run, which LLVM vectorises.

Backward: Caffe adds ``dy / pool_size`` of the outputs (rows, then columns) into the inputs of
their windows. An input reached from one output row by several window columns is reached by
ascending ``ox`` for descending ``j`` (``ox * sw + j`` fixed), so the passes over ``j`` run from
the last to the first, and each input gets its terms in Caffe's order too.

With column stride ``s > 1`` a plane is first split into its ``s`` column phases (phase ``r``,
row ``y``, index ``q`` holds column ``q * s + r``; backward gathers dx in that form and
interleaves it once at the end), so that every pass reads or writes a contiguous run. The
passes index flat arrays at unsigned offsets: no negative-index wrap-around, and no array view
made inside the loops (a view's reference count is an atomic add on a cache line the threads
share). The stride is a compile-time constant in the stride-1 and stride-2 bodies.

**MAX, 3 x 3 at stride 2** (:func:`max_pool_3x3_s2_phases`): each window's nine values in
Caffe's scan order (the first value above all before it, from ``lowest``; arg codes 0-8), as
``_numba_train.max_pool_3x3_s2``, but read from the rows' even and odd columns split apart
first (padded with ``lowest`` where a window reaches past the plane), so that the nine taps of
consecutive outputs are contiguous and the loop over a row's outputs vectorises.
"""
import numpy as np
from numba import njit, prange

from ._numba_train import _above

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)
CHUNKS = 512        # prange iterations: each allocates its scratch once for its planes
_u = np.uint64


@njit(cache=True, inline="always")
def _span(count, stride, pad, off, size):
    """[lo, hi): the outputs o whose input index o * stride - pad + off lies in [0, size)."""
    lo = max(0, (pad - off + stride - 1) // stride)
    hi = min(count, (size - 1 + pad - off) // stride + 1)
    return lo, max(lo, hi)


@njit(cache=True, inline="always")
def _phase_copy(plane, h, w, s, phases, back):
    """Flat plane (h * w) <-> flat phases (s, h, wq), [r, y, q] = plane[y, q * s + r]: into the
    phases, or back into the plane where ``back``."""
    wq = (w + s - 1) // s
    for r in range(s):
        n = (w - r + s - 1) // s
        for yy in range(h):
            a, b = _u(yy * w + r), _u((r * h + yy) * wq)
            if back:
                for q in range(n):
                    plane[a + _u(q * s)] = phases[b + _u(q)]
            else:
                for q in range(n):
                    phases[b + _u(q)] = plane[a + _u(q * s)]


@njit(cache=True, inline="always")
def _start(h, w, s, row, j, pw, lo):
    """The flat offset of the input (in the plane if s == 1, else in its phases) that window
    column j reads for output column lo of input row ``row``."""
    off = j - pw
    r = off % s
    return (r * h + row) * ((w + s - 1) // s) + lo + (off - r) // s


@njit(cache=True, inline="always")
def _forward_plane(src, h, w, oh, ow, kh, kw, sh, s, ph, pw, div, zero, y, phases):
    view = src
    if s != 1:
        _phase_copy(src, h, w, s, phases, False)
        view = phases
    for oy in range(oh):
        y0 = oy * sh - ph
        o = _u(oy * ow)
        for e in range(ow):
            y[o + _u(e)] = zero
        for i in range(max(0, -y0), min(kh, h - y0)):
            for j in range(kw):
                lo, hi = _span(ow, s, pw, j, w)
                v0, a0 = _u(_start(h, w, s, y0 + i, j, pw, lo)), o + _u(lo)
                for e in range(hi - lo):
                    y[a0 + _u(e)] += view[v0 + _u(e)]
        for e in range(ow):
            ue = _u(e)
            y[o + ue] = y[o + ue] / div[o + ue]


@njit(cache=True, inline="always")
def _backward_plane(dy, h, w, oh, ow, kh, kw, sh, s, ph, pw, div, dx, phases, g):
    view = dx if s == 1 else phases
    view[:] = 0
    for oy in range(oh):
        y0 = oy * sh - ph
        o = _u(oy * ow)
        for e in range(ow):
            g[e] = dy[o + _u(e)] / div[o + _u(e)]
        for i in range(max(0, -y0), min(kh, h - y0)):
            for j in range(kw - 1, -1, -1):
                lo, hi = _span(ow, s, pw, j, w)
                v0 = _u(_start(h, w, s, y0 + i, j, pw, lo))
                for e in range(hi - lo):
                    view[v0 + _u(e)] += g[_u(lo + e)]
    if s != 1:
        _phase_copy(dx, h, w, s, phases, True)


@njit(cache=True, inline="always")
def _phases(h, w, s, dtype):
    return np.empty(s * h * ((w + s - 1) // s) if s > 1 else 1, dtype)


@njit(**_opts)
def ave_pool_rows(x, kh, kw, sh, sw, ph, pw, div, zero, y):
    """x (P, H, W) -> y (P, OH, OW): Caffe's AVE forward (see the module); ``div`` (OH, OW) the
    pool sizes and ``zero`` a 0 of x's type."""
    p, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    xf, yf, df = x.reshape((p, h * w)), y.reshape((p, oh * ow)), div.reshape(oh * ow)
    chunks = min(p, CHUNKS)
    for c in prange(chunks):
        phases = _phases(h, w, sw, x.dtype)
        for t in range(c * p // chunks, (c + 1) * p // chunks):
            if sw == 1:
                _forward_plane(xf[t], h, w, oh, ow, kh, kw, sh, 1, ph, pw, df, zero, yf[t],
                               phases)
            elif sw == 2:
                _forward_plane(xf[t], h, w, oh, ow, kh, kw, sh, 2, ph, pw, df, zero, yf[t],
                               phases)
            else:
                _forward_plane(xf[t], h, w, oh, ow, kh, kw, sh, sw, ph, pw, df, zero, yf[t],
                               phases)


@njit(**_opts)
def ave_pool_rows_backward(dy, kh, kw, sh, sw, ph, pw, div, dx):
    """dy (P, OH, OW) -> dx (P, H, W), overwritten: AVE's gradient, dy / div added in Caffe's
    float order (see the module)."""
    p, h, w = dx.shape
    oh, ow = dy.shape[1], dy.shape[2]
    dyf, dxf, df = dy.reshape((p, oh * ow)), dx.reshape((p, h * w)), div.reshape(oh * ow)
    chunks = min(p, CHUNKS)
    for c in prange(chunks):
        phases, g = _phases(h, w, sw, dx.dtype), np.empty(ow, dx.dtype)
        for t in range(c * p // chunks, (c + 1) * p // chunks):
            if sw == 1:
                _backward_plane(dyf[t], h, w, oh, ow, kh, kw, sh, 1, ph, pw, df, dxf[t],
                                phases, g)
            elif sw == 2:
                _backward_plane(dyf[t], h, w, oh, ow, kh, kw, sh, 2, ph, pw, df, dxf[t],
                                phases, g)
            else:
                _backward_plane(dyf[t], h, w, oh, ow, kh, kw, sh, sw, ph, pw, df, dxf[t],
                                phases, g)


@njit(cache=True, inline="always")
def _split_row(row, pw, lowest, ev, od):
    """ev[q] = row[2q - pw], od[q] = row[2q + 1 - pw], ``lowest`` outside the row."""
    w, wq = row.shape[0], ev.shape[0]
    qa = (pw + 1) // 2                      # [qa, qb): both columns inside the row
    qb = max(qa, min(wq, (w - 1 + pw) // 2))
    for q in range(qa):
        c = 2 * q - pw
        ev[q] = row[c] if 0 <= c < w else lowest
        od[q] = row[c + 1] if 0 <= c + 1 < w else lowest
    n = qb - qa
    base = 2 * qa - pw
    src_e, src_o = row[base:base + 2 * n:2], row[base + 1:base + 2 * n:2]
    de, do = ev[qa:qb], od[qa:qb]
    for q in range(n):
        de[q] = src_e[q]
        do[q] = src_o[q]
    for q in range(qb, wq):
        c = 2 * q - pw
        ev[q] = row[c] if 0 <= c < w else lowest
        od[q] = row[c + 1] if 0 <= c + 1 < w else lowest


@njit(cache=True, inline="always")
def _max9(e0, o0, e1, o1, e2, o2, ox, lowest):
    best, bi = _above(e0[ox], lowest, 0, 0)
    best, bi = _above(o0[ox], best, bi, 1)
    best, bi = _above(e0[ox + 1], best, bi, 2)
    best, bi = _above(e1[ox], best, bi, 3)
    best, bi = _above(o1[ox], best, bi, 4)
    best, bi = _above(e1[ox + 1], best, bi, 5)
    best, bi = _above(e2[ox], best, bi, 6)
    best, bi = _above(o2[ox], best, bi, 7)
    best, bi = _above(e2[ox + 1], best, bi, 8)
    return best, bi


@njit(**_opts)
def max_pool_3x3_s2_phases(x, ph, pw, lowest, y, arg):
    """x (P, H, W) -> y, arg (P, OH, OW): MAX pooling, 3 x 3 windows at stride 2 (see the
    module); the values and arg codes of ``_numba_train.max_pool_3x3_s2``."""
    p, h, w = x.shape
    oh, ow = y.shape[1], y.shape[2]
    hp, wq = 2 * oh + 1, ow + 1             # the rows the windows span; even columns 0 .. 2 ow
    for t in prange(p):
        src = x[t]
        ev, od = np.empty((hp, wq), x.dtype), np.empty((hp, wq), x.dtype)
        for r in range(hp):
            yy = r - ph
            if 0 <= yy < h:
                _split_row(src[yy], pw, lowest, ev[r], od[r])
            else:
                ev[r] = lowest
                od[r] = lowest
        for oy in range(oh):
            e0, o0, e1 = ev[2 * oy], od[2 * oy], ev[2 * oy + 1]
            o1, e2, o2 = od[2 * oy + 1], ev[2 * oy + 2], od[2 * oy + 2]
            yrow, arow = y[t, oy], arg[t, oy]
            for ox in range(ow):
                b, i = _max9(e0, o0, e1, o1, e2, o2, ox, lowest)
                yrow[ox] = b
                arow[ox] = i
