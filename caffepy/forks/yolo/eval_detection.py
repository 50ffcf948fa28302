"""``EvalDetection``: per-image detection records for mAP of caffe-yolo (yeahkun/caffe-yolo,
src/caffe/layers/eval_detection_layer.cpp; YOLOv1 grids) and of intel/caffe's YOLOv2 form (the
same file there: anchors from ``biases``, SSD-style label rows), built when ``biases`` is set.

Top (both): N x (C + S^2 B 4). Per image: columns 0..C-1 count the ground-truth boxes of each
class (v1: those not difficult); then one record (label, score, tp, fp) per kept prediction,
grouped by predicted label in increasing order, each group by decreasing score; the rest 0.
Matching, per group: the truth of that label with the largest IoU (centre/size boxes, float32,
first on ties); IoU >= ``threshold`` and not yet taken gives tp 1, already taken fp 1; a label
with no truth gives fp 1 to all its predictions. Where the forks leave a record's tp / fp at 0 is
said per class. NMS (``nms`` >= 0): all predictions sorted by score (ties in input order), then
greedy: each kept box drops the later ones whose IoU with it is >= nms, across classes.
No backward (the forks define none).
"""
import numpy as np

from ...layers.base import Layer, register_layer, register_variant
from .loss import _center_iou


def _iou(a, b):
    return float(_center_iou(np.asarray(a, np.float32), np.asarray(b, np.float32)))


def _nms(boxes, thresh):
    """boxes: [(label, score, box)] sorted by score; the kept ones in order."""
    dropped = set()
    for i in range(len(boxes) - 1):
        if i in dropped:
            continue
        for j in range(i + 1, len(boxes)):
            if j not in dropped and _iou(boxes[i][2], boxes[j][2]) >= thresh:
                dropped.add(j)
    return [b for i, b in enumerate(boxes) if i not in dropped]


class _EvalDetectionBase(Layer):
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    unmatched_is_fp = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.eval_detection_param
        self.p, self.S, self.C, self.B = p, int(p.side), int(p.num_class), int(p.num_object)
        self.score_type = int(p.score_type)

    def _score(self, obj, prob):
        return (obj, prob, obj * prob)[self.score_type]

    def reshape(self, bottom, top):
        self._check(bottom)
        top[0].reshape((bottom[0].shape[0], self.C + self.S * self.S * self.B * 4))

    def _group(self, preds):
        """{label: [(label, score, box)]} from the per-image predictions (in grid order)."""
        groups = {}
        if self.p.nms >= 0:
            order = sorted(range(len(preds)), key=lambda i: -preds[i][1])
            for b in self._after_nms(_nms([preds[i] for i in order], self.p.nms)):
                groups.setdefault(b[0], []).append(b)
        else:
            for b in preds:
                groups.setdefault(b[0], []).append(b)
            for g in groups.values():
                g.sort(key=lambda b: -b[1])
        return groups

    def _after_nms(self, kept):
        return kept

    def forward_cpu(self, bottom, top):
        out = top[0].data
        out[...] = 0
        for n, (truths, preds) in enumerate(self._images(bottom)):
            gt = {}
            for label, difficult, box in truths:
                gt.setdefault(label, []).append((difficult, box))
                if not difficult and 0 <= label < self.C:
                    out[n, label] += 1
            rec = out[n, self.C:].reshape(-1, 4)
            k = 0
            for label, group in sorted(self._group(preds).items()):
                taken = [False] * len(gt.get(label, ()))
                for _, score, box in group:
                    if k >= rec.shape[0]:
                        break
                    rec[k, :2] = label, score
                    if label not in gt:
                        rec[k, 3] = 1
                    else:
                        ious = [_iou(box, g[1]) for g in gt[label]]
                        best = int(np.argmax(ious))
                        if ious[best] >= self.p.threshold:
                            if not gt[label][best][0]:
                                rec[k, 2:] = (0, 1) if taken[best] else (1, 0)
                                taken[best] = True
                        elif self.unmatched_is_fp:
                            rec[k, 3] = 1
                    k += 1


