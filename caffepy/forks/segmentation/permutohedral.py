"""The permutohedral lattice of CRF-as-RNN's caffe (torrvision/caffe, the submodule of
torrvision/crfasrnn): ``src/caffe/util/modified_permutohedral.cpp``, in vectorised numpy.

A Gaussian filter ``out_p = sum_q exp(-|f_p - f_q|^2 / 2) in_q`` over P points with d-dimensional
features f is approximated in O(P (d + 1)) (Adams, Baek and Davis, Eurographics 2010):

* Lattice (``init``). Each feature is scaled per axis, ``c_i = f_i sqrt(2/3) (d + 1) /
  sqrt((i + 1)(i + 2))``, and elevated onto the plane ``sum = 0`` of R^(d+1):
  ``e_0 = sum_i c_i``, ``e_j = sum_{i >= j} c_i - j c_(j-1)`` (j = 1..d), all in float32 as the
  fork. The nearest remainder-0 point is ``r_i = (d + 1) rint(e_i / (d + 1))`` (round half to
  even: the SSE build, which every x86-64 build of the fork is). ``rank_i`` = the place of
  ``e_i - r_i`` in descending order (ties: the lower index first), shifted by ``sum rint(...)``
  and wrapped into 0..d together with r. Barycentric weights ``b``: ``b[d - rank_i] += v_i``,
  ``b[d - rank_i + 1] -= v_i`` with ``v_i = (e_i - r_i) / (d + 1)``, then ``b_0 += 1 + b_(d+1)``.
  The d + 1 enclosing vertices have keys ``k_i = r_i + s - (d + 1) [rank_i > d - s]``
  (s = 0..d, coordinates 0..d-1: the last is implied). The fork's hash table (linear probing)
  numbers the keys in the order they are first met (point by point, s = 0..d); here the keys are
  packed into one int64 (mixed radix), made unique by sorting and renumbered by first meeting:
  the same vertex ids (``offset``), and neighbour look-ups become sorted searches. The fork's
  SSE init takes points 4 at a time and fills the last block with points at feature 0: their
  vertices enter its table (and so the blur) though nothing is splatted there; so here too.
* Neighbours along axis j (j = 0..d): ``n1 = k - 1``, ``n1_j = k_j + d``; ``n2 = k + 1``,
  ``n2_j = k_j - d`` (for j = d only the all -1 / all +1 part, as the fork's key has d
  coordinates); a key the lattice lacks is vertex -1, whose value is 0.
* ``compute`` (the fork's seqCompute / sseCompute): splat ``V[o] += b in``, blur along each axis in
  turn ``V'_m = V_m + (V_n1 + V_n2) / 2`` (axes 0..d; d..0 when ``reverse``), slice
  ``out = alpha sum b V[o]`` with ``alpha = 1 / (1 + 2^-d)``.

The blurs along one axis are symmetric matrices (m is n1 of n2(m) and n2 of n1(m)) and slice is
splat transposed, so ``compute(..., reverse=True)`` is the transpose of the forward filter: the
fork's backward pass, and the exact gradient of its forward.

Values are carried in the input's dtype (the fork: float32 whatever Dtype is); the lattice
(features, elevation, barycentric weights) is float32 as the fork's. ``compute`` runs the numba
kernel ``caffepy.math._numba_lattice.lattice_filter`` (the fork's loops, threaded) when
:mod:`caffepy.math.kernels` has numba, else numpy (bincount splat, gathered blurs and slice).
Checked against the fork's compiled modified_permutohedral.cpp on 2-d and 5-d features of up to
40 x 40 points: the same vertex count, offsets, barycentric weights and neighbours, and filter
outputs within float32 rounding (tests/forks/segmentation/test_permutohedral.py keeps one case).
"""
import numpy as np

from ...math import kernels


