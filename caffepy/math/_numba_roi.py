"""numba kernel of nnop/caffe's ROIAlign forward (:mod:`caffepy.forks.detection.nnop_roi_align`),
imported through :mod:`caffepy.math._numba_kernels`: for one roi, each bin's largest bilinear
sample per channel, ``prange`` over the channels. The arithmetic is the numpy path's, in float64
and in the same order, so both give the same values and the same winning samples."""
import math

from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def nnop_roi_align_bins(flat, base, C, H, W, points, spans, floor, out, arg):
    """One roi. ``flat``: the feature blob flattened (N C H W); ``base``: the offset of the
    roi's image; ``points`` (P, 2): the samples (y, x) of every bin, bin after bin; ``spans``
    (B, 3): each bin's first and end sample and whether its clipped area is empty;
    ``floor``: the value a full bin starts from (-FLT_MAX).

    A sample reads its four neighbours y_lo = clip(floor(y), 0, H - 1), y_lo + 1 (x alike) at
    flat offset base + c H W + y W + x, 0 past the blob's end, and sums weight x value in the
    order (lo, lo), (lo, hi), (hi, lo), (hi, hi). out[c, k]: bin k's first largest sample (a NaN
    wins, as numpy's argmax), or its start (0 when empty, else ``floor``) when no sample exceeds
    it; arg[c, k]: the sample's index in the bin plus 1, or -1 then."""
    size = flat.shape[0]
    plane = H * W
    for c in prange(C):
        at = base + c * plane
        for k in range(spans.shape[0]):
            lo, hi = spans[k, 0], spans[k, 1]
            best = 0.0
            bi = -1
            for p in range(lo, hi):
                h, w = points[p, 0], points[p, 1]
                hl = min(max(int(math.floor(h)), 0), H - 1)
                wl = min(max(int(math.floor(w)), 0), W - 1)
                a, b = h - hl, w - wl
                v = 0.0
                for tap in range(4):
                    dh, dw = tap // 2, tap % 2
                    wt = (a if dh else 1 - a) * (b if dw else 1 - b)
                    idx = at + (hl + dh) * W + wl + dw
                    v += wt * (flat[idx] if idx < size else 0.0)
                if bi < 0 or (v > best and not math.isnan(best)) or \
                        (math.isnan(v) and not math.isnan(best)):
                    best, bi = v, p - lo
            start = 0.0 if spans[k, 2] else floor
            if best > start:
                out[c, k], arg[c, k] = best, bi + 1
            else:
                out[c, k], arg[c, k] = start, -1
