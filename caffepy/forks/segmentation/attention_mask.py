"""AttentionMask (chwilms/AttentionMask, also in chwilms/superpixelRefinement and
harm-matthias-harms/AttentionBox): the layers that pick the attended window positions of its
scale-specific object attention and cut feature windows there. Sources: caffe/src/caffe/layers/
argmax_layer_all.cpp, convertIndices.cpp, splitIndices.cpp, check_att_layer.cpp,
tile_product_layer.cu, sliding_window_index_layer.cu, top_k_old_layer.cu. Where the fork's CPU
functions are NOT_IMPLEMENTED (TileProduct, SlidingWindowIndex, TopKOld) its GPU kernels are the
reference, computed here on the host.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer


def _row_vector(layer, blob, what):
    """The fork's CHECKs that a blob is 1 x 1 x 1 x L; returns L."""
    if blob.num_axes != 4 or tuple(blob.shape[:3]) != (1, 1, 1):
        raise layer.error("%s must be 1 x 1 x 1 x L, got %s" % (what, blob.shape), ShapeError)
    return blob.shape[3]


class _NoGradient(Layer):
    """The fork's Backward_cpu is empty: a backward writes nothing to the bottoms."""

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("ArgMaxAll")
class ArgMaxAllLayer(_NoGradient):
    """ArgMax over the attention positions with K taken from the data. Bottoms: objectness x
    (N x ...) and non-objectness y; the first L = y.shape[3] values of each are compared and

        K = max(#{i < L : x_i > y_i}, 1000)

    (argmax_param.top_k is checked >= 1, and <= x.count(1) without an axis, then not used). As
    BVLC's ArgMax with top_k = K otherwise: values in descending order (ties: the larger index
    first, the fork's std::greater on (value, index) pairs); without ``axis`` the top is N x 1 x K
    (N x 2 x K with out_max_val: indices then values; trailing 1s up to the bottom's axis count);
    with ``axis`` the bottom's shape with K at the axis (values with out_max_val, else indices). K above the number of values along the axis
    is refused (the fork's partial_sort runs past the end). Backward: the fork's is empty.
    prototxt: ``argmax_param { out_max_val top_k axis }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    MIN_K = 1000

    def layer_setup(self, bottom, top):
        p = self.layer_param.argmax_param
        self.out_max_val, self.has_axis = bool(p.out_max_val), p.HasField("axis")
        if p.top_k < 1:
            raise self.error("top_k must not be less than 1")
        if self.has_axis:
            self.axis = bottom[0].canonical_axis_index(p.axis)
        elif p.top_k > bottom[0].count_range(1):
            raise self.error("top_k %d exceeds the %d values per item"
                             % (p.top_k, bottom[0].count_range(1)))

    def reshape(self, bottom, top):
        x, y = bottom
        if y.num_axes < 4:
            raise self.error("bottom[1] needs 4 axes (its shape[3] values are compared), got %s"
                             % (y.shape,), ShapeError)
        n = y.shape[3]
        if x.count < n or y.count < n:
            raise self.error("bottoms %s and %s hold fewer than %d values" % (x.shape, y.shape, n),
                             ShapeError)
        objects = int(np.count_nonzero(x.data.reshape(-1)[:n] > y.data.reshape(-1)[:n]))
        self.k = max(objects, self.MIN_K)
        dim = x.shape[self.axis] if self.has_axis else x.count_range(1)
        if self.k > dim:
            raise self.error("K = max(%d objects, %d) exceeds the %d values to rank"
                             % (objects, self.MIN_K, dim), ShapeError)
        if self.has_axis:
            shape = list(x.shape)
            shape[self.axis] = self.k
        else:
            shape = [1] * max(x.num_axes, 3)
            shape[0], shape[2] = x.shape[0], self.k
            if self.out_max_val:
                shape[1] = 2
        top[0].reshape(*shape)

    def forward_cpu(self, bottom, top):
        x, k = bottom[0].data, self.k
        if self.has_axis:
            v = np.moveaxis(x, self.axis, -1)
        else:
            v = x.reshape(x.shape[0], -1)
        # descending by (value, index): reverse of an ascending lexicographic sort
        idx = np.argsort(v, axis=-1, kind="stable")[..., ::-1][..., :k]
        vals = np.take_along_axis(v, idx, axis=-1)
        if self.has_axis:
            out = vals if self.out_max_val else idx
            top[0].data[...] = np.moveaxis(out, -1, self.axis)
        elif self.out_max_val:
            top[0].data[...] = np.stack([idx, vals], axis=1).reshape(top[0].shape)
        else:
            top[0].data[...] = idx.reshape(top[0].shape)


@register_layer("ConvertIndices")
class ConvertIndicesLayer(_NoGradient):
    """Indices to flags. Bottoms: indices i (1 x 1 x 1 x B, truncated to int), values v
    (1 x 1 x 1 x T). Tops: flags f (1 x 1 x 1 x T) with f[i_b] = 1 and 0 elsewhere, and the
    values at the indices v[i_b] (B x 1 x 1 x 1). An index outside [0, T) is refused (the fork
    writes out of bounds). Backward: the fork's is empty. No parameters.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 2

    def reshape(self, bottom, top):
        b = _row_vector(self, bottom[0], "bottom[0] (indices)")
        t = _row_vector(self, bottom[1], "bottom[1] (values)")
        top[0].reshape(1, 1, 1, t)
        top[1].reshape(b, 1, 1, 1)

    def forward_cpu(self, bottom, top):
        idx = np.trunc(bottom[0].data.reshape(-1)).astype(np.int64)
        t = bottom[1].count
        if idx.size and (idx.min() < 0 or idx.max() >= t):
            raise self.error("index %d outside the %d values of bottom[1]"
                             % (idx.min() if idx.min() < 0 else idx.max(), t))
        flags = top[0].data.reshape(-1)
        flags[...] = 0
        flags[idx] = 1
        top[1].data.reshape(-1)[...] = bottom[1].data.reshape(-1)[idx]


