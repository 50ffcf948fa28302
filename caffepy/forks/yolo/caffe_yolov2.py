"""gklz1982/caffe-yolov2: its one-bottom YOLOv2 ``DetectionOutput`` and the form of its
``RegionLoss`` (labels of 30 [class, x, y, w, h] rows per image from its ``BoxData`` reader).

Followed: gklz1982/caffe-yolov2 src/caffe/layers/detection_output_layer.cpp,
src/caffe/layers/region_loss_layer.cpp and include/caffe/util/bbox_util.hpp (get_region_box,
class_index_and_score, Calc_iou, ApplyNms). Its IoU (``Calc_iou`` / ``JaccardOverlap``) clips
both centre/size boxes to [0, 1] first; its NMS is class-agnostic and keeps candidates in their
(row, column, box) order, unsorted: a candidate not yet suppressed suppresses every later one
whose IoU with it is >= ``nms_threshold``.

Box n of cell p = j S + i (S = ``side``; the map's H x W cells are taken in row-major order,
H W = S^2), v = bottom[b, n L : (n+1) L] at that cell (L = 5 + classes):
x = (i + sigmoid(v0)) / S, y = (j + sigmoid(v1)) / S, w = exp(v2) biases[2n] / S,
h = exp(v3) biases[2n+1] / S, o = sigmoid(v4), p = softmax(v5 ..).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_variant
from .output import _sigmoid

MAX_BOXES = 30


def clipped_iou(a, b):
    """The fork's Calc_iou of centre/size boxes (last axis x, y, w, h), broadcasting: both boxes
    clipped to [0, 1], then intersection over union (0 without overlap)."""
    def corners(t):
        return (np.maximum(t[..., 0] - t[..., 2] / 2, 0), np.maximum(t[..., 1] - t[..., 3] / 2, 0),
                np.minimum(t[..., 0] + t[..., 2] / 2, 1), np.minimum(t[..., 1] + t[..., 3] / 2, 1))
    ax0, ay0, ax1, ay1 = corners(np.asarray(a, np.float64))
    bx0, by0, bx1, by1 = corners(np.asarray(b, np.float64))
    iw = np.minimum(ax1, bx1) - np.maximum(ax0, bx0)
    ih = np.minimum(ay1, by1) - np.maximum(ay0, by0)
    size_a = np.where((ax1 < ax0) | (ay1 < ay0), 0.0, (ax1 - ax0) * (ay1 - ay0))
    size_b = np.where((bx1 < bx0) | (by1 < by0), 0.0, (bx1 - bx0) * (by1 - by0))
    inter = iw * ih
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((iw > 0) & (ih > 0), inter / (size_a + size_b - inter), 0.0)


def _cells(layer, blob, side, num, length):
    """bottom (N, num L, H, W) -> (N, S, S, num, L) in the fork's swap order."""
    N, C, H, W = blob.shape
    if C != num * length or H * W != side * side:
        raise layer.error("bottom[0] must be N x %d x H x W with H W = side^2 = %d (num * (5 + "
                          "classes) channels), got %s" % (num * length, side * side, blob.shape),
                          ShapeError)
    v = blob.data.astype(np.float64).reshape(N, num, length, H * W)
    return v.transpose(0, 3, 1, 2).reshape(N, side, side, num, length)


def check_grid(layer, blob, side, num):
    """The fork's count check: H W = side^2 (one-line ShapeError)."""
    if blob.shape[2] * blob.shape[3] != side * side:
        raise layer.error("bottom[0] %s: H W must be side^2 = %d" % (blob.shape, side * side),
                          ShapeError)


def _boxes(v, biases, side):
    """Decoded (x, y, w, h) of every box of v (N, S, S, num, L)."""
    S, num = side, v.shape[3]
    jj, ii = np.meshgrid(np.arange(S), np.arange(S), indexing="ij")
    return np.stack([(ii[:, :, None] + _sigmoid(v[..., 0])) / S,
                     (jj[:, :, None] + _sigmoid(v[..., 1])) / S,
                     np.exp(v[..., 2]) * biases[0:2 * num:2] / S,
                     np.exp(v[..., 3]) * biases[1:2 * num:2] / S], -1)