def _elevate(feat):
    """Lattice coordinates of (P, d) features: rem0 (P, d+1) int64, rank (P, d+1) int64 and
    barycentric weights (P, d+1) float32, as the fork's SSE ``init`` computes them."""
    f = np.asarray(feat, dtype=np.float32)
    P, d = f.shape
    inv_std = np.float32(np.sqrt(2.0 / 3.0) * (d + 1))
    scale = np.array([1.0 / np.sqrt((i + 2.0) * (i + 1.0)) * float(inv_std) for i in range(d)],
                     dtype=np.float32)
    cf = f * scale                                   # (P, d) float32
    # sm accumulates cf[d-1], cf[d-2], ... in that order (float32 sums as the fork's loop)
    tail = np.cumsum(cf[:, ::-1], axis=1, dtype=np.float32)[:, ::-1]   # tail[:, j] = sum_{i>=j}
    elev = np.empty((P, d + 1), dtype=np.float32)
    elev[:, 0] = tail[:, 0]
    for j in range(1, d + 1):
        before = tail[:, j] if j < d else np.float32(0)
        elev[:, j] = before - np.float32(j) * cf[:, j - 1]
    inv1 = np.float32(1.0 / (d + 1))
    v = np.rint(inv1 * elev)                          # round half to even (SSE, MXCSR nearest)
    rem0 = v * np.float32(d + 1)
    vsum = np.cumsum(v, axis=1, dtype=np.float32)[:, -1]
    diff = elev - rem0
    # rank_i = #{j > i: diff_i < diff_j} + #{j < i: not diff_j < diff_i}
    lt = diff[:, :, None] < diff[:, None, :]          # lt[p, i, j] = diff_i < diff_j
    upper = np.triu(np.ones((d + 1, d + 1), dtype=bool), 1)
    rank = (np.sum(lt & upper, axis=2) + np.sum(~lt & upper, axis=1)).astype(np.int64)
    rank += vsum.astype(np.int64)[:, None]
    rem0 = rem0.astype(np.int64)
    low, high = rank < 0, rank > d
    rank += (d + 1) * (low.astype(np.int64) - high)
    rem0 += (d + 1) * (low.astype(np.int64) - high)
    vb = (elev - rem0.astype(np.float32)) * inv1      # v_i, float32
    # ranks are a permutation of 0..d: b[p] = v[i: d - rank_i = p] - v[i: d - rank_i = p - 1]
    by_pos = np.take_along_axis(vb, np.argsort(d - rank, axis=1, kind="stable"), axis=1)
    bary = by_pos.copy()
    bary[:, 1:] -= by_pos[:, :-1]
    bary[:, 0] += np.float32(1) + (-by_pos[:, d])     # wrap around: b_0 += 1 + b_(d+1)
    return rem0, rank, bary


def _radix(keys, d):
    """Mixed-radix multipliers packing rows of ``keys`` into one int64, each coordinate's range
    widened by d + 1 both ways so that every neighbour key packs too (packing is then linear:
    pack(k + delta) = pack(k) + delta . mult). None when the ranges are too wide for 63 bits."""
    lo = keys.min(axis=0) - (d + 1)
    span = keys.max(axis=0) + (d + 1) - lo + 1
    if np.sum(np.log2(span.astype(np.float64))) >= 62:
        return None, None
    return lo, np.cumprod(np.concatenate([[1], span[:-1]])).astype(np.int64)


