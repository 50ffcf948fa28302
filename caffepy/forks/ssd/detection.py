"""SSD's detection layers (weiliu89/caffe): Permute, PriorBox, DetectionOutput.

Boxes are ``[xmin, ymin, xmax, ymax]`` normalised to the image (0..1).
"""
import math

import numpy as np

from ...layers.base import Layer, register_layer


@register_layer("Permute")
class PermuteLayer(Layer):
    """Transpose the axes: ``top = bottom.transpose(order)``.

    ``order`` lists axes first; axes it leaves out follow in their original order.
    prototxt: ``permute_param { order: [] }``. Bottom: any shape. Top: the permuted shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        n = bottom[0].num_axes
        order = []
        for a in self.layer_param.permute_param.order:
            if a >= n:
                need = max(self.layer_param.permute_param.order) + 1
                raise self.needs("order axis %d out of range for a %d-d bottom" % (a, n),
                                 [(0, tuple(bottom[0].shape) + (1,) * (need - n), None)])
            if a in order:
                raise self.error("order axis %d appears twice" % a)
            order.append(int(a))
        self.order = order + [a for a in range(n) if a not in order]
        self.inverse = list(np.argsort(self.order))

    def reshape(self, bottom, top):
        if bottom[0].num_axes != len(self.order):
            raise self.error("bottom has %d axes, the layer was set up for %d"
                             % (bottom[0].num_axes, len(self.order)))
        top[0].reshape([bottom[0].shape[a] for a in self.order])

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data.transpose(self.order)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.transpose(self.inverse)


@register_layer("PriorBox")
class PriorBoxLayer(Layer):
    """Default (prior) boxes for every cell of a feature map (SSD).

    Aspect ratios: 1, then each given ratio r (duplicates dropped) and 1 / r when ``flip``. Per cell
    (h, w), centre ``((w + offset) step_w, (h + offset) step_h)``; for each min_size s: a box of side
    s, then (with max_size m) side sqrt(s m), then s sqrt(r) x s / sqrt(r) for each ratio r != 1.
    Boxes are divided by the image size and clipped to [0, 1] when ``clip``. Channel 1 holds the
    variances (one value for all four coordinates, or four; default 0.1).

    prototxt: ``prior_box_param { min_size: [] (required), max_size: [], aspect_ratio: [],
    flip: true, clip: false, variance: [], img_size / img_h / img_w: 0 (default: bottom[1]'s),
    step / step_h / step_w: 0 (default: image size / map size), offset: 0.5 }``.
    Bottoms: feature map (N x C x H x W), image (N x C x H_img x W_img).
    Top: 1 x 2 x (H W num_priors 4).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.prior_box_param
        self.min_sizes = [float(s) for s in p.min_size]
        self.max_sizes = [float(s) for s in p.max_size]
        if not self.min_sizes or any(s <= 0 for s in self.min_sizes):
            raise self.error("prior_box_param needs min_size values > 0")
        if self.max_sizes and len(self.max_sizes) != len(self.min_sizes):
            raise self.error("max_size must be given once per min_size")
        if any(m <= s for s, m in zip(self.min_sizes, self.max_sizes)):
            raise self.error("each max_size must be greater than its min_size")
        ars = [1.0]
        for r in p.aspect_ratio:
            if any(abs(r - a) < 1e-6 for a in ars):
                continue
            ars.append(float(r))
            if p.flip:
                ars.append(1.0 / r)
        self.ars = ars
        self.num_priors = len(ars) * len(self.min_sizes) + len(self.max_sizes)
        var = list(p.variance) or [0.1]
        if len(var) not in (1, 4) or any(v <= 0 for v in var):
            raise self.error("variance must be 1 or 4 positive values, got %s" % var)
        self.variance = var * 4 if len(var) == 1 else var
        self.img_h = p.img_h or p.img_size
        self.img_w = p.img_w or p.img_size
        self.step_h = p.step_h or p.step
        self.step_w = p.step_w or p.step
        self.offset, self.clip = p.offset, p.clip

    def reshape(self, bottom, top):
        H, W = bottom[0].shape[2], bottom[0].shape[3]
        top[0].reshape(1, 2, H * W * self.num_priors * 4)

    def _sizes(self):
        out = []
        for i, s in enumerate(self.min_sizes):
            out.append((s, s))
            if self.max_sizes:
                m = math.sqrt(s * self.max_sizes[i])
                out.append((m, m))
            for r in self.ars:
                if abs(r - 1.0) >= 1e-6:
                    out.append((s * math.sqrt(r), s / math.sqrt(r)))
        return np.array(out)  # (num_priors, 2): width, height

    def _grid(self, bottom):
        """(H, W, image height, image width, step_h, step_w) of the feature map's cells."""
        H, W = bottom[0].shape[2], bottom[0].shape[3]
        img_h = self.img_h or bottom[1].shape[2]
        img_w = self.img_w or bottom[1].shape[3]
        return (H, W, img_h, img_w, self.step_h or img_h / float(H),
                self.step_w or img_w / float(W))

    @staticmethod
    def _corners(boxes, cx, cy, wh, img_w, img_h):
        """Fills boxes (H x W x P x 4) with normalised (xmin, ymin, xmax, ymax) of each size in
        wh centred at (cx[w], cy[h])."""
        boxes[..., 0] = (cx[None, :, None] - wh[:, 0] / 2) / img_w
        boxes[..., 1] = (cy[:, None, None] - wh[:, 1] / 2) / img_h
        boxes[..., 2] = (cx[None, :, None] + wh[:, 0] / 2) / img_w
        boxes[..., 3] = (cy[:, None, None] + wh[:, 1] / 2) / img_h

    def _emit(self, top, boxes):
        """Top 0: the (clipped) boxes in channel 0, each box's variance in channel 1."""
        if self.clip:
            np.clip(boxes, 0.0, 1.0, out=boxes)
        top[0].data[0, 0] = boxes.ravel()
        top[0].data[0, 1] = np.tile(self.variance, boxes.size // 4)

    def forward_cpu(self, bottom, top):
        H, W, img_h, img_w, step_h, step_w = self._grid(bottom)
        cy = (np.arange(H) + self.offset) * step_h
        cx = (np.arange(W) + self.offset) * step_w
        wh = self._sizes()
        boxes = np.empty((H, W, len(wh), 4))
        self._corners(boxes, cx, cy, wh, img_w, img_h)
        self._emit(top, boxes)


def decode_boxes(prior, var, loc, code_type, variance_encoded_in_target=False):
    """SSD's DecodeBBox for arrays: prior/var (P x 4), loc (P x 4) -> boxes (P x 4)."""
    v = np.ones_like(var) if variance_encoded_in_target else var
    pw, ph = prior[:, 2] - prior[:, 0], prior[:, 3] - prior[:, 1]
    if code_type == 1:                                   # CORNER
        return prior + loc * v
    if code_type == 3:                                   # CORNER_SIZE
        scale = np.stack([pw, ph, pw, ph], axis=1)
        return prior + loc * v * scale
    cx = (prior[:, 0] + prior[:, 2]) / 2 + v[:, 0] * loc[:, 0] * pw    # CENTER_SIZE
    cy = (prior[:, 1] + prior[:, 3]) / 2 + v[:, 1] * loc[:, 1] * ph
    w = np.exp(v[:, 2] * loc[:, 2]) * pw
    h = np.exp(v[:, 3] * loc[:, 3]) * ph
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def jaccard(box, boxes):
    """IoU of one normalised box with each row of ``boxes`` (no +1, empty boxes have size 0)."""
    iw = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    ih = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)

    def size(b):
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        return np.where((w < 0) | (h < 0), 0.0, w * h)
    union = size(box) + size(boxes) - inter
    return np.where(inter > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms_fast(boxes, scores, score_threshold, nms_threshold, eta=1.0, top_k=-1):
    """SSD's ApplyNMSFast: indices kept, by descending score."""
    order = np.nonzero(scores > score_threshold)[0]
    order = order[np.argsort(-scores[order], kind="stable")]
    if top_k > -1:
        order = order[:top_k]
    keep, thr = [], nms_threshold
    for i in order:
        if not keep or np.all(jaccard(boxes[i], boxes[keep]) <= thr):
            keep.append(int(i))
            if eta < 1 and thr > 0.5:
                thr *= eta
    return keep


@register_layer("DetectionOutput")
class DetectionOutputLayer(Layer):
    """Decode SSD predictions, per-class NMS, keep the best (SSD). Forward only.

    For each image and class c != background_label_id: decode the boxes (``code_type``
    CORNER / CENTER_SIZE / CORNER_SIZE with the prior variances), keep scores above
    ``confidence_threshold``, the best ``nms_param.top_k``, then greedy NMS at ``nms_threshold``
    (adaptive with eta < 1). Over all classes keep the ``keep_top_k`` best. Rows:
    ``[image_id, label, score, xmin, ymin, xmax, ymax]``, by image, label, descending score; with
    no detection at all, one row per image of -1 with its image_id.

    prototxt: ``detection_output_param { num_classes (required), share_location: true,
    background_label_id: 0, nms_param { nms_threshold: 0.3, top_k, eta: 1 },
    code_type: CORNER, variance_encoded_in_target: false, keep_top_k: -1,
    confidence_threshold (default: all), clip: false }`` (save_output_param / visualize are not
    supported). ``clip`` is OpenCV's (opencv/opencv,
    modules/dnn/src/layers/detection_output_layer.cpp, DecodeBBox; the face detector's
    deploy.prototxt sets it): each decoded box's corners are
    clamped to [0, 1] before NMS, so NMS, the box sizes and the rows all see the clipped box
    (OpenCV clips to the image of a 4th bottom only with ``normalized_bbox: false``, which caffepy
    does not read: its boxes are normalised).
    Bottoms: loc (N x P*L*4, L = 1 if share_location else num_classes), conf (N x P*num_classes),
    priors (1 x 2 x P*4) [, any blob: SSD reads a 4th bottom only to draw on with ``visualize``
    (e.g. the images; pynetbuilder's test nets pass the labels); ignored]. Top:
    1 x 1 x num_kept x 7.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 3
    max_bottom_blobs = 4
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_output_param
        if p.num_classes <= 0:
            raise self.error("detection_output_param.num_classes must be > 0")
        yolo = [f for f in ("side", "num_box", "nms_threshold") if p.HasField(f)] + (
            ["biases"] if len(p.biases) else [])
        if yolo:                # caffe-yolov2's one-bottom layer reads them; SSD's does not
            raise self.error("detection_output_param.%s is caffe-yolov2's (its one-bottom "
                             "DetectionOutput); SSD's reads nms_param { nms_threshold }"
                             % yolo[0])
        self.num_classes = int(p.num_classes)
        self.share_location = p.share_location
        self.num_loc_classes = 1 if p.share_location else self.num_classes
        self.background = int(p.background_label_id)
        self.code_type = int(p.code_type)
        self.variance_encoded = p.variance_encoded_in_target
        self.keep_top_k = int(p.keep_top_k)
        self.conf_threshold = p.confidence_threshold if p.HasField("confidence_threshold") \
            else -float("inf")
        self.nms_threshold = p.nms_param.nms_threshold
        self.eta = p.nms_param.eta
        self.top_k = p.nms_param.top_k if p.nms_param.HasField("top_k") else -1
        if self.nms_threshold < 0 or not 0 < self.eta <= 1:
            raise self.error("nms_threshold must be >= 0 and eta in (0, 1]")
        self.clip = bool(p.clip)
        if self.clip and type(self)._decoded is not DetectionOutputLayer._decoded:
            raise self.error("clip (OpenCV's clipped decoding) is not supported by this "
                             "DetectionOutput variant")

    def reshape(self, bottom, top):
        self.P = bottom[2].shape[-1] // 4
        N = bottom[0].shape[0]
        if bottom[0].count != N * self.P * self.num_loc_classes * 4:
            raise self.error("loc has %d values per image; expected %d priors x %d x 4"
                             % (bottom[0].count // N, self.P, self.num_loc_classes))
        if bottom[1].count != N * self.P * self.num_classes:
            raise self.error("conf has %d values per image; expected %d priors x %d classes"
                             % (bottom[1].count // max(N, 1), self.P, self.num_classes))
        top[0].reshape(1, 1, 1, 7)

    loc_values, row_width = 4, 7        # per prior and loc class; per output row

    def _decoded(self, loc, prior):
        """Per loc class of one image (loc: P x L x loc_values): the P x 4 boxes NMS runs on and
        the P x (row_width - 3) coordinates its rows report."""
        boxes = [decode_boxes(prior[0], prior[1], loc[:, k], self.code_type,
                              self.variance_encoded) for k in range(self.num_loc_classes)]
        if self.clip:
            boxes = [np.clip(b, 0.0, 1.0) for b in boxes]
        return [(b, b) for b in boxes]

    def _image_prior(self, bottom, n, prior):
        """Image n's priors (2 x P x 4: boxes, variances)."""
        return prior

    def _image_conf(self, bottom, n, conf):
        """Image n's scores (P x num_classes)."""
        return conf

    def forward_cpu(self, bottom, top):
        N, P, L = bottom[0].shape[0], self.P, self.num_loc_classes
        loc = bottom[0].data.reshape(N, P, L, self.loc_values).astype(np.float64)
        conf = bottom[1].data.reshape(N, P, self.num_classes).astype(np.float64)
        prior = bottom[2].data.reshape(2, P, 4).astype(np.float64)
        rows = []
        for n in range(N):
            dets = []
            decoded = self._decoded(loc[n], self._image_prior(bottom, n, prior))
            scores = self._image_conf(bottom, n, conf[n])
            for c in range(self.num_classes):
                if c == self.background:
                    continue
                b, coords = decoded[0 if self.share_location else c]
                s = scores[:, c]
                for i in nms_fast(b, s, self.conf_threshold, self.nms_threshold, self.eta,
                                  self.top_k):
                    dets.append((c, s[i], coords[i]))
            if self.keep_top_k > -1 and len(dets) > self.keep_top_k:
                order = np.argsort([-d[1] for d in dets], kind="stable")[:self.keep_top_k]
                dets = [dets[i] for i in sorted(order, key=lambda i: (dets[i][0], -dets[i][1]))]
            rows += [[n, c, s] + list(box) for c, s, box in dets]
        if not rows:
            out = np.full((N, self.row_width), -1.0)
            out[:, 0] = np.arange(N)
        else:
            out = np.array(rows)
        top[0].reshape(1, 1, out.shape[0], self.row_width)
        top[0].data[...] = out.reshape(top[0].shape)
