"""StevenHickson's ``Segmentation`` layer (StevenHickson/caffe-windows, branch segLayer,
src/caffe/layers/segmentation_layer.cpp; the SemanticLabelingDemo nets): Felzenszwalb-Huttenlocher
graph segmentation of each image, one region of interest per segment (boxes an ROIPooling layer
reads), with the segment map or each segment's most frequent label.
"""
import math

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer

PLACEHOLDER_SEGMENTS = 100      # the fork's shape before a forward (its num_segments_)


def _smooth_rows(plane, sigma):
    """The fork's iSmooth: its normalised Gaussian applied twice along each row (its
    convolve_even writes untransposed, so neither pass runs down the columns), edges clamped."""
    sigma = max(sigma, 0.01)
    n = int(math.ceil(sigma * 4.0)) + 1
    mask = np.exp(-0.5 * (np.arange(n) / sigma) ** 2)
    mask /= 2 * np.abs(mask[1:]).sum() + abs(mask[0])
    w = plane.shape[1]
    cols = np.arange(w)
    out = plane
    for _ in range(2):
        src = out
        out = mask[0] * src
        for i in range(1, n):
            out = out + mask[i] * (src[:, np.maximum(cols - i, 0)] + src[:, np.minimum(cols + i, w - 1)])
    return out


def _edges(image, sigma):
    """Pixel pairs (a, b) and weights: each pixel's right, down, down-right and up-right
    neighbours, in the fork's raster order; weight = colour distance after smoothing."""
    c, h, w = image.shape
    sm = np.stack([_smooth_rows(image[k].astype(np.float64), sigma) for k in range(c)])
    idx = np.arange(h * w).reshape(h, w)
    kinds = []
    for dy, dx in ((0, 1), (1, 0), (1, 1), (-1, 1)):
        a = np.full((h, w), -1)
        ys, ye = max(0, -dy), h - max(0, dy)
        xs, xe = 0, w - dx
        a[ys:ye, xs:xe] = idx[ys:ye, xs:xe]
        b = np.full((h, w), -1)
        b[ys:ye, xs:xe] = idx[ys + dy:ye + dy, xs + dx:xe + dx]
        kinds.append((a.reshape(-1), b.reshape(-1)))
    a = np.stack([k[0] for k in kinds], axis=1).reshape(-1)
    b = np.stack([k[1] for k in kinds], axis=1).reshape(-1)
    ok = a >= 0
    a, b = a[ok], b[ok]
    flat = sm.reshape(c, -1)
    wgt = np.sqrt(((flat[:, a] - flat[:, b]) ** 2).sum(axis=0))
    return a, b, wgt


def fh_segment(image, sigma, k, min_size):
    """Segment ids (H x W, numbered from 0 in raster order of first appearance) and their count."""
    c, h, w = image.shape
    a, b, wgt = _edges(image, sigma)
    order = np.argsort(wgt, kind="stable")
    a, b, wgt = a[order].tolist(), b[order].tolist(), wgt[order].tolist()
    n = h * w
    parent, rank, size = list(range(n)), [0] * n, [1] * n
    thresh = [k] * n

    def find(x):
        y = x
        while y != parent[y]:
            y = parent[y]
        parent[x] = y
        return y

    def join(x, y):
        if rank[x] > rank[y]:
            parent[y] = x
            size[x] += size[y]
        else:
            parent[x] = y
            size[y] += size[x]
            if rank[x] == rank[y]:
                rank[y] += 1

    for ea, eb, ew in zip(a, b, wgt):
        ra, rb = find(ea), find(eb)
        if ra != rb and ew <= thresh[ra] and ew <= thresh[rb]:
            join(ra, rb)
            ra = find(ra)
            thresh[ra] = ew + k / size[ra]
    for ea, eb in zip(a, b):
        ra, rb = find(ea), find(eb)
        if ra != rb and (size[ra] < min_size or size[rb] < min_size):
            join(ra, rb)
    roots = np.array([find(i) for i in range(n)])
    _, first, inverse = np.unique(roots, return_index=True, return_inverse=True)
    rank_of = np.argsort(np.argsort(first))          # ids in order of first appearance
    return rank_of[inverse].reshape(h, w), len(first)