@register_variant("DetectionOutput", lambda lp: len(lp.bottom) == 1)
class Yolov2DetectionOutputLayer(Layer):
    """gklz1982/caffe-yolov2's ``DetectionOutput``: YOLOv2 region boxes from one map.

    For every box (rows j, columns i, boxes n, in that order): confidence = o max(p), label =
    argmax(p) (0-based, the first on ties); boxes with confidence >= ``confidence_threshold`` go
    to the fork's NMS (module doc). Each kept box is a row [image_id, label, confidence, x, y,
    w, h] (centre / size, normalised; not SSD's corners); nothing kept: one row of -1 with
    image_id 0.

    prototxt (the fork's DetectionOutputParameter): ``detection_output_param { num_classes
    (required) side: 13 num_box: 5 coords: 4 confidence_threshold: 0.01 (the fork's default, used
    when unset) nms_threshold: 0.45 biases: [2 num_box values] label_map_file (names for its
    file output; not read) }``.
    Bottom: 1 x num_box (5 + num_classes) x H x W with H W = side^2; the fork checks a batch of
    1 (CHECK_EQ(num, 1)). Top: 1 x 1 x K x 7. Forward only (the fork has no backward).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_output_param
        if not p.HasField("num_classes"):
            raise self.error("detection_output_param.num_classes is required (Must specify "
                             "num_classes)")
        self.side, self.num = int(p.side), int(p.num_box)
        self.classes = int(p.num_classes)
        self.conf = float(p.confidence_threshold) if p.HasField("confidence_threshold") else 0.01
        self.nms = float(p.nms_threshold)
        self.biases = np.asarray(p.biases, np.float64)
        if len(self.biases) < 2 * self.num:
            raise self.error("needs %d biases (anchor w, h pairs), got %d"
                             % (2 * self.num, len(self.biases)))

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4 or bottom[0].shape[0] != 1:
            raise self.error("bottom[0] must be 1 x C x H x W (the fork takes one image), got %s"
                             % (bottom[0].shape,), ShapeError)
        _cells(self, bottom[0], self.side, self.num, 5 + self.classes)
        top[0].reshape(1, 1, 1, 7)

    def forward_cpu(self, bottom, top):
        v = _cells(self, bottom[0], self.side, self.num, 5 + self.classes)[0]
        boxes = _boxes(v[None], self.biases, self.side)[0].reshape(-1, 4)
        logits = v[..., 5:5 + self.classes]
        prob = np.exp(logits - logits.max(-1, keepdims=True))
        prob /= prob.sum(-1, keepdims=True)
        conf = (_sigmoid(v[..., 4]) * prob.max(-1)).reshape(-1)
        label = prob.argmax(-1).reshape(-1)
        sel = np.flatnonzero(conf >= self.conf)
        alive = np.ones(len(sel), bool)
        for a in range(len(sel) - 1):
            if alive[a]:
                alive[a + 1:] &= ~(clipped_iou(boxes[sel[a]], boxes[sel[a + 1:]]) >= self.nms)
        keep = sel[alive]
        if not len(keep):
            top[0].reshape(1, 1, 1, 7)
            top[0].data[...] = -1
            top[0].data[0, 0, 0, 0] = 0
            return
        top[0].reshape(1, 1, len(keep), 7)
        rows = np.concatenate([np.zeros((len(keep), 1)), label[keep, None], conf[keep, None],
                               boxes[keep]], 1)
        top[0].data[0, 0] = rows

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def is_yolov2_labels(layer, bottom):
    """The fork's label blob: 2 axes, 30 x 5 values per image (its BoxData reader)."""
    return bottom[1].num_axes == 2 and bottom[1].shape[1] == MAX_BOXES * 5


def region_loss_deltas(layer, bottom):
    """The fork's RegionLoss forward: (loss, delta in bottom[0]'s shape); ``layer`` carries
    ``p`` (region_loss_param), ``num``, ``num_class``, ``biases`` and the forward counter ``seen``."""
    p, S, num, C = layer.p, int(layer.p.side), layer.num, layer.num_class
    N = bottom[0].shape[0]
    v = _cells(layer, bottom[0], S, num, 5 + C)
    labels = bottom[1].data.astype(np.float64).reshape(N, MAX_BOXES, 5)
    pred = _boxes(v, layer.biases, S)
    obj = _sigmoid(v[..., 4])
    e = np.exp(v[..., 5:] - v[..., 5:].max(-1, keepdims=True))
    prob = e / e.sum(-1, keepdims=True)
    s01 = _sigmoid(v[..., 0:2])
    D = np.zeros_like(v)
    warm = layer.seen < 12800 // N
    bw, bh = layer.biases[0:2 * num:2], layer.biases[1:2 * num:2]
    for b in range(N):
        rows = labels[b]
        upto = next((t for t in range(MAX_BOXES) if not rows[t, 1]), MAX_BOXES)
        best = (clipped_iou(pred[b][:, :, :, None], rows[None, None, None, :upto, 1:]).max(-1)
                if upto else np.zeros(obj[b].shape))
        D[b, ..., 4] = p.noobject_scale * obj[b] * obj[b] * (1 - obj[b])
        D[b, ..., 4][best > p.thresh] = 0
        if warm:        # the first 12800 images: pull every box towards its anchor at the centre
            D[b, ..., 0:2] = -0.01 * (0.5 - s01[b]) * s01[b] * (1 - s01[b])
            D[b, ..., 2:4] = 0.01 * v[b, ..., 2:4]
        for t in range(MAX_BOXES):
            label, x, y, w, h = rows[t]
            if not w:
                break
            i, j = int(x * S), int(y * S)
            sizes = (np.stack([bw / S, bh / S], 1) if p.bias_match
                     else pred[b, j, i, :, 2:4])
            ious = clipped_iou(np.concatenate([np.zeros((num, 2)), sizes], 1), [0, 0, w, h])
            # the box that takes the truth; when no anchor overlaps, the fork's best_index stays
            # 0 (box 0 of cell 0 of image 0) while its targets keep the truth's cell (i, j)
            at = (b, j, i, int(np.argmax(ious))) if ious.max() > 0 else (0, 0, 0, 0)
            n = at[3]
            c = p.coord_scale
            sx, sy = s01[at]
            D[at + (0,)] = -c * (x * S - i - sx) * sx * (1 - sx)
            D[at + (1,)] = -c * (y * S - j - sy) * sy * (1 - sy)
            D[at + (2,)] = -c * (np.log(w * S / bw[n]) - v[at + (2,)])
            D[at + (3,)] = -c * (np.log(h * S / bh[n]) - v[at + (3,)])
            on = obj[at]
            D[at + (4,)] = -p.object_scale * (1 - on) * on * (1 - on)
            onehot = np.zeros(C)
            onehot[int(label)] = 1
            D[at][5:] = -p.class_scale * (onehot - prob[at])
    layer.seen += 1
    delta = D.reshape(N, S * S, num, 5 + C).transpose(0, 2, 3, 1).reshape(bottom[0].shape)
    return float(np.square(D).sum()), delta
