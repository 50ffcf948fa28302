"""YOLO on Caffe (eric612/MobileNet-YOLO and its relatives): the detection output layers.

Boxes are decoded to ``(x, y, w, h)`` centre / size normalised to the image; each output row is
``[image_id, label, confidence, xmin, ymin, xmax, ymax]`` (label = class + 1) as SSD's
DetectionOutput writes them, so the same evaluation tools read them. The fork writes image_id 0
for every kept box, whatever its image; caffepy does the same. Both layers are forward only (the
fork's backward does nothing).

NMS (the fork's ``ApplyNms``): class-agnostic and greedy over the candidates sorted by descending
confidence; a box is dropped when its IoU with a kept box is >= ``nms_threshold``, the IoU taken on
the centre/size boxes without clipping.
"""
import numpy as np

from ...layers.base import Layer, register_layer


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _iou_rows(a, b):
    """IoU of centre/size boxes ``a`` and ``b`` row by row ((K, 4) each, or one broadcast), as
    the fork's box_iou."""
    w = np.minimum(a[:, 0] + a[:, 2] / 2, b[:, 0] + b[:, 2] / 2) \
        - np.maximum(a[:, 0] - a[:, 2] / 2, b[:, 0] - b[:, 2] / 2)
    h = np.minimum(a[:, 1] + a[:, 3] / 2, b[:, 1] + b[:, 3] / 2) \
        - np.maximum(a[:, 1] - a[:, 3] / 2, b[:, 1] - b[:, 3] / 2)
    inter = np.where((w < 0) | (h < 0), 0.0, w * h)
    union = a[:, 2] * a[:, 3] + b[:, 2] * b[:, 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def _iou(a, b):
    """IoU of one centre/size box ``a`` (4,) with boxes ``b`` (K, 4), as the fork's box_iou."""
    return _iou_rows(a[None], b)


def nms_center(boxes, scores, threshold, groups=None):
    """Indices kept by the fork's greedy class-agnostic NMS, in descending score order.

    ``groups`` (optional, one integer per candidate): candidates with equal ids have the same box
    (one prediction's box, one candidate per class). Of such a group only the first in score order
    can be kept when the box's IoU with itself is >= ``threshold``: whatever kept box suppresses
    the first (itself, or an earlier box) suppresses the others by the same IoU, and a suppressed
    box suppresses nothing. So those others are dropped before the greedy pass, which gives the
    same kept boxes: a YOLOv3 output whose every (box, class) score passes the confidence
    threshold (an untrained net's 850,000 candidates at 416 x 416) then costs one pass over its
    boxes, not over every box and class."""
    order = np.argsort(-scores, kind="stable")
    if groups is not None and len(order):
        g = np.asarray(groups)[order]
        first = np.zeros(len(order), bool)
        first[np.unique(g, return_index=True)[1]] = True
        b = boxes[order]
        order = order[first | ~(_iou_rows(b, b) >= threshold)]
    boxes = boxes[order]
    alive = np.ones(len(order), bool)
    for i in range(len(order)):
        if alive[i] and i + 1 < len(order):
            alive[i + 1:] &= ~(_iou(boxes[i], boxes[i + 1:]) >= threshold)
    return order[alive]


def write_detections(top, boxes, labels, scores, threshold, num_images, dtype, groups=None):
    """NMS (``groups``: :func:`nms_center`'s), then ``top`` = 1 x 1 x kept x 7 rows (or one -1
    row per image when nothing is kept)."""
    if len(scores):
        keep = nms_center(boxes, scores, threshold, groups)
    else:
        keep = np.zeros(0, int)
    if not len(keep):
        top.reshape(1, 1, num_images, 7)
        top.data[...] = -1
        top.data[0, 0, :, 0] = np.arange(num_images)
        return
    top.reshape(1, 1, len(keep), 7)
    b = boxes[keep]
    rows = np.stack([np.zeros(len(keep)), labels[keep] + 1.0, scores[keep],
                     b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2,
                     b[:, 0] + b[:, 2] / 2, b[:, 1] + b[:, 3] / 2], axis=1)
    top.data[0, 0] = rows.astype(dtype)


def _biases(layer, values, count):
    biases = np.asarray(values, np.float64)
    if len(biases) < 2 * count:
        raise layer.error("needs %d biases (anchor w, h pairs), got %d" % (2 * count, len(biases)))
    return biases


@register_layer("YoloDetectionOutput")
class YoloDetectionOutputLayer(Layer):
    """YOLOv2 (region) detection output: decode, keep each box's best class, NMS.

    Each bottom (N x B*L x S x S, L = 5 + num_classes, B = num_box) holds, for box n at cell (j, i),
    the L values t = bottom[b, n L : (n+1) L, j, i]:
        x = (i + sigmoid(t0)) / S,  y = (j + sigmoid(t1)) / S,
        w = exp(t2) biases[2n] / S,  h = exp(t3) biases[2n+1] / S,
        p = softmax(t5 ..), confidence = sigmoid(t4) max(p), label = argmax(p);
    boxes with confidence >= ``confidence_threshold`` from every bottom go to the NMS.

    prototxt: ``yolo_detection_output_param { num_classes: 20 (required) num_box: 5 coords: 4
    confidence_threshold: 0.01 nms_threshold: 0.45 biases: [] label_map_file }`` (``side`` is
    read from the bottom). Bottoms: 1 or 2 maps. Top: 1 x 1 x K x 7.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.yolo_detection_output_param
        if not p.HasField("num_classes"):
            raise self.error("yolo_detection_output_param.num_classes is required")
        self.num_classes, self.num_box = int(p.num_classes), int(p.num_box)
        self.conf, self.nms = float(p.confidence_threshold), float(p.nms_threshold)
        self.biases = _biases(self, p.biases, self.num_box)

    def reshape(self, bottom, top):
        for i, b in enumerate(bottom):
            if b.num_axes != 4 or b.shape[1] != self.num_box * (5 + self.num_classes):
                raise self.error("bottom[%d] must be N x %d x H x W (num_box * (5 + num_classes)),"
                                 " got %s" % (i, self.num_box * (5 + self.num_classes), b.shape))
        top[0].reshape(1, 1, 1, 7)

    def forward_cpu(self, bottom, top):
        boxes, labels, scores = [], [], []
        for blob in bottom:
            n, _, h, w = blob.shape
            t = blob.data.astype(np.float64).reshape(n, self.num_box, -1, h, w)
            side = w                                   # the fork divides x and y by the width
            jj, ii = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            bx = (ii + _sigmoid(t[:, :, 0])) / side
            by = (jj + _sigmoid(t[:, :, 1])) / side
            bw = np.exp(t[:, :, 2]) * self.biases[0:2 * self.num_box:2, None, None] / side
            bh = np.exp(t[:, :, 3]) * self.biases[1:2 * self.num_box:2, None, None] / side
            logits = t[:, :, 5:5 + self.num_classes]
            p = np.exp(logits - logits.max(axis=2, keepdims=True))
            p /= p.sum(axis=2, keepdims=True)
            conf = _sigmoid(t[:, :, 4]) * p.max(axis=2)
            cls = p.argmax(axis=2)
            # the fork's candidate order: image, row, column, box
            order = (0, 2, 3, 1)
            sel = (conf >= self.conf).transpose(order)
            stack = np.stack([bx, by, bw, bh], axis=-1).transpose(0, 2, 3, 1, 4)
            boxes.append(stack[sel])
            scores.append(conf.transpose(order)[sel])
            labels.append(cls.transpose(order)[sel])
        write_detections(top[0], np.concatenate(boxes), np.concatenate(labels),
                         np.concatenate(scores), self.nms, bottom[0].shape[0], top[0].dtype)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def _correct_box(x, y, w, h, side_w, side_h, netw, neth):
    """The fork's correct_yolo_boxes (relative): letterbox correction (the identity when the net
    input is the map scaled by anchors_scale on both axes)."""
    if netw / side_w < neth / side_h:
        new_w, new_h = netw, (side_h * netw) // side_w
    else:
        new_w, new_h = (side_w * neth) // side_h, neth
    x = (x - (netw - new_w) / 2.0 / netw) / (new_w / netw)
    y = (y - (neth - new_h) / 2.0 / neth) / (new_h / neth)
    return x, y, w * netw / new_w, h * neth / new_h


@register_layer("Yolov3DetectionOutput")
class Yolov3DetectionOutputLayer(Layer):
    """YOLOv3 detection output over several scales: decode, one candidate per class, NMS.

    Bottom t (N x B*L x H x W, L = 5 + num_classes, B = num_box) uses anchors
    mask[t*G + n] (G = len(mask) / mask_group_num) and the input size (W s, H s) with
    s = anchors_scale[t]. For box n at cell (j, i), v = bottom[b, n L : (n+1) L, j, i]:
        x = (i + sigmoid(v0)) / W,  y = (j + sigmoid(v1)) / H,
        w = exp(v2) biases[2a] / (W s),  h = exp(v3) biases[2a+1] / (H s)   (a the anchor),
        score_c = sigmoid(v4) sigmoid(v(5+c));
    every (box, class) with score_c > ``confidence_threshold`` is a candidate (the fork's
    correct_yolo_boxes is applied, the identity for these sizes), then NMS over all classes.
    ``gaussian_box`` (Gaussian YOLOv3, L = 9 + num_classes: mean / sigma pairs for x, y, w, h,
    then objectness and classes): x = (i + sigmoid(v0)) / W, y = (j + sigmoid(v2)) / H,
    w = exp(v4) ..., h = exp(v6) ...; score_c = sigmoid(v8) u / 4 sigmoid(v(9+c)) with
    u = 4 - 2 sigmoid(v1) - sigmoid(v3) - sigmoid(v5) - sigmoid(v7), as the fork's GPU code
    (sigma_x counted twice; its CPU code reads the classes one channel early and never sets
    the objectness, which is undefined, so the GPU path is followed).

    prototxt: ``yolov3_detection_output_param { num_classes: 20 (required) num_box: 3
    confidence_threshold: 0.01 nms_threshold: 0.45 biases: [] anchors_scale: [] mask_group_num: 2
    mask: [] }``. Bottoms: mask_group_num maps. Top: 1 x 1 x K x 7.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.yolov3_detection_output_param
        if not p.HasField("num_classes"):
            raise self.error("yolov3_detection_output_param.num_classes is required")
        self.gaussian = bool(p.gaussian_box)
        self.num_classes, self.num_box = int(p.num_classes), int(p.num_box)
        self.conf, self.nms = float(p.confidence_threshold), float(p.nms_threshold)
        self.mask = [int(m) for m in p.mask]
        self.scales = [int(s) for s in p.anchors_scale]
        groups = int(p.mask_group_num)
        if len(bottom) != groups:
            raise self.error("mask_group_num is %d but the layer has %d bottoms"
                             % (groups, len(bottom)))
        self.group_size = len(self.mask) // groups if groups else 0
        if len(self.scales) < groups or self.group_size < self.num_box:
            raise self.error("needs anchors_scale per bottom and num_box mask entries per bottom "
                             "(anchors_scale %s, mask %s)" % (self.scales, self.mask))
        self.biases = _biases(self, p.biases, max(self.mask) + 1)

    def reshape(self, bottom, top):
        length = (9 if self.gaussian else 5) + self.num_classes
        for i, b in enumerate(bottom):
            if b.num_axes != 4 or b.shape[1] != self.num_box * length:
                raise self.error("bottom[%d] must be N x %d x H x W, got %s"
                                 % (i, self.num_box * length, b.shape))
        top[0].reshape(1, 1, 1, 7)

    def forward_cpu(self, bottom, top):
        boxes, labels, scores, groups, seen = [], [], [], [], 0
        for t, blob in enumerate(bottom):
            n, _, h, w = blob.shape
            v = blob.data.astype(np.float64).reshape(n, self.num_box, -1, h, w)
            anchors = np.array(self.mask[t * self.group_size:t * self.group_size + self.num_box])
            nw, nh = w * self.scales[t], h * self.scales[t]
            jj, ii = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            cx, cy, cw, ch, co = (0, 2, 4, 6, 8) if self.gaussian else (0, 1, 2, 3, 4)
            x = (ii + _sigmoid(v[:, :, cx])) / w
            y = (jj + _sigmoid(v[:, :, cy])) / h
            bw = np.exp(v[:, :, cw]) * self.biases[2 * anchors][:, None, None] / nw
            bh = np.exp(v[:, :, ch]) * self.biases[2 * anchors + 1][:, None, None] / nh
            x, y, bw, bh = _correct_box(x, y, bw, bh, w, h, nw, nh)
            obj = _sigmoid(v[:, :, co])
            if self.gaussian:
                sig = _sigmoid(v[:, :, [1, 1, 3, 5, 7]]).sum(axis=2)
                obj = obj * (4.0 - sig) / 4.0
            score = obj[:, :, None] * _sigmoid(v[:, :, co + 1:co + 1 + self.num_classes])
            # candidates in the fork's order: image, cell, box, class
            score = score.transpose(0, 3, 4, 1, 2)              # N, H, W, B, C
            sel = np.nonzero(score > self.conf)
            box = np.stack([x, y, bw, bh], axis=-1).transpose(0, 2, 3, 1, 4)  # N, H, W, B, 4
            boxes.append(box[sel[:4]])
            scores.append(score[sel])
            labels.append(sel[4])
            groups.append(seen + np.ravel_multi_index(sel[:4], score.shape[:4]))
            seen += int(np.prod(score.shape[:4]))
        write_detections(top[0], np.concatenate(boxes), np.concatenate(labels),
                         np.concatenate(scores), self.nms, bottom[0].shape[0], top[0].dtype,
                         np.concatenate(groups))

    def backward_cpu(self, top, propagate_down, bottom):
        pass