class Lattice(object):
    """A permutohedral lattice over ``features`` (P, d): ``compute(values)`` with values (C, P)
    (the fork's channel-major layout) returns the filtered (C, P); ``reverse=True`` the transposed
    filter (the fork's backward)."""

    def __init__(self, features):
        features = np.asarray(features, dtype=np.float32)
        P, d = features.shape
        self.P, self.d = P, d
        self.alpha = np.float32(1.0 / (1.0 + 2.0 ** -d))      # float32, as the fork's
        # the fork's SSE init runs 4 points at a time and puts the last block's missing points at
        # feature 0: their vertices enter the hash table (and the blur) but are never splatted
        pad = -P % 4
        rem0, rank, bary = _elevate(np.concatenate([features, np.zeros((pad, d), np.float32)]))
        s = np.arange(d + 1)
        # keys[p, s, i] = rem0_i + s - (d + 1) [rank_i > d - s], i < d
        keys = rem0[:, None, :d] + s[None, :, None] \
            - (d + 1) * (rank[:, None, :d] > (d - s)[None, :, None])
        keys = keys.reshape(-1, d)
        lo, mult = _radix(keys, d)
        if mult is None:
            raise ValueError("the lattice keys span too wide a range to pack (features too "
                             "spread out for their scale)")
        packed = (keys - lo) @ mult
        uniq, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
        # number the vertices in the order the fork's hash table inserts them (first met)
        order = np.argsort(first, kind="stable")
        label = np.empty(len(uniq), dtype=np.int64)
        label[order] = np.arange(len(uniq))
        self.M = len(uniq)
        self._nb = self._work = None
        self.offset = label[inverse.reshape(-1)].reshape(P + pad, d + 1)[:P]  # the fork's offset_
        self.rank, self.bary = rank[:P], bary[:P]                # the fork's rank_, barycentric_
        # neighbours along axis j: n1 = k - 1 (k_j + d at j < d), n2 = k + 1 (k_j - d); looked
        # up for the vertices in sorted-key order, so that the queries are sorted too
        self.blur_neighbors = np.empty((d + 1, 2, self.M), dtype=np.int64)
        for j in range(d + 1):
            for side, sign in ((0, -1), (1, 1)):
                delta = np.full(d, sign, dtype=np.int64)
                if j < d:
                    delta[j] = -sign * d
                query = uniq + delta @ mult
                at = np.minimum(np.searchsorted(uniq, query), self.M - 1)
                self.blur_neighbors[j, side][label] = np.where(uniq[at] == query, label[at], -1)

    def splat(self, values):
        """(C, P) -> lattice values (M + 1, C); row 0 is the 'absent' vertex (always 0)."""
        flat = self.offset.reshape(-1) + 1
        out = np.empty((self.M + 1, values.shape[0]), dtype=values.dtype)
        for c, row in enumerate(values):
            out[:, c] = np.bincount(flat, weights=(self.bary * row[:, None]).reshape(-1),
                                    minlength=self.M + 1)
        return out

    def blur(self, lat, reverse=False):
        axes = range(self.d, -1, -1) if reverse else range(self.d + 1)
        half = lat.dtype.type(0.5)
        for j in axes:
            n1, n2 = self.blur_neighbors[j] + 1
            new = np.zeros_like(lat)
            new[1:] = lat[1:] + half * (lat[n1] + lat[n2])
            lat = new
        return lat

    def slice(self, lat):
        """Lattice values (M + 1, C) -> (C, P), scaled by alpha = 1 / (1 + 2^-d)."""
        alpha = self.alpha
        out = np.zeros((self.P, lat.shape[1]), dtype=lat.dtype)
        for s in range(self.d + 1):
            out += lat[self.offset[:, s] + 1] * self.bary[:, s, None].astype(lat.dtype)
        out *= lat.dtype.type(alpha)
        return out.T

    def compute(self, values, reverse=False):
        """The filter of (C, P) values (a (P,) vector gives a (P,) vector); ``reverse``: its
        transpose. Runs the numba kernel when :mod:`caffepy.math.kernels` has one, else numpy."""
        values = np.asarray(values)
        if values.ndim == 1:
            return self.compute(values[None], reverse)[0]
        if values.dtype not in (np.float32, np.float64):
            values = values.astype(np.float64)
        k = kernels.get()
        if k is None:
            return self.slice(self.blur(self.splat(values), reverse))
        values = np.ascontiguousarray(values)
        if self._nb is None:
            self._nb = (np.ascontiguousarray(self.offset, dtype=np.int64),
                        np.ascontiguousarray(self.bary),
                        np.ascontiguousarray(self.blur_neighbors, dtype=np.int64))
        key = (values.dtype, values.shape[0])
        if self._work is None or self._work[0] != key:      # kept: a layer filters many times
            self._work = (key, [np.empty((self.M + 1, values.shape[0]), values.dtype)
                                for _ in range(2)])
        work = self._work[1]
        out = np.empty_like(values)
        k.lattice_filter(*self._nb, values, bool(reverse),
                         values.dtype.type(self.alpha), work[0], work[1], out)
        return out