@register_layer("Segmentation")
class SegmentationLayer(Layer):
    """Felzenszwalb-Huttenlocher segmentation (method 0) of every image: colour distances of
    smoothed pixels (sigma = ``smoothing``) over the 8-neighbourhood graph, edges merged in
    increasing weight while w <= min(Int(C) + k / |C|) of both components, then components
    under ``min_size`` pixels merged along the sorted edges. Ties between equal weights are taken
    in raster order (the fork's std::sort leaves their order open). Per segment (numbered across
    the batch):

        bboxes[s] = [n, x0, y0, x1, y1]: its pixels' extent grown by ``bbox_extension``, x0 clamped
        to [0, W - 2], x1 to [1, W - 1] (rows alike);

    with a label bottom, top 1 is each segment's most frequent label (an integer histogram of
    0..254 over rows y0 .. y1 - 2, columns x0 .. x1 - 2, as the fork's MostOccuringValue cuts the
    box); without one, top 1 (or top 2 after the labels) is the segment map N x 1 x H x W.
    Until a forward, the tops hold 100 segments (the fork's placeholder). With ``max_k`` > 0 each
    image takes k = min_k + a random integer below max_k - min_k. No gradient (the outputs are
    discrete); the fork keeps only the boxes that fit the blob it had (100 rows) once a batch
    makes more, caffepy keeps all. prototxt: ``seg_param { method: 0 k: 200 min_k: 0 max_k: 0
    min_size: 200 smoothing: 0.5 bbox_extension: 3 }`` (s, m, iter: the fork's unfinished SLIC,
    method 1, refused). Bottoms: images N x 3 x H x W [, labels N x 1 x H x W].
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 3

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "seg_param")
        if p.method != 0:
            raise self.error("only method 0 (Felzenszwalb-Huttenlocher) is implemented; the "
                             "fork's SLIC (method 1) is unfinished there")
        self.ext, self.sigma, self.k = int(p.bbox_extension), float(p.smoothing), float(p.k)
        self.min_k, self.max_k, self.min_size = float(p.min_k), float(p.max_k), int(p.min_size)
        self.labels = len(bottom) == 2
        if len(top) == 3 and not self.labels:
            raise self.error("three tops need a label bottom")
        self.maps = len(top) == 3 or (len(top) == 2 and not self.labels)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4 or x.shape[1] < 3:
            raise self.error("images must be N x 3 x H x W, got %s" % (x.shape,), ShapeError)
        if self.labels and (bottom[1].num_axes != 4 or bottom[1].shape[0] != x.shape[0]
                            or bottom[1].shape[2:] != x.shape[2:]):
            raise self.error("labels %s must be N x 1 x H x W for images %s"
                             % (bottom[1].shape, x.shape), ShapeError)
        top[0].reshape(PLACEHOLDER_SEGMENTS, 5, 1, 1)
        if self.labels and len(top) > 1:
            top[1].reshape(PLACEHOLDER_SEGMENTS)
        if self.maps:
            top[-1].reshape(x.shape[0], 1, x.shape[2], x.shape[3])

    def _k(self):
        if self.max_k != 0:
            return float(self.rng().integers(0, int(self.max_k - self.min_k)) + self.min_k)
        return self.k

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        n, _, h, w = x.shape
        rows, labels, maps, start = [], [], [], 0
        for i in range(n):
            seg, count = fh_segment(x[i, :3], self.sigma, self._k(), self.min_size)
            ys, xs = np.indices(seg.shape)
            flat = seg.reshape(-1)
            x0 = np.full(count, w)
            np.minimum.at(x0, flat, xs.reshape(-1))
            y0 = np.full(count, h)
            np.minimum.at(y0, flat, ys.reshape(-1))
            x1 = np.zeros(count, np.int64)
            np.maximum.at(x1, flat, xs.reshape(-1))
            y1 = np.zeros(count, np.int64)
            np.maximum.at(y1, flat, ys.reshape(-1))
            x0 = np.clip(x0 - self.ext, 0, w - 2)
            y0 = np.clip(y0 - self.ext, 0, h - 2)
            x1 = np.clip(x1 + self.ext, 1, w - 1)
            y1 = np.clip(y1 + self.ext, 1, h - 1)
            rows.append(np.stack([np.full(count, i), x0, y0, x1, y1], axis=1))
            if self.labels:
                lab = bottom[1].data[i, 0]
                for s in range(count):
                    bw, bh = x1[s] - x0[s], y1[s] - y0[s]
                    bw, bh = min(max(bw, 1), bw - 1), min(max(bh, 1), bh - 1)
                    region = lab[y0[s]:y0[s] + max(bh, 0), x0[s]:x0[s] + max(bw, 0)]
                    v = region.astype(np.int64).reshape(-1)
                    hist = np.bincount(v[(v >= 0) & (v < 255)], minlength=255)
                    labels.append(int(np.argmax(hist)))
            maps.append(seg + start)
            start += count
        boxes = np.concatenate(rows)
        top[0].reshape(len(boxes), 5, 1, 1)
        top[0].data[...] = boxes.reshape(top[0].shape)
        if self.labels and len(top) > 1:
            top[1].reshape(len(boxes))
            top[1].data[...] = labels
        if self.maps:
            top[-1].data[...] = np.stack(maps)[:, None]

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = 0
