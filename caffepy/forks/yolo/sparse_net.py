"""zhangnju/sparse_net's YOLOv2 layers: ``Region`` (deploy: boxes and class scores of the first
image) and its form of ``RegionLoss``, both configured by its ``region_loss_param`` spelling
(``num_classes``, ``threshold``, ``batch``; proto/additions.d/census_forks3.json).

Its training nets' ``transform_param { random: true }`` (census_forks3.json) is read by its
BoxData reader only (src/caffe/data_transformer.cpp: a random crop of 70-100 % of the image,
resized back, the boxes re-expressed in it; TRAIN only): top shapes stay those of
box_data_layer.cpp (images as stored, labels N x 150), which is all caffepy.zoo takes from
BoxData.

Followed: src/caffe/layers/region_layer.cpp, src/caffe/layers/region_loss_layer.cpp and
include/caffe/util/region_util.hpp, include/caffe/util/bbox_util.hpp (box_iou) of the fork.

The bottom is N x num L x S x S (S = ``side``, L = 5 + C, C = ``num_classes``); box n of cell
(row j, column i) holds v = bottom[b, n L : (n+1) L, j, i]. The fork's activated copy O:
O0,1 = sigmoid(v0,1), O2,3 = v2,3, O4 = sigmoid(v4), O5.. = softmax(v5..) (``softmax``; else
v5..). Its box: x = (i + O0) / S, y = (j + O1) / S, w = exp(O2) biases[2n] / S,
h = exp(O3) biases[2n+1] / S; IoUs are of centre / size boxes, 0 without overlap.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from .loss import _center_iou

MAX_TRUTHS = 30


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def uses_fork_spelling(lp):
    """Whether a layer sets one of sparse_net's own region_loss_param fields."""
    p = lp.region_loss_param
    return any(p.HasField(name) for name in ("num_classes", "threshold", "batch"))


class _SparseNetRegion(Layer):
    """The two layers' setup: parameters and the fork's count check."""

    def layer_setup(self, bottom, top):
        p = self.layer_param.region_loss_param
        if p.coords != 4:
            raise self.error("only coords: 4 is supported, got %d" % p.coords)
        for name in ("softmax_tree", "class_map"):
            if getattr(p, name):
                raise self.error("region_loss_param.%s (YOLO9000's class tree / label map file) "
                                 "is not supported" % name)
        self.p, self.side, self.num = p, int(p.side), int(p.num)
        self.classes, self.thresh = int(p.num_classes), float(p.threshold)
        self.length = 5 + self.classes
        self.biases = np.asarray(p.biases, np.float64)
        if len(self.biases) < 2 * self.num:
            raise self.error("needs %d biases (anchor w, h pairs), got %d"
                             % (2 * self.num, len(self.biases)))

    def _check_input(self, blob):
        want = self.side * self.side * self.num * self.length
        if blob.num_axes < 2 or blob.count_range(1) != want:
            raise self.error("bottom[0] must hold side^2 num (5 + num_classes) = %d values per "
                             "image, got %s" % (want, blob.shape), ShapeError)

    def _activated(self, data):
        """(N, num, L, S*S) float64: the fork's activated copy O (module doc)."""
        S2 = self.side * self.side
        o = data.astype(np.float64).reshape(-1, self.num, self.length, S2).copy()
        o[:, :, 0:2] = _sigmoid(o[:, :, 0:2])
        o[:, :, 4] = _sigmoid(o[:, :, 4])
        if self.p.softmax:
            c = o[:, :, 5:]
            e = np.exp(c - c.max(axis=2, keepdims=True))
            o[:, :, 5:] = e / e.sum(axis=2, keepdims=True)
        return o

    def _boxes(self, o):
        """(..., num, S*S, 4): the box of every (image, n, cell) of O."""
        S = self.side
        cell = np.arange(S * S)
        col, row = cell % S, cell // S
        bw = self.biases[0:2 * self.num:2, None]
        bh = self.biases[1:2 * self.num:2, None]
        return np.stack([(col + o[..., 0, :]) / S, (row + o[..., 1, :]) / S,
                         np.exp(o[..., 2, :]) * bw / S, np.exp(o[..., 3, :]) * bh / S], -1)


