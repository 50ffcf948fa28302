"""numba kernel of the permutohedral-lattice filter (CRF-as-RNN's MultiStageMeanfield,
:mod:`caffepy.forks.segmentation.permutohedral`), imported through
:mod:`caffepy.math._numba_kernels`.

The loops are the fork's ``seqCompute`` (torrvision/caffe,
src/caffe/util/modified_permutohedral.cpp): splat point by point (sequential: points share vertices), blur along each lattice axis with
``prange`` over the vertices (each writes its own row), slice with ``prange`` over the points."""
from numba import njit, prange

_opts = dict(parallel=True, cache=True, nogil=True, fastmath=False)


@njit(**_opts)
def lattice_filter(offset, bary, neighbors, values, reverse, alpha, lat, tmp, out):
    """out (C, P) = slice(blur(splat(values (C, P)))).

    offset, bary (P, d+1): vertex ids and barycentric weights; neighbors (d+1, 2, M): the vertex
    ids of n1 / n2 along each axis (-1: absent). lat, tmp (M+1, C) are work arrays (row 0: the
    absent vertex, kept 0); the result of the blur ends in one of them."""
    n_pts, d1 = offset.shape
    n_ch = values.shape[0]
    m = neighbors.shape[2]
    lat[:] = 0
    tmp[:] = 0
    for i in range(n_pts):
        for j in range(d1):
            o = offset[i, j] + 1
            w = bary[i, j]
            for c in range(n_ch):
                lat[o, c] += w * values[c, i]
    src, dst = lat, tmp
    for step in range(d1):
        j = d1 - 1 - step if reverse else step
        for v in prange(m):
            n1 = neighbors[j, 0, v] + 1
            n2 = neighbors[j, 1, v] + 1
            for c in range(n_ch):
                dst[v + 1, c] = src[v + 1, c] + 0.5 * (src[n1, c] + src[n2, c])
        src, dst = dst, src
    for i in prange(n_pts):
        for c in range(n_ch):
            acc = 0.0
            for j in range(d1):
                acc += bary[i, j] * src[offset[i, j] + 1, c]
            out[c, i] = acc * alpha
