"""Cambricon/caffe's inference post-processing behind its V1 types IMAGE_DETECT, DETECTION_OUT and
DETECTION_POSE_OUTPUT: ImageDetect (Faster R-CNN box decoding and per-class suppression),
DetectionOut (YOLOv2 region boxes and per-class suppression) and DetectionPoseOutput (SSD boxes
with a pose class), as the fork's CPU forwards compute them."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ..ssd.detection import decode_boxes


@register_layer("ImageDetect")
class ImageDetectLayer(Layer):
    """Decode per-class box deltas of R ROIs and suppress overlaps (Cambricon/caffe,
    src/caffe/layers/image_detect_layer.cpp). Bottoms: deltas (R x 4K: dx, dy, dw, dh per class),
    scores (R x K), ROIs (R x 5: batch index, x1, y1, x2, y2, divided by ``scale``). For ROI r of
    width w = x2 - x1 + 1, height h and centre c = (x1 + w / 2, y1 + h / 2), class k:

        centre c + (w dx, h dy), size (w e^dw, h e^dh); corners clipped to x1, y1 >= 0 and
        x2 < im_w, y2 < im_h (else im_w - 1, im_h - 1)

    Per class, ROIs are visited in order; ROI i is dropped when a later ROI j overlapping it
    with IoU >= nms_thresh scores higher, and otherwise drops each such j (the intersection's
    sides truncated to integers, as the fork). Kept boxes scoring above score_thresh are
    written, class by class, as (x1, y1, x2, y2, class, score) rows of the top
    (1 x R (4K / 4) x 1 x 6, zero after the last). Forward only.
    prototxt: ``image_detect_param { num_class: 21 im_h: 224 im_w: 224 scale: 1 nms_thresh
    score_thresh }``.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.image_detect_param
        r = bottom[0].shape[0]
        k = p.num_class
        if bottom[0].count != r * 4 * k or bottom[1].count != r * k or bottom[2].count != r * 5:
            raise self.error("bottoms must be R x 4 num_class, R x num_class, R x 5; got %s"
                             % ([b.shape for b in bottom],), ShapeError)
        top[0].reshape((1, r * (bottom[0].shape[1] // 4), 1, 6))

    def forward_cpu(self, bottom, top):
        p = self.layer_param.image_detect_param
        k = p.num_class
        r = bottom[0].shape[0]
        f = np.float32
        d = bottom[0].data.reshape(r, k, 4).astype(f)
        score = bottom[1].data.reshape(r, k).astype(f)
        rois = bottom[2].data.reshape(r, 5).astype(f) / f(p.scale)
        w = rois[:, 3] - rois[:, 1] + 1
        h = rois[:, 4] - rois[:, 2] + 1
        cx, cy = rois[:, 1] + w / 2, rois[:, 2] + h / 2
        px, py = cx[:, None] + w[:, None] * d[:, :, 0], cy[:, None] + h[:, None] * d[:, :, 1]
        pw, ph = np.exp(d[:, :, 2]) * w[:, None], np.exp(d[:, :, 3]) * h[:, None]
        x1, y1 = np.maximum(px - 0.5 * pw, 0), np.maximum(py - 0.5 * ph, 0)
        x2 = np.where(px + 0.5 * pw < p.im_w, px + 0.5 * pw, p.im_w - 1)
        y2 = np.where(py + 0.5 * ph < p.im_h, py + 0.5 * ph, p.im_h - 1)
        size = (y2 - y1) * (x2 - x1)
        rows = []
        for t in range(k):
            use = np.ones(r, bool)
            for i in range(r):
                if not use[i]:
                    continue
                for j in range(i + 1, r):
                    ox = int(min(x2[i, t], x2[j, t]) - max(x1[i, t], x1[j, t]))
                    oy = int(min(y2[i, t], y2[j, t]) - max(y1[i, t], y1[j, t]))
                    overlap = max(ox, 0) * max(oy, 0)
                    iou = f(overlap) / f(size[i, t] + size[j, t] - overlap)
                    if iou < p.nms_thresh:
                        continue
                    if score[j, t] > score[i, t]:
                        use[i] = False
                        break
                    use[j] = False
                if use[i] and score[i, t] > p.score_thresh:
                    rows.append((x1[i, t], y1[i, t], x2[i, t], y2[i, t], t, score[i, t]))
        out = top[0].data.reshape(-1)
        out[...] = 0
        flat = np.asarray(rows, dtype=np.float64).reshape(-1)[:out.size]
        out[:flat.size] = flat

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("ImageDetect has no backward")


def _corners(x, y, w, h):
    return np.clip([x - w / 2, y - h / 2, x + w / 2, y + h / 2], [0, 0, -np.inf, -np.inf],
                   [np.inf, np.inf, 1, 1])


def _iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0

    def size(r):
        w, h = r[2] - r[0], r[3] - r[1]
        return 0.0 if w < 0 or h < 0 else w * h
    inter = iw * ih
    return inter / (size(a) + size(b) - inter)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


@register_layer("DetectionOut")
class DetectionOutLayer(Layer):
    """YOLOv2 region output to detections (Cambricon/caffe, src/caffe/layers/
    detection_out_layer.cpp with include/caffe/util/bbox.hpp). The bottom (N x B (5 + K) x S x S,
    B = ``num_box``, K = ``num_classes``, S = ``side``) holds per cell and box tx, ty, tw, th,
    the objectness and K class scores. For cell (row j, column i) and box n, with anchors
    ``biases`` (w_n, h_n):

        x = (i + sigmoid(tx)) / S,  y = (j + sigmoid(ty)) / S,  w = e^tw w_n / S,  h = e^th h_n / S
        confidence_k = sigmoid(objectness) p_k  (p = softmax of the class scores; only p_k above
        confidence_threshold counts), a candidate when above confidence_threshold

    Per class, candidates sorted by confidence are suppressed pairwise as the fork does: for
    each unsuppressed i and later unsuppressed j with IoU >= nms_threshold (boxes as corners
    clipped to [0, 1]), the lower of the two is suppressed (the loop over j goes on). Top:
    1 x D x 1 x 7 rows (image, class, confidence, x, y, w, h) by class; D may be 0. The fork
    keeps the candidates and results of earlier images when it handles a later one (batch > 1);
    caffepy treats each image alone (the same at batch 1). Forward only. prototxt:
    ``detection_out_param { side: 13 num_classes: 20 num_box: 5 coords: 4
    confidence_threshold: 0.01 nms_threshold: 0.45 biases }`` (label_map_file, engine unused).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.detection_out_param
        n, c, h, w = bottom[0].shape if bottom[0].num_axes == 4 else (0, 0, 0, 0)
        if not n or h != p.side or w != p.side or c != p.num_box * (5 + p.num_classes) \
                or len(p.biases) < 2 * p.num_box:
            raise self.error("bottom must be N x num_box (5 + num_classes) x side x side with "
                             "2 num_box biases, got %s" % (bottom[0].shape,), ShapeError)
        top[0].reshape((1, 1, 1, 7))

    def forward_cpu(self, bottom, top):
        p = self.layer_param.detection_out_param
        s, nb, k = p.side, p.num_box, p.num_classes
        x = bottom[0].data.astype(np.float32)
        n = x.shape[0]
        v = x.reshape(n, nb, 5 + k, s, s)
        bias = np.asarray(p.biases, np.float32).reshape(-1, 2)
        rows = []
        for b in range(n):
            cand = []
            for j in range(s):
                for i in range(s):
                    for m in range(nb):
                        t = v[b, m, :, j, i]
                        box = ((i + _sigmoid(t[0])) / s, (j + _sigmoid(t[1])) / s,
                               np.exp(t[2]) * bias[m, 0] / s, np.exp(t[3]) * bias[m, 1] / s)
                        e = np.exp(t[5:] - t[5:].max())
                        prob = e / e.sum()
                        obj = _sigmoid(t[4])
                        for c in range(k):
                            conf = obj * (prob[c] if prob[c] > p.confidence_threshold else 0)
                            if conf > p.confidence_threshold:
                                cand.append((c, conf) + box)
            for c in range(k):
                cur = [r for r in cand if r[0] == c]
                cur.sort(key=lambda r: -r[1])
                gone = set()
                for a in range(len(cur) - 1):
                    if a in gone:
                        continue
                    for z in range(a + 1, len(cur)):
                        if z in gone:
                            continue
                        if _iou(_corners(*cur[a][2:]), _corners(*cur[z][2:])) >= \
                                p.nms_threshold:
                            gone.add(z if cur[a][1] > cur[z][1] else a)
                rows += [(b,) + r for q, r in enumerate(cur) if q not in gone]
        top[0].reshape((1, len(rows), 1, 7))
        if rows:
            top[0].data[...] = np.asarray(rows, np.float64).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("DetectionOut has no backward")


def _size(b):
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    return np.where((w < 0) | (h < 0), 0.0, w * h)


def _old_nms(boxes, scores, threshold, top_k):
    """Old SSD's ApplyNMS: all boxes by descending score (stable), tiny boxes (size < 1e-5)
    dropped, a box removed when its IoU with a kept one exceeds the threshold."""
    order = list(np.argsort(-scores, kind="stable"))
    if top_k > -1:
        order = order[:top_k]
    keep = []
    while order:
        best = order.pop(0)
        if _size(boxes[best]) < 1e-5:
            continue
        keep.append(int(best))
        if top_k > -1 and len(keep) >= top_k:
            break
        rest = []
        for i in order:
            if _size(boxes[i]) < 1e-5:
                continue
            if _iou(boxes[best], boxes[i]) <= threshold:
                rest.append(i)
        order = rest
    return keep


@register_layer("DetectionPoseOutput")
class DetectionPoseOutputLayer(Layer):
    """SSD detections with a pose class per box (Cambricon/caffe, src/caffe/layers/
    detection_pose_output_layer.cpp, after the SSD-pose Caffe). Bottoms: loc (N x 4 P L), conf
    (N x P C, already normalised), pose scores (N x P Q B), priors (1 x 2 x 4 P) [, the image,
    which only the fork's visualisation reads]; P priors, L = 1 or C location classes
    (share_location), Q = 1 or C pose classes (share_pose), B = ``num_poses``. Boxes are decoded
    as SSD does (CORNER or CENTER_SIZE), then per class but the background: the old SSD NMS (no
    score threshold: ``confidence_threshold`` is read and not used by the fork; tiny boxes
    dropped; ``nms_param { nms_threshold top_k }``) and ``keep_top_k`` over the image's classes.
    Top: 1 x 1 x D x 9 rows (image, class, score, box clipped to [0, 1], pose = argmax of the
    box's pose scores, that score), by class. Forward only; save_output_param and visualize are
    not honoured. prototxt: ``detection_pose_output_param { num_classes num_poses share_location
    share_pose background_label_id code_type keep_top_k variance_encoded_in_target nms_param }``.
    """
    min_bottom_blobs = 4
    max_bottom_blobs = 5
    exact_num_bottom_blobs = None
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_pose_output_param
        if not p.HasField("num_classes") or not p.HasField("num_poses"):
            raise self.error("detection_pose_output_param: num_classes and num_poses are "
                             "required")
        if p.code_type not in (1, 2):
            raise self.error("detection_pose_output_param: code_type must be CORNER or "
                             "CENTER_SIZE")
        self.c, self.b = int(p.num_classes), int(p.num_poses)
        self.lc = 1 if p.share_location else self.c
        self.pc = 1 if p.share_pose else self.c

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        self.np = bottom[3].count // 8
        want = (self.np * self.lc * 4, self.np * self.c, self.np * self.pc * self.b)
        got = tuple(bottom[i].count // n for i in range(3))
        if got != want or bottom[1].shape[0] != n or bottom[2].shape[0] != n:
            raise self.error("loc / conf / pose hold %s values per image, the %d priors want %s"
                             % (got, self.np, want), ShapeError)
        top[0].reshape((1, 1, 1, 9))

    def forward_cpu(self, bottom, top):
        p = self.layer_param.detection_pose_output_param
        n, np_ = bottom[0].shape[0], self.np
        loc = bottom[0].data.reshape(n, np_, self.lc, 4).astype(np.float64)
        conf = bottom[1].data.reshape(n, np_, self.c).astype(np.float64)
        pose = bottom[2].data.reshape(n, np_, self.pc, self.b).astype(np.float64)
        prior = bottom[3].data.reshape(2, np_, 4).astype(np.float64)
        nms = p.nms_param
        top_k = nms.top_k if nms.HasField("top_k") else -1
        rows = []
        for i in range(n):
            boxes = [decode_boxes(prior[0], prior[1], loc[i, :, l], p.code_type,
                                  p.variance_encoded_in_target) for l in range(self.lc)]
            kept = {}
            for c in range(self.c):
                if c == p.background_label_id:
                    continue
                kept[c] = _old_nms(boxes[0 if p.share_location else c], conf[i, :, c],
                                   nms.nms_threshold, top_k)
            total = sum(len(v) for v in kept.values())
            if p.keep_top_k > -1 and total > p.keep_top_k:
                pairs = sorted(((conf[i, j, c], c, j) for c, js in kept.items() for j in js),
                               key=lambda t: -t[0])[:p.keep_top_k]
                kept = {}
                for _s, c, j in pairs:
                    kept.setdefault(c, []).append(j)
            for c in sorted(kept):
                bx = boxes[0 if p.share_location else c]
                ps = pose[i, :, 0 if p.share_pose else c]
                for j in kept[c]:
                    k = int(np.argmax(ps[j]))
                    rows.append([i, c, conf[i, j, c]] + list(np.clip(bx[j], 0, 1))
                                + [k, ps[j, k]])
        top[0].reshape((1, 1, len(rows), 9))
        if rows:
            top[0].data[...] = np.asarray(rows).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("DetectionPoseOutput has no backward")
