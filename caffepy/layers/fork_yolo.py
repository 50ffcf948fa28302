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

from .base import Layer, register_layer


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _iou(a, b):
    """IoU of one centre/size box ``a`` (4,) with boxes ``b`` (K, 4), as the fork's box_iou."""
    w = np.minimum(a[0] + a[2] / 2, b[:, 0] + b[:, 2] / 2) - np.maximum(a[0] - a[2] / 2,
                                                                        b[:, 0] - b[:, 2] / 2)
    h = np.minimum(a[1] + a[3] / 2, b[:, 1] + b[:, 3] / 2) - np.maximum(a[1] - a[3] / 2,
                                                                        b[:, 1] - b[:, 3] / 2)
    inter = np.where((w < 0) | (h < 0), 0.0, w * h)
    union = a[2] * a[3] + b[:, 2] * b[:, 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def nms_center(boxes, scores, threshold):
    """Indices kept by the fork's greedy class-agnostic NMS, in descending score order."""
    order = np.argsort(-scores, kind="stable")
    boxes = boxes[order]
    alive = np.ones(len(order), bool)
    for i in range(len(order)):
        if alive[i] and i + 1 < len(order):
            alive[i + 1:] &= ~(_iou(boxes[i], boxes[i + 1:]) >= threshold)
    return order[alive]


def write_detections(top, boxes, labels, scores, threshold, num_images, dtype):
    """NMS, then ``top`` = 1 x 1 x kept x 7 rows (or one -1 row per image when nothing is kept)."""
    if len(scores):
        keep = nms_center(boxes, scores, threshold)
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
    ``gaussian_box`` (Gaussian YOLOv3's 8 box values) is not supported.

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
        if p.gaussian_box:
            raise self.error("gaussian_box (Gaussian YOLOv3) is not supported")
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
        length = 5 + self.num_classes
        for i, b in enumerate(bottom):
            if b.num_axes != 4 or b.shape[1] != self.num_box * length:
                raise self.error("bottom[%d] must be N x %d x H x W, got %s"
                                 % (i, self.num_box * length, b.shape))
        top[0].reshape(1, 1, 1, 7)

    def forward_cpu(self, bottom, top):
        boxes, labels, scores = [], [], []
        for t, blob in enumerate(bottom):
            n, _, h, w = blob.shape
            v = blob.data.astype(np.float64).reshape(n, self.num_box, -1, h, w)
            anchors = np.array(self.mask[t * self.group_size:t * self.group_size + self.num_box])
            nw, nh = w * self.scales[t], h * self.scales[t]
            jj, ii = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            x = (ii + _sigmoid(v[:, :, 0])) / w
            y = (jj + _sigmoid(v[:, :, 1])) / h
            bw = np.exp(v[:, :, 2]) * self.biases[2 * anchors][:, None, None] / nw
            bh = np.exp(v[:, :, 3]) * self.biases[2 * anchors + 1][:, None, None] / nh
            x, y, bw, bh = _correct_box(x, y, bw, bh, w, h, nw, nh)
            score = _sigmoid(v[:, :, 4])[:, :, None] * _sigmoid(v[:, :, 5:5 + self.num_classes])
            # candidates in the fork's order: image, cell, box, class
            score = score.transpose(0, 3, 4, 1, 2)              # N, H, W, B, C
            sel = np.nonzero(score > self.conf)
            box = np.stack([x, y, bw, bh], axis=-1).transpose(0, 2, 3, 1, 4)  # N, H, W, B, 4
            boxes.append(box[sel[:4]])
            scores.append(score[sel])
            labels.append(sel[4])
        write_detections(top[0], np.concatenate(boxes), np.concatenate(labels),
                         np.concatenate(scores), self.nms, bottom[0].shape[0], top[0].dtype)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def _center_iou(a, b):
    """IoU of centre/size boxes, broadcasting over leading axes (last axis: x, y, w, h)."""
    w = np.minimum(a[..., 0] + a[..., 2] / 2, b[..., 0] + b[..., 2] / 2) - np.maximum(
        a[..., 0] - a[..., 2] / 2, b[..., 0] - b[..., 2] / 2)
    h = np.minimum(a[..., 1] + a[..., 3] / 2, b[..., 1] + b[..., 3] / 2) - np.maximum(
        a[..., 1] - a[..., 3] / 2, b[..., 1] - b[..., 3] / 2)
    inter = np.where((w < 0) | (h < 0), 0.0, w * h)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


@register_layer("Yolov3")
class Yolov3LossLayer(Layer):
    """YOLOv3's training loss on one output scale (MobileNet-YOLO's ``Yolov3``, darknet's deltas).

    Bottom 0: N x B*L x H x W (L = 5 + num_class, B = ``num``), box n at cell (j, i) read as
    v = bottom[b, n L : (n+1) L, j, i]; s = sigmoid(v) except v2, v3 (kept raw). Anchor of box n:
    a = mask[n]; predicted box x = (i + s0) / W, y = (j + s1) / H, w = exp(v2) biases[2a] / (W k),
    h = exp(v3) biases[2a+1] / (H k), k = ``anchors_scale``. Bottom 1: per image up to 300 rows
    [class, x, y, w, h] (normalised centre/size; a row with x = 0 / w = 0 ends the list).
    The delta D (same shape as bottom 0) is built as in the fork:
      * every box: D_obj = s4, set to 0 when its best IoU with a truth exceeds ``thresh``;
      * every truth, cell (int(x W), int(y H)): the anchor of all ``biases`` whose (w, h) best
        matches the truth's gets, when it is in ``mask``: coords D = -c (t - s) with
        c = coord_scale (2 - w h), tx = x W - i, ty = y H - j, tw = log(w W k / biases[2a]),
        th likewise (against raw v2, v3); D_obj = -(1 - s4) (times object_scale with
        use_logic_gradient); classes D_c = -class_scale (y_c - s_c), y = 1 for the class and 0
        otherwise, smoothed to y (1 - e) + e / 2 with ``label_smooth_eps`` e (only the class
        entry when the cell already holds a class delta); other anchors of ``mask`` whose IoU
        with the truth exceeds ``iou_thresh`` get the same (the fork compares the anchor index
        with the best anchor's mask position there; caffepy keeps that);
    loss = sum(D^2) / N. Backward (darknet's convention, not the derivative of that sum):
    d bottom0 = top_diff D / N, with D times s (1 - s) on the sigmoid entries when
    ``use_logic_gradient``. The gradient of each entry is the derivative of
    c/2 (v - t)^2 (raw) or c * BCE(t, sigmoid(v)) (others), so a central difference of that
    surrogate matches it (tests/layers/test_fork_yolo.py).

    prototxt: ``yolov3_param { num_class: 20 num: 5 object_scale: 1 class_scale: 1
    noobject_scale: 0.5 (unused by the fork) coord_scale: 5 thresh: 0.2 anchors_scale: 32
    biases: [] mask: [] use_logic_gradient: false use_focal_loss: false (not supported)
    iou_loss: MSE (only MSE) iou_thresh: 0.5 label_smooth_eps: 0.1 }``. Top: the scalar loss.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.yolov3_param
        if p.use_focal_loss or p.iou_loss != p.MSE:
            raise self.error("only iou_loss: MSE without use_focal_loss is supported")
        self.p = p
        self.num_class, self.num = int(p.num_class), int(p.num)
        self.mask = [int(m) for m in p.mask][:self.num]
        if len(self.mask) < self.num:
            raise self.error("yolov3_param.mask needs %d entries, got %s" % (self.num, self.mask))
        self.biases = _biases(self, p.biases, max(self.mask) + 1)

    def reshape(self, bottom, top):
        length = 5 + self.num_class
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != self.num * length:
            raise self.error("bottom[0] must be N x %d x H x W (num * (5 + num_class)), got %s"
                             % (self.num * length, bottom[0].shape))
        if bottom[1].count % (bottom[0].shape[0] * 5):
            raise self.error("bottom[1] (labels) must hold rows of 5 values per image, got %s"
                             % (bottom[1].shape,))
        top[0].reshape(())

    def _deltas(self, v, s, truths, D):
        p, (B, L, H, W), k = self.p, v.shape, float(self.p.anchors_scale)
        jj, ii = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        a = np.array(self.mask)
        pred = np.stack([(ii + s[:, 0]) / W, (jj + s[:, 1]) / H,
                         np.exp(v[:, 2]) * self.biases[2 * a][:, None, None] / (W * k),
                         np.exp(v[:, 3]) * self.biases[2 * a + 1][:, None, None] / (H * k)], -1)
        upto = next((t for t, r in enumerate(truths) if not r[1]), len(truths))
        D[:, 4] = s[:, 4]
        if upto:
            best = _center_iou(pred[:, :, :, None], truths[None, None, None, :upto, 1:]).max(-1)
            D[:, 4][best > p.thresh] = 0
        eps = p.label_smooth_eps
        anchors = np.stack([np.zeros(len(self.biases) // 2)] * 2 + [
            self.biases[0::2] / (W * k), self.biases[1::2] / (H * k)], -1)
        for cls, x, y, w, h in truths:
            if not w:
                break
            i, j = int(x * W), int(y * H)
            ious = _center_iou(anchors, np.array([0.0, 0.0, w, h]))
            best_n = int(np.argmax(ious)) if ious.max() > 0 else -1
            chosen = []
            if best_n in self.mask:
                best_n = self.mask.index(best_n)        # the fork's reuse of best_n
                chosen.append(best_n)
            for n in range(len(anchors)):
                if n in self.mask and n != best_n and p.iou_thresh < 1 and ious[n] > p.iou_thresh:
                    chosen.append(self.mask.index(n))
            for m in chosen:
                a = self.mask[m]
                c = p.coord_scale * (2 - w * h)
                t = (x * W - i, y * H - j, np.log(w * W * k / self.biases[2 * a]),
                     np.log(h * H * k / self.biases[2 * a + 1]))
                for q in range(4):
                    D[m, q, j, i] = -c * (t[q] - (s if q < 2 else v)[m, q, j, i])
                scale = p.object_scale if p.use_logic_gradient else 1.0
                D[m, 4, j, i] = -(1 - s[m, 4, j, i]) * scale
                cls = int(cls)
                if D[m, 5 + cls, j, i]:
                    yt = 1 - eps / 2 if eps else 1.0
                    D[m, 5 + cls, j, i] = -p.class_scale * (yt - s[m, 5 + cls, j, i])
                else:
                    yt = np.zeros(self.num_class)
                    yt[cls] = 1
                    if eps:
                        yt = yt * (1 - eps) + 0.5 * eps
                    D[m, 5:, j, i] = -p.class_scale * (yt - s[m, 5:, j, i])

    def forward_cpu(self, bottom, top):
        N, _, H, W = bottom[0].shape
        v = bottom[0].data.astype(np.float64).reshape(N, self.num, -1, H, W)
        s = _sigmoid(v)
        s[:, :, 2:4] = v[:, :, 2:4]
        labels = bottom[1].data.astype(np.float64).reshape(N, -1, 5)[:, :300]
        self.delta = np.zeros_like(v)
        for b in range(N):
            self._deltas(v[b], s[b], labels[b], self.delta[b])
        if self.p.use_logic_gradient:
            self.delta_back = self.delta * s * (1 - s)
            self.delta_back[:, :, 2:4] = self.delta[:, :, 2:4]
        else:
            self.delta_back = self.delta
        top[0].data[...] = np.square(self.delta).sum() / N

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to label inputs")
        if propagate_down[0]:
            alpha = float(top[0].diff) / bottom[0].shape[0]
            bottom[0].diff[...] = (alpha * self.delta_back).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
