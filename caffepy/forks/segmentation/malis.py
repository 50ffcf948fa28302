"""The MALIS layers of naibaf7/caffe (the OpenCL branch; also Betterthinking/caffe and
manishrdmishra/Thesis): Affinity, ConnectedComponent and MalisLoss, as its
``src/caffe/layers/{affinity,connected_component,malis_loss}_layer.cpp`` compute them (HEAD
2996015; 867c6bf differs only in integer types for these three). MalisLoss follows Turaga et al.'s
MALIS (NIPS 2009, srinituraga/malis's malis_loss_mex.cpp).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


@register_layer("Affinity")
class AffinityLayer(Layer):
    """A 2-edge affinity graph from one channel of each bottom (image 0 only).

    For bottom b with o = ``affinity_param.offset[b]`` (0 when not given) and p = x[0, o]:
    ``y[0, 0, i, j] = min(p[i, j], p[i + 1, j])`` (the Y edge) and ``y[0, 1, i, j] = min(p[i, j],
    p[i, j + 1])`` (the X edge) for i < H - 1, j < W - 1; the last row and column are 0.
    Backward (the fork's): for each such edge with top diff l, ``dx[0, o, i, j] += l`` and
    ``dx[0, (o + 1) % 2, i, j] -= l``. The fork picks the pixel to credit from a buffer of argmin
    indices that it reads from the buffer's diff, which nothing writes (all 0), so every edge is
    credited to its centre pixel (i, j) whichever end is the minimum; the complementary channel
    (o + 1) % 2 (of a 2-channel probability map) gets the opposite. That is the fork's update, not
    the derivative of its forward, so no gradient check applies; caffepy computes the same.

    prototxt: ``affinity_param { offset* }`` (one per bottom). Bottoms: N x C x H x W each (C >= 2
    for the backward); tops: one 1 x 2 x H x W per bottom.
    """
    min_bottom_blobs = 1
    equal_num_bottom_top_blobs = True

    def layer_setup(self, bottom, top):
        offsets = list(self.layer_param.affinity_param.offset)[:len(bottom)]
        self.offsets = [int(o) for o in offsets] + [0] * (len(bottom) - len(offsets))

    def reshape(self, bottom, top):
        for b, (x, o) in enumerate(zip(bottom, self.offsets)):
            if x.num_axes != 4:
                raise self.error("bottom %d must be N x C x H x W, got %s" % (b, x.shape),
                                 ShapeError)
            if not 0 <= o < x.shape[1]:
                raise self.error("offset %d of bottom %d is outside its %d channels"
                                 % (o, b, x.shape[1]))
            top[b].reshape((1, 2) + tuple(x.shape[2:]))

    def forward_cpu(self, bottom, top):
        for x, y, o in zip(bottom, top, self.offsets):
            p = x.data[0, o]
            y.data[...] = 0
            y.data[0, 0, :-1, :-1] = np.minimum(p[:-1, :-1], p[1:, :-1])
            y.data[0, 1, :-1, :-1] = np.minimum(p[:-1, :-1], p[:-1, 1:])

    def backward_cpu(self, top, propagate_down, bottom):
        for b, (x, y, o) in enumerate(zip(bottom, top, self.offsets)):
            if not propagate_down[b]:
                continue
            if x.shape[1] < 2:
                raise self.error("bottom %d needs 2 channels for the backward (the fork writes "
                                 "channel (offset + 1) %% 2)" % b)
            x.diff[...] = 0
            g = y.diff[0, 0, :-1, :-1] + y.diff[0, 1, :-1, :-1]
            x.diff[0, o, :-1, :-1] += g
            x.diff[0, (o + 1) % 2, :-1, :-1] -= g


@register_layer("ConnectedComponent")
class ConnectedComponentLayer(Layer):
    """Relabels each map into its 4-connected components (OpenCV flood fill).

    Per (n, c) map: values are taken as C++ ints (truncated), stored in a signed 8-bit image
    (so v is read back as ``int8(v mod 256)``); m = the largest int value. Scanning in raster
    order, every pixel not 0 and not yet relabeled starts a flood fill (4-connected, equal
    values) with label m + 1, m + 2, ...; relabeled pixels keep their new label, 0 stays 0.
    Top: the labels, bottom's shape. No backward (the fork's Backward_cpu returns at once).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("the bottom must be N x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        from scipy import ndimage
        N, C, H, W = bottom[0].shape
        four = ndimage.generate_binary_structure(2, 1)
        for n in range(N):
            for c in range(C):
                v = np.trunc(bottom[0].data[n, c]).astype(np.int64)
                top_label = max(int(v.max()), 0)
                stored = (v & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64)
                comps = []                      # (first raster index, mask)
                for value in np.unique(stored[stored != 0]):
                    lab, k = ndimage.label(stored == value, structure=four)
                    flat = lab.ravel()
                    first = ndimage.minimum(np.arange(flat.size), flat, np.arange(1, k + 1))
                    comps += [(int(f), lab == i + 1) for i, f in enumerate(np.atleast_1d(first))]
                out = np.where(stored == 0, 0, stored)
                for rank, (_, mask) in enumerate(sorted(comps, key=lambda t: t[0])):
                    out[mask] = top_label + 1 + rank
                top[0].data[n, c] = out

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""


def _malis(weights, seg, offsets, pos):
    """One MALIS pass (malis_loss_mex.cpp as the fork has it) over an E x Z x Y x X affinity
    array and a Z x Y x X segmentation (0 = unlabelled): Kruskal over the in-bounds edges by
    decreasing weight (ties: lower edge index first here; the fork's std::sort leaves their
    order unspecified, which changes which of equal edges gets the pairs); each merge of two
    sets adds, for every pair of labels (a in one, b in the other, counts na, nb) with a == b
    (pos) or a != b (not pos), ``dl = (1 - w)`` (pos) or ``-w``: ``loss += dl^2 na nb``,
    ``dloss[e] += dl na nb``; then ``dloss[e] /= P`` and ``loss / P`` at the end, P = the
    number of same-label pairs (pos) or of different-label pairs (not pos) among the labelled
    voxels (0 when P is 0)."""
    E = weights.shape[0]
    dims = weights.shape[1:]
    nvert = int(np.prod(dims))
    flat_seg = seg.ravel()
    labels, sizes = np.unique(flat_seg[flat_seg != 0], return_counts=True)
    n_lab = int(sizes.sum())
    n_pos = int(np.sum(sizes * (sizes - 1) // 2))
    norm = n_pos if pos else n_lab * (n_lab - 1) // 2 - n_pos
    coords = np.indices(dims).reshape(3, -1)
    stride = np.array([dims[1] * dims[2], dims[2], 1])
    edges, partner = [], []
    for e in range(E):
        ok = np.all((coords + offsets[e][:, None] >= 0)
                    & (coords + offsets[e][:, None] < np.array(dims)[:, None]), axis=0)
        v1 = np.flatnonzero(ok)
        edges.append(e * nvert + v1)
        partner.append(v1 + int(offsets[e] @ stride))
    edges, partner = np.concatenate(edges), np.concatenate(partner)
    w = weights.ravel()
    order = np.argsort(-w[edges], kind="stable")
    parent = np.arange(nvert)
    overlap = [{int(flat_seg[i]): 1} if flat_seg[i] != 0 else {} for i in range(nvert)]

    def find(i):
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    dloss = np.zeros(w.size)
    loss = 0.0
    for k in order:
        edge = int(edges[k])
        s1, s2 = find(edge % nvert), find(int(partner[k]))
        if s1 == s2:
            continue
        dl_sum = 0.0
        for a, na in overlap[s1].items():
            for b, nb in overlap[s2].items():
                if (a == b) == pos:
                    dl = (1.0 - w[edge]) if pos else -float(w[edge])
                    loss += dl * dl * na * nb
                    dl_sum += dl * na * nb
        dloss[edge] = dl_sum / norm if norm > 0 else 0.0
        parent[s2] = s1
        for b, nb in overlap[s2].items():
            overlap[s1][b] = overlap[s1].get(b, 0) + nb
        overlap[s2] = {}
    return (loss / norm if norm > 0 else 0.0), dloss.reshape(weights.shape)


@register_layer("MalisLoss")
class MalisLossLayer(LossLayer):
    """MALIS loss of a predicted affinity graph against a segmentation.

    Bottoms: predicted affinities A (N x E x [Z x] [Y x] X, E edges), ground-truth affinities G
    (same shape), the segmentation S (N x 1 or N x 2 x the spatial axes; with 2 channels channel 0
    is used for the negative pass and channel 1 for the positive one), optionally the edge
    offsets (E x 3: dz, dy, dx each). Without them the edges are the positive unit steps of the
    last E of (z, y, x). Per image n:
      loss_n = 0.5 (malis(max(A, G), S, neg) + malis(min(A, G), S, pos))
    (:func:`_malis`: Kruskal's maximum spanning tree, the squared error of each merged pair),
    top[0] = sum_n loss_n / N (accumulated in float32 as the fork's ``float loss``).
    top[1] (optional) = A.
    Backward (the fork's): ``dA = -(dloss_neg + dloss_pos) / 2``, not scaled by the top's diff
    (the loss weight), nor by 1 / N; and since the fork clears both dloss buffers (the whole
    batch) before each image, only the last image's entries are nonzero. No gradient through the
    min / max with G is masked either. That update is not the derivative of the forward, so no
    gradient check applies; caffepy computes the same. Negative edge offsets are refused (the
    fork's linear offsets are unsigned there).
    No prototxt parameters.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 3
    max_bottom_blobs = 4
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        a, g, s = bottom[:3]
        if not 3 <= a.num_axes <= 5:
            raise self.error("the affinities must have 3 to 5 axes, got %s" % (a.shape,),
                             ShapeError)
        if tuple(g.shape) != tuple(a.shape):
            raise self.shape_mismatch("the ground-truth affinities must have the predicted ones' "
                                      "shape", 1, 0, bottom)
        want = (a.shape[0], s.shape[1] if s.num_axes > 1 else 1) + tuple(a.shape[2:])
        if tuple(s.shape) != want or want[1] not in (1, 2):
            raise self.needs("the segmentation must be %s (1 or 2 channels), got %s"
                             % ((a.shape[0], 1) + tuple(a.shape[2:]), s.shape),
                             [(2, (a.shape[0], 1) + tuple(a.shape[2:]), None)])
        if len(bottom) == 4 and bottom[3].count < 3 * a.shape[1]:
            raise self.error("the edge offsets need 3 values per edge (%d), got %s"
                             % (3 * a.shape[1], bottom[3].shape), ShapeError)
        if len(bottom) == 3 and a.shape[1] > 3:
            raise self.error("%d edges need the offsets bottom (the default has at most 3)"
                             % a.shape[1])
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(a.shape)

    def _offsets(self, bottom, E):
        if len(bottom) == 4:
            off = np.trunc(bottom[3].data.ravel()[:3 * E]).astype(np.int64).reshape(E, 3)
            if (off < 0).any():
                raise self.error("negative edge offsets are not supported")
            return off
        return np.eye(3, dtype=np.int64)[3 - E:]

    def forward_cpu(self, bottom, top):
        a, g, s = (b.data for b in bottom[:3])
        N, E = a.shape[:2]
        spatial = (1,) * (5 - a.ndim) + tuple(a.shape[2:])
        off = self._offsets(bottom, E)
        loss = np.float32(0)
        self.dloss = np.zeros(a.shape)
        for n in range(N):
            self.dloss[...] = 0
            seg = s[n].reshape((s.shape[1],) + spatial)
            hi = np.maximum(a[n], g[n]).reshape((E,) + spatial).astype(np.float64)
            lo = np.minimum(a[n], g[n]).reshape((E,) + spatial).astype(np.float64)
            l_neg, d_neg = _malis(hi, seg[0], off, False)
            l_pos, d_pos = _malis(lo, seg[-1], off, True)
            for part in (l_neg, l_pos):     # float loss += 0.5 * (Dtype) loss_out
                loss = np.float32(float(loss) + 0.5 * float(self.dtype.type(part)))
            self.dloss[n] = (d_neg + d_pos).reshape(a.shape[1:])
        top[0].data[...] = loss / np.float32(N)
        if len(top) > 1:
            top[1].data[...] = a

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = -self.dloss / 2.0
