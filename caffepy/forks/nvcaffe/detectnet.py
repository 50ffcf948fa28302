"""NVCaffe DetectNet's Python layers: ``caffe.layers.detectnet.clustering`` ClusterDetections and
ClusterGroundtruth (grid outputs to box lists, with OpenCV's ``groupRectangles`` in numpy) and
``caffe.layers.detectnet.mean_ap`` ScoreDetections and mAP (box lists to precision / recall).

Grid: the image is ``image_size_x`` x ``image_size_y`` pixels in cells of ``stride``; a cell (y, x)
whose coverage passes the threshold proposes the box of its bbox channels (xl, yt, xr, yb), offset
by the cell's corner (x W / Gx, y H / Gy).

ClusterDetections (``param_str: 'img_x, img_y, stride, cvg_threshold, rect_threshold, rect_eps,
min_height[, num_classes]'``): proposals with coverage >= cvg_threshold are grouped by
:func:`group_rectangles` (rectangles truncated to integers, as OpenCV takes them); groups whose
height >= min_height become ``[xl, yt, xr, yb, log(group size)]``.
ClusterGroundtruth (``param_str: 'img_x, img_y, stride[, num_classes]'``): every cell with
coverage > 0 gives its box, duplicates removed, confidence 0.
Bottoms: coverage N x C x Gy x Gx, boxes N x 4 x Gy x Gx. Tops: one per class, N x 50 x 5 (zeros
after the boxes; values rounded to float16 as DetectNet stores them). Forward only.

ScoreDetections (no param_str): bottoms ground-truth and detected lists N x 50 x 5; rows whose
4 corners are all 0 are padding. Per image, each ground truth in order takes the first detection
not yet taken whose IoU with it is >= 0.7. Top N x 50 x 5: the taken detections [xl, yt, xr,
yb, 1], then the others [.., 2], then the ground truths nobody took [.., 3] (true positives, false
positives, misses), zeros after; rows past 50 are dropped (DetectNet's layer fails there).
mAP (param_str ignored): from those rows, tp, fp, misses counted over the batch; precision =
100 tp / (tp + fp), recall = 100 tp / (tp + misses) (0 for 0 / 0), mAP = precision recall / 100.
Tops: mAP, precision, recall, each of shape (1,).
"""
import math

import numpy as np

from ...layers.python_layer import Layer

MAX_BOXES = 50


_CHUNK = 1 << 22          # pair tests per block of rows (bounds the boolean matrix)


def _roots(parent):
    """Jump every pointer to its root (in place); returns ``parent``."""
    while True:
        up = parent[parent]
        if np.array_equal(up, parent):
            return parent
        parent[:] = up


def _join(parent, u, v):
    """Merge the classes of each pair (u[k], v[k]): every root hooks onto the smaller root, so
    a class's root is its smallest member."""
    while len(u):
        _roots(parent)
        ru, rv = parent[u], parent[v]
        apart = ru != rv
        if not apart.any():
            return
        ru, rv = ru[apart], rv[apart]
        np.minimum.at(parent, np.maximum(ru, rv), np.minimum(ru, rv))
        u, v = u[apart], v[apart]


