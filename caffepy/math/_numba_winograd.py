"""Winograd F(2x2, 3x3) transforms for 3x3 / stride 1 / dilation 1 convolutions: inference
mode's forward (caffepy.infer.winograd) and training's forward and backward
(caffepy.layers.conv_winograd).

Per 2x2 output tile and 4x4 input patch d (Lavin & Gray, 2016):
``Y = A^T [(G g G^T) . (B^T d B)] A`` with
B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]],
A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]:
16 products per tile and input channel instead of 36; the sums over input channels are 16 GEMMs
``M_k = U_k V_k`` (k = 4 i + j the position in the 4x4 transformed tile; U_k: M x C, V_k:
C x tiles). The backward pass is the same chain transposed:

* ``dM = A dY A^T`` per tile (:func:`wino_dy`; dY zero past the image's last row / column);
* weights: ``dU_k = dM_k V_k^T`` (16 GEMMs), ``dW += G^T dU G`` (:func:`wino_dw`);
* data: ``dV_k = U_k^T dM_k`` (16 GEMMs), ``dx = sum over tiles of B dV B^T`` placed at the
  patch (2 ty - pad_h, 2 tx - pad_w), the overlapping patches added, the padding dropped
  (:func:`wino_dx`).

Arrays: x / dx (N, C, H, W), dy (N, M, OH, OW), transformed (16, C or M, N * th * tw) with tile
index (n * th + ty) * tw + tx, th = ceil(OH / 2), tw = ceil(OW / 2).
"""
import numpy as np
from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def wino_weights(w, u):
    """w (M, C, 3, 3) -> u (16, M, C): G g G^T of every filter, in float64 then rounded."""
    m, c = w.shape[0], w.shape[1]
    for mi in prange(m):
        t = np.empty((4, 3))
        for ci in range(c):
            g = w[mi, ci]
            for j in range(3):
                g0, g1, g2 = np.float64(g[0, j]), np.float64(g[1, j]), np.float64(g[2, j])
                t[0, j] = g0
                t[1, j] = 0.5 * (g0 + g1 + g2)
                t[2, j] = 0.5 * (g0 - g1 + g2)
                t[3, j] = g2
            for i in range(4):
                r0, r1, r2 = t[i, 0], t[i, 1], t[i, 2]
                u[4 * i, mi, ci] = r0
                u[4 * i + 1, mi, ci] = 0.5 * (r0 + r1 + r2)
                u[4 * i + 2, mi, ci] = 0.5 * (r0 - r1 + r2)
                u[4 * i + 3, mi, ci] = r2


@njit(**_opts)
def wino_input(x, ph, pw, th, tw, v):
    """x (N, C, H, W) -> v (16, C, N * th * tw): B^T d B of every 4x4 patch at (2 ty - ph,
    2 tx - pw), zero outside the image; tile index (n * th + ty) * tw + tx."""
    n, c, h, w = x.shape
    hp, wp = 2 * th + 2, 2 * tw + 2
    for t in prange(n * c):
        b, ci = t // c, t % c
        xp = np.zeros((hp, wp), x.dtype)
        for yy in range(min(h, hp - ph)):
            row = xp[yy + ph, pw:pw + min(w, wp - pw)]
            src = x[b, ci, yy, :min(w, wp - pw)]
            for q in range(row.shape[0]):
                row[q] = src[q]
        u = np.empty((4, wp), x.dtype)
        for ty in range(th):
            r0, r1, r2, r3 = xp[2 * ty], xp[2 * ty + 1], xp[2 * ty + 2], xp[2 * ty + 3]
            for q in range(wp):
                u[0, q] = r0[q] - r2[q]
                u[1, q] = r1[q] + r2[q]
                u[2, q] = r2[q] - r1[q]
                u[3, q] = r1[q] - r3[q]
            base = (b * th + ty) * tw
            for i in range(4):
                ui = u[i]
                d0 = v[4 * i, ci, base:base + tw]
                d1 = v[4 * i + 1, ci, base:base + tw]
                d2 = v[4 * i + 2, ci, base:base + tw]
                d3 = v[4 * i + 3, ci, base:base + tw]
                for tx in range(tw):
                    a0, a1, a2, a3 = ui[2 * tx], ui[2 * tx + 1], ui[2 * tx + 2], ui[2 * tx + 3]
                    d0[tx] = a0 - a2
                    d1[tx] = a1 + a2
                    d2[tx] = a2 - a1
                    d3[tx] = a1 - a3


@njit(**_opts)
def wino_output(mres, th, tw, bias, slope, relu, out):
    """mres (16, M, N * th * tw) -> out (N, M, OH, OW) (may be strided): A^T m A of every tile,
    + bias[m], then the leaky ReLU; the last tile row / column is cut at the image's end."""
    n, m, oh, ow = out.shape
    has_bias = bias.shape[0] > 0
    for t in prange(n * m):
        b, mi = t // m, t % m
        bv = bias[mi] if has_bias else 0.0
        s = np.empty((4, tw), mres.dtype)
        d = np.empty((4, tw), mres.dtype)
        for ty in range(th):
            base = (b * th + ty) * tw
            for j in range(4):
                m0 = mres[j, mi, base:base + tw]
                m1 = mres[4 + j, mi, base:base + tw]
                m2 = mres[8 + j, mi, base:base + tw]
                m3 = mres[12 + j, mi, base:base + tw]
                sj, dj = s[j], d[j]
                for tx in range(tw):
                    sj[tx] = m0[tx] + m1[tx] + m2[tx]
                    dj[tx] = m1[tx] - m2[tx] - m3[tx]
            for half in range(2):
                oy = 2 * ty + half
                if oy >= oh:
                    break
                e = s if half == 0 else d
                row = out[b, mi, oy]
                for tx in range(tw):
                    y0 = e[0, tx] + e[1, tx] + e[2, tx] + bv
                    y1 = e[1, tx] - e[2, tx] - e[3, tx] + bv
                    if relu:
                        if y0 <= 0:
                            y0 = y0 * slope
                        if y1 <= 0:
                            y1 = y1 * slope
                    row[2 * tx] = y0
                    if 2 * tx + 1 < ow:
                        row[2 * tx + 1] = y1