@register_layer("Region")
class SparseNetRegionLayer(_SparseNetRegion):
    """zhangnju/sparse_net's ``Region``: the decoded boxes and thresholded class scores of the
    FIRST image of the batch (the fork's get_region_boxes reads image 0 only).

        box[n, j, i] = (x, y, w, h) of box n of cell (j, i)          (module doc)
        prob[n, j, i, c] = s_c if s_c > threshold else 0,  s_c = O4 O(5 + c),  c < C
        prob[n, j, i, C] = m if m > threshold else 0,      m = max(0, max_c s_c)

    prototxt: ``region_loss_param { side: 13 num_classes: 20 coords: 4 (only 4) num: 5
    softmax: 1 threshold: 0.2 biases: [2 num values] batch: 1 }`` (``batch``: how many images the
    fork activates in its scratch copy; the tops read image 0 either way). Bottom: N x num (5 + C)
    x side x side values. Tops: box (num, side, side, 4), prob (num, side, side, C + 1).
    Forward only (the fork's backward is NOT_IMPLEMENTED).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 2

    def reshape(self, bottom, top):
        self._check_input(bottom[0])
        S = self.side
        top[0].reshape((self.num, S, S, 4))
        top[1].reshape((self.num, S, S, self.classes + 1))

    def forward_cpu(self, bottom, top):
        o = self._activated(bottom[0].data[:1])[0]
        top[0].data[...] = self._boxes(o).reshape(top[0].shape)
        scores = o[:, 4:5, :] * o[:, 5:, :]                      # (num, C, S*S)
        best = np.maximum(scores.max(axis=1), 0.0)
        prob = np.concatenate([scores, best[:, None]], axis=1)
        prob = np.where(prob > self.thresh, prob, 0.0)
        top[1].data[...] = prob.transpose(0, 2, 1).reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("has no backward (the fork's is NOT_IMPLEMENTED)")


@register_variant("RegionLoss", uses_fork_spelling)
class SparseNetRegionLossLayer(_SparseNetRegion):
    """zhangnju/sparse_net's ``RegionLoss`` (taken when a layer sets ``num_classes``,
    ``threshold`` or ``batch``). Labels: image b's truths are the rows of 5 values (class, x, y,
    w, h) at flat offset 150 b of bottom 1, up to 30, ending at the first with x = 0. Delta D
    over O (module doc), zero but for:

      * every box: D4 = -noobject_scale O4, 0 when its best IoU with a truth > ``threshold``;
      * every truth, in order, at cell (j, i) = (int(y S), int(x S)): the box n whose box moved
        to (0, 0) (with the anchor's size when ``bias_match``) has the best IoU with (0, 0, w, h)
        (the first on ties, n = 0 when all are 0) gets, with c = coord_scale (2 - w h),
        D0 = c (x S - i - O0), D1 = c (y S - j - O1), D2 = c (log(w S / biases[2n]) - O2),
        D3 = c (log(h S / biases[2n+1]) - O3); D4 = object_scale (t - O4) with t = the IoU of
        its box and the truth when ``rescore`` else 1; classes D5+k = class_scale ([k = class]
        - O5+k), or, without ``softmax`` and with D5 already set, only D5+class =
        class_scale (1 - O5+class). A later truth on the same box overwrites.

    loss = sum(D^2) (not divided by N). Backward: bottom[0] diff = -top_diff D: the fork's
    darknet delta, not the derivative of its loss (it does not chain the sigmoids either), so
    the tests check it against D rather than against numerical differences.

    prototxt: ``region_loss_param { side num_classes coords: 4 num softmax bias_match: 1
    rescore: 1 object_scale: 1 noobject_scale: 0.5 class_scale: 1 coord_scale: 5
    threshold: 0.2 biases }`` (jitter, absolute, random, batch: read by the fork, used by
    nothing it computes). Bottoms: N x num (5 + C) x side x side, labels N x 30 num (the fork's
    CHECK). Top: the scalar loss.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def reshape(self, bottom, top):
        self._check_input(bottom[0])
        n = bottom[0].shape[0]
        per = bottom[1].count_range(1) if bottom[1].num_axes > 1 else 1
        if bottom[1].shape[0] != n or per != MAX_TRUTHS * self.num:
            raise self.needs("the labels must hold 30 num = %d values per image (the fork's "
                             "check), got %s" % (MAX_TRUTHS * self.num, bottom[1].shape),
                             [(1, (n, MAX_TRUTHS * self.num), None)])
        if per < MAX_TRUTHS * 5:
            raise self.error("the fork reads 150 label values per image at a stride of 150 "
                             "(num >= 5); %s holds fewer" % (bottom[1].shape,), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        p, S, num = self.p, self.side, self.num
        o = self._activated(bottom[0].data)
        boxes = self._boxes(o)                                   # (N, num, S*S, 4)
        flat = bottom[1].data.astype(np.float64).ravel()
        D = np.zeros_like(o)
        for b in range(o.shape[0]):
            rows = flat[b * MAX_TRUTHS * 5:(b + 1) * MAX_TRUTHS * 5].reshape(MAX_TRUTHS, 5)
            upto = next((t for t in range(MAX_TRUTHS) if rows[t, 1] == 0), MAX_TRUTHS)
            truths = rows[:upto]
            D[b, :, 4] = -p.noobject_scale * o[b, :, 4]
            if upto:
                best = _center_iou(boxes[b][:, :, None], truths[None, None, :, 1:]).max(-1)
                D[b, :, 4][best > self.thresh] = 0
            for label, x, y, w, h in truths:
                self._truth(b, int(label), x, y, w, h, o, boxes, D)
        self.delta = D
        top[0].data[...] = np.sum(D * D)

    def _truth(self, b, label, x, y, w, h, o, boxes, D):
        p, S, num = self.p, self.side, self.num
        i, j = int(x * S), int(y * S)
        if not (0 <= i < S and 0 <= j < S):
            raise self.error("truth box centre (%g, %g) of image %d is outside the image"
                             % (x, y, b), ShapeError)
        if not 0 <= label < self.classes:
            raise self.error("truth class %d of image %d is not below num_classes %d"
                             % (label, b, self.classes), ShapeError)
        cell = j * S + i
        cand = boxes[b, :, cell].copy()
        if p.bias_match:
            cand[:, 2] = self.biases[0:2 * num:2] / S
            cand[:, 3] = self.biases[1:2 * num:2] / S
        cand[:, :2] = 0
        ious = _center_iou(cand, np.array([0.0, 0.0, w, h]))
        n = int(np.argmax(ious)) if ious.max() > 0 else 0
        v, d = o[b, n, :, cell], D[b, n, :, cell]
        c = p.coord_scale * (2 - w * h)
        with np.errstate(divide="ignore"):
            target = np.array([x * S - i, y * S - j, np.log(w * S / self.biases[2 * n]),
                               np.log(h * S / self.biases[2 * n + 1])])
        d[0:4] = c * (target - v[0:4])
        iou = float(_center_iou(boxes[b, n, cell], np.array([x, y, w, h])))
        d[4] = p.object_scale * ((iou if p.rescore else 1.0) - v[4])
        if d[5] and not p.softmax:
            d[5 + label] = p.class_scale * (1 - v[5 + label])
        else:
            onehot = np.zeros(self.classes)
            onehot[label] = 1
            d[5:] = p.class_scale * (onehot - v[5:])

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to label inputs")
        if propagate_down[0]:
            g = -float(top[0].diff.reshape(())) * self.delta
            bottom[0].diff[...] = g.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