@register_layer("SplitIndices")
class SplitIndicesLayer(_NoGradient):
    """Cuts a 1 x 1 x 1 x S row into pieces as long as the rows of bottoms 1..k: top j - 1 is
    bottom 0's values [L_1 + ... + L_(j-1), L_1 + ... + L_j) as 1 x 1 x 1 x L_j, with
    S = L_1 + ... + L_k (bottoms 1..k give only their length L_j = shape[3]). One top per bottom
    after the first. Backward: the fork's is empty. No parameters.
    """
    min_bottom_blobs = 2
    min_top_blobs = 1

    def reshape(self, bottom, top):
        if len(top) != len(bottom) - 1:
            raise self.error("takes one top per bottom after the first (%d bottoms, %d tops)"
                             % (len(bottom), len(top)))
        _row_vector(self, bottom[1], "bottom[1]")
        lengths = []
        for i, b in enumerate(bottom[1:], 1):
            if b.num_axes < 4:
                raise self.error("bottom[%d] needs 4 axes, got %s" % (i, b.shape), ShapeError)
            lengths.append(b.shape[3])
        s = _row_vector(self, bottom[0], "bottom[0]")
        if s != sum(lengths):
            raise self.error("bottom[0] has %d values, bottoms 1..%d have %d in all"
                             % (s, len(lengths), sum(lengths)), ShapeError)
        self.cuts = np.cumsum([0] + lengths)
        for t, n in zip(top, lengths):
            t.reshape(1, 1, 1, n)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1)
        for j, t in enumerate(top):
            t.data.reshape(-1)[...] = x[self.cuts[j]:self.cuts[j + 1]]