@njit(**_opts)
def wino_dy(dy, th, tw, dm):
    """dy (N, M, OH, OW) -> dm (16, M, N * th * tw): A dY A^T of every 2x2 tile of dy. Per tile
    row: the rows of A dY (dY0, dY0 + dY1, dY0 - dY1, -dY1) over the whole row, then each of the
    16 outputs written as one contiguous run over the tiles."""
    n, m, oh, ow = dy.shape
    for t in prange(n * m):
        b, mi = t // m, t % m
        r = np.zeros((4, 2 * tw), dy.dtype)
        for ty in range(th):
            y0 = dy[b, mi, 2 * ty]
            last = 2 * ty + 1 >= oh
            for q in range(ow):
                a0 = y0[q]
                a1 = dy.dtype.type(0) if last else dy[b, mi, 2 * ty + 1, q]
                r[0, q] = a0
                r[1, q] = a0 + a1
                r[2, q] = a0 - a1
                r[3, q] = -a1
            base = (b * th + ty) * tw
            for i in range(4):
                ri = r[i]
                o0 = dm[4 * i, mi, base:base + tw]
                o1 = dm[4 * i + 1, mi, base:base + tw]
                o2 = dm[4 * i + 2, mi, base:base + tw]
                o3 = dm[4 * i + 3, mi, base:base + tw]
                for tx in range(tw):
                    o0[tx] = ri[2 * tx]
                for tx in range(tw):
                    o1[tx] = ri[2 * tx] + ri[2 * tx + 1]
                for tx in range(tw):
                    o2[tx] = ri[2 * tx] - ri[2 * tx + 1]
                for tx in range(tw):
                    o3[tx] = -ri[2 * tx + 1]


@njit(**_opts)
def wino_dw(du, dw):
    """du (16, M, C) -> dw (M, C, 3, 3) += G^T dU G (in float64, added once per weight)."""
    m, c = dw.shape[0], dw.shape[1]
    for mi in prange(m):
        t = np.empty((3, 4))
        for ci in range(c):
            for j in range(4):
                d0, d1 = np.float64(du[j, mi, ci]), np.float64(du[4 + j, mi, ci])
                d2, d3 = np.float64(du[8 + j, mi, ci]), np.float64(du[12 + j, mi, ci])
                t[0, j] = d0 + 0.5 * (d1 + d2)
                t[1, j] = 0.5 * (d1 - d2)
                t[2, j] = 0.5 * (d1 + d2) + d3
            for p in range(3):
                r0, r1, r2, r3 = t[p, 0], t[p, 1], t[p, 2], t[p, 3]
                dw[mi, ci, p, 0] += r0 + 0.5 * (r1 + r2)
                dw[mi, ci, p, 1] += 0.5 * (r1 - r2)
                dw[mi, ci, p, 2] += 0.5 * (r1 + r2) + r3


@njit(**_opts)
def wino_dx(dv, th, tw, ph, pw, dx):
    """dv (16, C, N * th * tw) -> dx (N, C, H, W): B dV B^T of every tile added into its 4x4
    patch at (2 ty - ph, 2 tx - pw); the parts in the padding dropped. Overwrites dx. Per tile
    row: the columns of B dV over the whole row (contiguous runs of dv), then each patch row's
    two halves added in two passes (a tile's right half is its right neighbour's left half)."""
    n, c, h, w = dx.shape
    hp, wp = 2 * th + 2, 2 * tw + 2
    for t in prange(n * c):
        b, ci = t // c, t % c
        acc = np.zeros((hp, wp), dx.dtype)
        e = np.empty((4, 4, tw), dx.dtype)
        g = np.empty((4, tw), dx.dtype)
        for ty in range(th):
            base = (b * th + ty) * tw
            for j in range(4):
                v0 = dv[j, ci, base:base + tw]
                v1 = dv[4 + j, ci, base:base + tw]
                v2 = dv[8 + j, ci, base:base + tw]
                v3 = dv[12 + j, ci, base:base + tw]
                for tx in range(tw):
                    e[0, j, tx] = v0[tx]
                    e[1, j, tx] = v1[tx] - v2[tx] + v3[tx]
                    e[2, j, tx] = v1[tx] + v2[tx] - v0[tx]
                    e[3, j, tx] = -v3[tx]
            for p in range(4):
                ep = e[p]
                for tx in range(tw):
                    g[0, tx] = ep[0, tx]
                    g[1, tx] = ep[1, tx] - ep[2, tx] + ep[3, tx]
                    g[2, tx] = ep[1, tx] + ep[2, tx] - ep[0, tx]
                    g[3, tx] = -ep[3, tx]
                row = acc[2 * ty + p]
                for tx in range(tw):
                    row[2 * tx] += g[0, tx]
                    row[2 * tx + 1] += g[1, tx]
                for tx in range(tw):
                    row[2 * tx + 2] += g[2, tx]
                    row[2 * tx + 3] += g[3, tx]
        for yy in range(h):
            dx[b, ci, yy] = acc[yy + ph, pw:pw + w]