@register_layer("EvalDetection")
class EvalDetectionLayer(_EvalDetectionBase):
    """caffe-yolo's YOLOv1 EvalDetection (yeahkun/caffe-yolo).

    S = ``side``, K = S^2 cells j, C = ``num_class``, B = ``num_object``. Bottom 0 per image (K (C
    + 5 B) values): class scores at c K + j, confidences at (C + k) K + j, boxes at (C + B + 4 k +
    o) K + j. Bottom 1 per image (7 K, the BoxData label): difficult at j, objectness at K + j,
    class at 2 K + j, box at 3 K + 4 j. Each cell's label is its first largest class score;
    each of its B boxes gets score (``score_type``) OBJ: confidence, PROB: that class score,
    MULTIPLY: their product; box x, y are ((j mod S) + x) / S, ((j div S) + y) / S when
    ``constriant``, w, h squared when ``sqrt``. Records matched to a difficult truth keep tp =
    fp = 0; an IoU under threshold gives fp 1.

    prototxt: ``eval_detection_param { side: 7 num_class: 20 num_object: 2 threshold: 0.5
    sqrt: true constriant: true score_type: MULTIPLY nms: -1 }``.
    """

    def _check(self, bottom):
        K = self.S * self.S
        n = bottom[0].shape[0]
        if bottom[0].count != n * K * (self.C + 5 * self.B) or bottom[1].count != n * 7 * K:
            raise self.error("bottoms must hold %d predictions and %d label values per image "
                             "(side %d, num_class %d, num_object %d); got %s and %s"
                             % (K * (self.C + 5 * self.B), 7 * K, self.S, self.C, self.B,
                                bottom[0].shape, bottom[1].shape))

    def _images(self, bottom):
        S, C, B, K, p = self.S, self.C, self.B, self.S * self.S, self.p
        N = bottom[0].shape[0]
        x = bottom[0].data.reshape(N, C + 5 * B, K).astype(np.float32)
        lab = bottom[1].data.reshape(N, 7 * K)
        for n in range(N):
            truths = [(int(lab[n, 2 * K + j]), lab[n, j] == 1, lab[n, 3 * K + 4 * j:3 * K + 4 * j + 4])
                      for j in range(K) if lab[n, K + j]]
            preds = []
            for j in range(K):
                label = int(np.argmax(x[n, :C, j]))
                prob = x[n, label, j]
                for k in range(B):
                    bx = x[n, C + B + 4 * k:C + B + 4 * k + 4, j].copy()
                    if p.constriant:
                        bx[0], bx[1] = (j % S + bx[0]) / S, (j // S + bx[1]) / S
                    if p.sqrt:
                        bx[2:] = bx[2:] ** 2
                    preds.append((label, float(self._score(x[n, C + k, j], prob)), bx))
            yield truths, preds


@register_variant("EvalDetection", lambda lp: len(lp.eval_detection_param.biases) > 0)
class IntelEvalDetectionLayer(_EvalDetectionBase):
    """intel/caffe's YOLOv2 EvalDetection (taken when ``biases`` is set).

    Bottom 0: N x (B (C + 5)) x H x W read channel-last (per image, value c of cell h W + w at
    (h W + w) (channels) + c), so cell (j, i) = (row, column), anchor a < 5 starts at ((j S + i)
    B + a) (C + 5): x = (i + sigmoid(t_x)) / S, y = (j + sigmoid(t_y)) / S, w = exp(t_w)
    biases[2a] / S, h = exp(t_h) biases[2a + 1] / S, class probabilities the softmax of its C
    values (label: the first largest), objectness sigmoid(t_o). The fork always reads 5 anchors
    (num_object must be >= 5 here; only the first 5 are read). With ``nms`` >= 0 the kept boxes of
    score < 0.005 are dropped; with nms < 0 (the default) no prediction is recorded, as in the
    fork. Bottom 1: 1 x 1 x R x 8 rows [image, label, _, xmin, ymin, xmax, ymax, _] (image -1:
    none; image N is accepted and unused, as the fork's extra list for dummy data), class label - 1, centre/size from the corners; every truth counts. Records whose best
    IoU is under threshold keep tp = fp = 0.

    prototxt: ``eval_detection_param { side: 13 num_class: 20 num_object: 5 threshold: 0.5
    score_type: MULTIPLY nms: 0.45 biases: [10 values] }``.
    """
    unmatched_is_fp = False

    def _check(self, bottom):
        per = self.S * self.S * self.B * (self.C + 5)
        if bottom[0].num_axes != 4 or bottom[0].count != bottom[0].shape[0] * per:
            raise self.error("bottom 0 must be N x C x H x W with %d values per image (side %d, "
                             "num_object %d, num_class %d), got %s"
                             % (per, self.S, self.B, self.C, bottom[0].shape))
        if self.B < 5 or len(self.p.biases) < 10:
            raise self.error("the fork reads 5 anchors: num_object must be >= 5 and biases hold "
                             "10 values (got %d, %d)" % (self.B, len(self.p.biases)))
        if bottom[1].count % 8:
            raise self.error("bottom 1 must hold rows of 8 values, got %s" % (bottom[1].shape,))

    def _after_nms(self, kept):
        return [b for b in kept if b[1] >= np.float32(0.005)]

    def _group(self, preds):
        return super()._group(preds) if self.p.nms >= 0 else {}

    def _images(self, bottom):
        S, C, B = self.S, self.C, self.B
        N = bottom[0].shape[0]
        swap = bottom[0].data.reshape(N, bottom[0].shape[1], -1).transpose(0, 2, 1).reshape(N, -1)
        rows = bottom[1].data.reshape(-1, 8)
        truths = [[] for _ in range(N)]
        for r in rows:
            item = int(r[0])
            if item == -1:
                continue
            if not 0 <= item <= N:
                raise self.error("label row names image %d of a batch of %d" % (item, N))
            if item == N:           # the fork keeps N + 1 lists and never reads the last one
                continue
            box = np.array([(r[3] + r[5]) / 2, (r[4] + r[6]) / 2, r[5] - r[3], r[6] - r[4]])
            truths[item].append((int(r[1]) - 1, False, box))
        bias = np.asarray(self.p.biases, np.float32)
        for n in range(N):
            preds = []
            for j in range(S):
                for i in range(S):
                    for a in range(5):
                        v = swap[n, ((j * S + i) * B + a) * (C + 5):][:C + 5].astype(np.float32)
                        sig = 1 / (1 + np.exp(-v[[0, 1, 4]]))
                        box = np.array([(i + sig[0]) / S, (j + sig[1]) / S,
                                        np.exp(v[2]) * bias[2 * a] / S,
                                        np.exp(v[3]) * bias[2 * a + 1] / S], np.float32)
                        e = np.exp(v[5:] - v[5:].max())
                        prob = e / e.sum()
                        label = int(np.argmax(prob))
                        preds.append((label, float(self._score(sig[2], prob[label])), box))
            yield truths[n], preds