@register_layer("CheckAtt")
class CheckAttLayer(_NoGradient):
    """Makes sure one position is attended: tops 0 and 1 copy objectness x and non-objectness y
    (same 4-D shapes); when no x_i > y_i, the copies' first values become 0.51 and 0.49. Extra
    bottoms and tops are not used (the fork asks for at least two of each). Backward: the fork's
    is empty. No parameters.
    """
    min_bottom_blobs = 2
    min_top_blobs = 2

    def reshape(self, bottom, top):
        x, y = bottom[0], bottom[1]
        if x.num_axes != 4 or x.shape != y.shape:
            raise self.error("bottoms must be two 4-D blobs of one shape, got %s and %s"
                             % (x.shape, y.shape), ShapeError)
        top[0].reshape(*x.shape)
        top[1].reshape(*x.shape)

    def forward_cpu(self, bottom, top):
        x, y = bottom[0].data, bottom[1].data
        top[0].data[...] = x
        top[1].data[...] = y
        if not np.any(x > y):
            top[0].data.reshape(-1)[0] = 0.51
            top[1].data.reshape(-1)[0] = 0.49


@register_layer("TileProduct")
class TileProductLayer(Layer):
    """Multiplies every channel by a one-channel map: top[n, c, h, w] = x[n, c, h, w] m[n, h, w],
    x N x C x H x W, m N x 1 x H x W. Backward (the fork's GPU path, run when x needs a
    gradient): dx = dtop m, and m's diff is written too, dm[n, h, w] = sum_c dtop x (the
    kernel's unguarded += across channels; the sum is what it means). No parameters.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x, m = bottom
        if x.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        n, _, h, w = x.shape
        if m.num_axes < 2 or m.shape[1] != 1 or m.count != n * h * w:
            raise self.error("bottom[1] %s must be %d x 1 x %d x %d" % (m.shape, n, h, w),
                             ShapeError)
        top[0].reshape(*x.shape)

    def _map(self, bottom):
        n, _, h, w = bottom[0].shape
        return bottom[1].data.reshape(n, 1, h, w)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data * self._map(bottom)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff
        bottom[0].diff[...] = dy * self._map(bottom)
        bottom[1].diff.reshape(-1)[...] = np.sum(dy * bottom[0].data, axis=1).reshape(-1)


@register_layer("SlidingWindowIndex")
class SlidingWindowIndexLayer(Layer):
    """Cuts a window_h x window_w window of the feature map x (1 x C x H x W) around every flagged
    position. The flags f (1 x 1 x 1 x (H + 1)(W + 1)) address the (H + 1) x (W + 1) positions
    in raster order; position p = (r, c) with f_p > 0 gives top row sum_{q < p} f_q:

        top[k, :, a, b] = x[:, r - window_h/2 + a, c - window_w/2 + b]   (0 outside the map)

    Top: R x C x window_h x window_w with R = sum |f| (1 when 0; that row stays 0). dx adds each
    window's gradient back where it was cut. window_h and window_w must be even and > 0,
    stride_h / stride_w > 0 (checked, not used). prototxt: ``sliding_window_param { window_h
    window_w stride_h: 1 stride_w: 1 }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "sliding_window_param")
        self.wh, self.ww = int(p.window_h), int(p.window_w)
        for name, v in (("window_h", self.wh), ("window_w", self.ww)):
            if v <= 0 or v % 2:
                raise self.error("%s must be an even int > 0, got %d" % (name, v))
        if p.stride_h <= 0 or p.stride_w <= 0:
            raise self.error("stride_h and stride_w must be > 0")

    def reshape(self, bottom, top):
        x, f = bottom
        if x.num_axes != 4 or x.shape[0] != 1:
            raise self.error("bottom[0] must be 1 x C x H x W, got %s" % (x.shape,), ShapeError)
        _, c, h, w = x.shape
        if _row_vector(self, f, "bottom[1] (flags)") != (h + 1) * (w + 1):
            raise self.error("bottom[1] must hold (H + 1)(W + 1) = %d flags, got %d"
                             % ((h + 1) * (w + 1), f.count), ShapeError)
        self.rows = int(np.sum(np.abs(f.data), dtype=np.float64)) or 1
        top[0].reshape(self.rows, c, self.wh, self.ww)

    def _windows(self, bottom):
        """(top row, bottom rows slice, bottom cols slice, window rows slice, window cols slice)
        per flagged position."""
        _, _, h, w = bottom[0].shape
        flags = bottom[1].data.reshape(-1)
        row = 0
        for p, fp in enumerate(flags):
            if fp > 0:
                r0, c0 = p // (w + 1) - self.wh // 2, p % (w + 1) - self.ww // 2
                if not 0 <= row < self.rows:
                    raise self.error("the flags address row %d of a top with %d rows"
                                     % (row, self.rows))
                rb, cb = slice(max(r0, 0), min(r0 + self.wh, h)), slice(max(c0, 0),
                                                                          min(c0 + self.ww, w))
                yield (row, rb, cb, slice(rb.start - r0, rb.stop - r0),
                       slice(cb.start - c0, cb.stop - c0))
            row = int(row + fp)        # the kernel's int += float

    def forward_cpu(self, bottom, top):
        x, y = bottom[0].data[0], top[0].data
        y[...] = 0
        for k, rb, cb, ra, ca in self._windows(bottom):
            if rb.stop > rb.start and cb.stop > cb.start:
                y[k, :, ra, ca] = x[:, rb, cb]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to the flags")
        if not propagate_down[0]:
            return
        dx, dy = bottom[0].diff[0], top[0].diff
        dx[...] = 0
        for k, rb, cb, ra, ca in self._windows(bottom):
            if rb.stop > rb.start and cb.stop > cb.start:
                dx[:, rb, cb] += dy[k, :, ra, ca]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("TopKOld")