def group_rectangles(rects, threshold, eps):
    """OpenCV's groupRectangles: (grouped [x, y, w, h] rows, weights).

    Rectangles are equivalent when every edge lies within eps (min widths + min heights) / 2 of
    the other's (transitively); each class of more than ``threshold`` members becomes its mean
    rectangle (the sum times ``1.f / n`` in float32, rounded half to even, as OpenCV computes
    it), unless it lies inside another kept class's rectangle
    grown by eps of its size while that class is larger (or it has fewer than 3 members).
    Classes are numbered in order of their first member. ``threshold`` <= 0 returns the input
    with weights 1. The pair tests run in numpy blocks of rows (a DetectNet grid at 1280 x 1280
    has 6,400 cells, 20 million pairs).
    """
    rects = np.asarray(rects, dtype=np.int64).reshape(-1, 4)
    if threshold <= 0 or not len(rects):
        return rects.copy(), np.ones(len(rects), np.int64)
    count = len(rects)
    parent = np.arange(count)
    x, y, w, h = rects.T
    r, b = x + w, y + h
    rows = max(1, _CHUNK // count)
    for a in range(0, count, rows):
        i = np.arange(a, min(a + rows, count))[:, None]
        delta = eps * (np.minimum(w[i], w) + np.minimum(h[i], h)) * 0.5
        near = ((np.abs(x[i] - x) <= delta) & (np.abs(y[i] - y) <= delta)
                & (np.abs(r[i] - r) <= delta) & (np.abs(b[i] - b) <= delta))
        near &= np.arange(count) > i
        u, v = np.nonzero(near)
        _join(parent, u + a, v)
    roots = _roots(parent)
    _, labels = np.unique(roots, return_inverse=True)   # roots are first members: in order
    labels = labels.reshape(-1)
    n = np.bincount(labels)
    sums = np.zeros((len(n), 4), np.int64)
    np.add.at(sums, labels, rects)
    scale = np.float32(1) / n.astype(np.float32)     # OpenCV: int sum * (1.f / n), in float
    mean = np.rint(sums.astype(np.float32) * scale[:, None]).astype(np.int64)
    big = np.nonzero(n > threshold)[0]
    m, nb = mean[big], n[big]
    dx = np.rint(m[:, 2] * float(eps)).astype(np.int64)  # int width * double eps
    dy = np.rint(m[:, 3] * float(eps)).astype(np.int64)
    r1, r2 = m[:, None, :], m[None, :, :]            # [kept i, kept j]
    inside = ((r1[..., 0] >= r2[..., 0] - dx) & (r1[..., 1] >= r2[..., 1] - dy)
              & (r1[..., 0] + r1[..., 2] <= r2[..., 0] + r2[..., 2] + dx)
              & (r1[..., 1] + r1[..., 3] <= r2[..., 1] + r2[..., 3] + dy)
              & ((nb[None, :] > np.maximum(3, nb)[:, None]) | (nb < 3)[:, None]))
    np.fill_diagonal(inside, False)
    keep = ~inside.any(1)
    return m[keep].reshape(-1, 4), nb[keep].astype(np.int64)


class _Cluster(Layer):
    groundtruth = False
    n_params = 3

    def setup(self, bottom, top):
        try:
            values = [v.strip() for v in self.param_str.split(",")]
            self.size_x, self.size_y, self.stride = (int(v) for v in values[:3])
            self._more(values)
        except (ValueError, IndexError):
            raise ValueError("%s: param_str '%s' is missing values or has a wrong type"
                             % (type(self).__name__, self.param_str))
        if len(top) != self.num_classes:
            raise ValueError("%s: %d tops for %d classes" % (type(self).__name__, len(top),
                                                            self.num_classes))

    def _more(self, values):
        self.num_classes = int(values[3]) if len(values) > 3 else 1

    def reshape(self, bottom, top):
        if bottom[0].data.ndim != 4 or bottom[0].data.shape[1] != self.num_classes:
            raise ValueError("%s: coverage must be N x %d x H x W, got %s"
                             % (type(self).__name__, self.num_classes, bottom[0].data.shape))
        for t in top:
            t.reshape(bottom[0].data.shape[0], MAX_BOXES, 5)

    def _proposals(self, cvg, boxes):
        gx, gy = int(self.size_x / self.stride), int(self.size_y / self.stride)
        cw, ch = self.size_x / gx, self.size_y / gy
        v = cvg[:gy, :gx]
        ys, xs = np.nonzero(v > 0 if self.groundtruth else v >= self.cvg_threshold)
        mx, my = xs * cw, ys * ch
        return np.stack([boxes[0][ys, xs] + mx, boxes[1][ys, xs] + my,
                         boxes[2][ys, xs] + mx, boxes[3][ys, xs] + my], 1)

    def forward(self, bottom, top):
        for c, t in enumerate(top):
            out = np.zeros((bottom[0].data.shape[0], MAX_BOXES, 5))
            for i in range(out.shape[0]):
                found = self._boxes(self._proposals(bottom[0].data[i, c], bottom[1].data[i]))
                if len(found):          # none found: the rows stay zero
                    found = np.asarray(found, np.float16).reshape(len(found), -1)[:MAX_BOXES]
                    out[i, :len(found), :found.shape[1]] = found
            t.data[...] = out

    def backward(self, top, propagate_down, bottom):
        pass


class ClusterGroundtruth(_Cluster):
    """See module doc."""
    groundtruth = True

    def _boxes(self, proposals):
        seen = []
        for row in map(tuple, proposals.tolist()):
            if row not in seen:
                seen.append(row)
        return seen


class ClusterDetections(_Cluster):
    """See module doc."""

    def _more(self, values):
        self.cvg_threshold = float(values[3])
        self.rect_threshold = int(values[4])
        self.rect_eps = float(values[5])
        self.min_height = int(values[6])
        self.num_classes = int(values[7]) if len(values) > 7 else 1

    def _boxes(self, proposals):
        if not proposals.any():
            return []
        xywh = [[int(a), int(b), int(c - a), int(d - b)] for a, b, c, d in proposals.tolist()]
        rects, weights = group_rectangles(xywh, self.rect_threshold, self.rect_eps)
        return [[r[0], r[1], r[0] + r[2], r[1] + r[3], math.log(wt)]
                for r, wt in zip(rects.tolist(), weights.tolist()) if r[3] >= self.min_height]


def box_iou(a, b):
    """mean_ap's iou of [xl, yt, xr, yb] boxes (0 when they do not overlap)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    if ix * iy == 0:
        return 0.0
    return ix * iy / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - ix * iy)


class ScoreDetections(Layer):
    """See module doc."""
    threshold = 0.7

    def reshape(self, bottom, top):
        if len(bottom) != 2 or bottom[0].data.shape[0] != bottom[1].data.shape[0]:
            raise ValueError("ScoreDetections needs two box lists of the same batch, got %s"
                             % [b.data.shape for b in bottom])
        top[0].reshape(bottom[0].data.shape[0], MAX_BOXES, 5)

    def forward(self, bottom, top):
        out = np.zeros((bottom[0].data.shape[0], MAX_BOXES, 5))
        for k in range(out.shape[0]):
            gts = [r for r in bottom[0].data[k, :, :4].tolist() if any(r)]
            dets = [r for r in bottom[1].data[k, :, :4].tolist() if any(r)]
            gt_hit, det_hit = [False] * len(gts), [False] * len(dets)
            for i, g in enumerate(gts):
                for j, d in enumerate(dets):
                    if not det_hit[j] and box_iou(d, g) >= self.threshold:
                        gt_hit[i] = det_hit[j] = True
                        break
            rows = ([d + [1] for d, hit in zip(dets, det_hit) if hit]
                    + [d + [2] for d, hit in zip(dets, det_hit) if not hit]
                    + [g + [3] for g, hit in zip(gts, gt_hit) if not hit])[:MAX_BOXES]
            out[k, :len(rows)] = np.array(rows).reshape(-1, 5)
        top[0].data[...] = out


class mAP(Layer):  # noqa: N801 (DetectNet's class name)
    """See module doc."""

    def reshape(self, bottom, top):
        if len(top) != 3:
            raise ValueError("mAP has three tops (mAP, precision, recall), got %d" % len(top))
        for t in top:
            t.reshape(1)

    def forward(self, bottom, top):
        kind = bottom[0].data[:, :, 4]
        tp, fp, miss = ((kind == c).sum() for c in (1, 2, 3))
        precision = 100.0 * tp / (tp + fp) if tp + fp else 0.0
        recall = 100.0 * tp / (tp + miss) if tp + miss else 0.0
        for t, v in zip(top, (precision * recall / 100.0, precision, recall)):
            t.data[...] = v