class TopKOldLayer(Layer):
    """Keeps the K best-scoring items of a batch, in their batch order. Bottoms: items x
    (N x ...), scores s (M x ..., M >= N), and a blob whose first axis gives K. Score of item i:
    s_i when s has one value per item, else max(0, s_i1, s_i2, ...) (value 0, the background, left
    out). The first min(K, N) ids of the items sorted by score (descending; ties keep batch order
    here, std::sort's order is unspecified), sorted ascending, pick top 0's rows: top0[j] =
    x[id_j], K x (x's trailing shape); optional top 1: the ids, K x 1 x 1 x 1. Rows j >= N (K > N)
    are 0 here (the fork leaves them unwritten). dx: top 0's gradient at the picked rows, 0
    elsewhere. The fork's Forward_cpu is NOT_IMPLEMENTED; this is its GPU path. No parameters.
    """
    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        x, s, ref = bottom
        if x.num_axes < 1 or s.num_axes < 1 or ref.num_axes < 1:
            raise self.error("bottoms need a first axis", ShapeError)
        if s.shape[0] < x.shape[0]:
            raise self.error("bottom[1] scores %d items, bottom[0] has %d"
                             % (s.shape[0], x.shape[0]), ShapeError)
        self.k = ref.shape[0]
        self.k2 = min(self.k, x.shape[0])
        top[0].reshape(self.k, *x.shape[1:])
        if len(top) == 2:
            top[1].reshape(self.k, 1, 1, 1)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        s = bottom[1].data.reshape(bottom[1].shape[0], -1)[:n]
        score = s[:, 0] if s.shape[1] == 1 else np.maximum(s[:, 1:].max(axis=1), 0)
        order = np.argsort(-score, kind="stable")
        self.ids = np.sort(order[:self.k2])
        top[0].data[...] = 0
        top[0].data[:self.k2] = bottom[0].data[self.ids]
        if len(top) == 2:
            top[1].data[...] = 0
            top[1].data.reshape(-1)[:self.k2] = self.ids

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dx = bottom[0].diff
        dx[...] = 0
        dx[self.ids] = top[0].diff[:self.k2]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
