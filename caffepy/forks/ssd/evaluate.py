"""SSD's DetectionEvaluate (weiliu89/caffe): per-class true / false positive lists for mAP.

The output is the input of SSD's solver-side mAP (``ComputeAP``): rows of 5 values.
"""
import logging

import numpy as np

from ...layers.base import Layer, register_layer

log = logging.getLogger(__name__)


def _size(b, normalized):
    """SSD's BBoxSize of [xmin, ymin, xmax, ymax] rows: 0 when inverted; +1 pixel when not
    normalized."""
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    if not normalized:
        w, h = w + 1, h + 1
    return np.where((b[..., 2] < b[..., 0]) | (b[..., 3] < b[..., 1]), 0.0, w * h)


def jaccard(box, gts, normalized=True):
    """SSD's JaccardOverlap of one box with each row of ``gts`` (its quirk kept: with the +1
    pixel convention, boxes that do not meet share an intersection [0, 0, 0, 0] of size 1)."""
    apart = (gts[:, 0] > box[2]) | (gts[:, 2] < box[0]) | (gts[:, 1] > box[3]) | (gts[:, 3] < box[1])
    iw = np.where(apart, 0.0, np.minimum(box[2], gts[:, 2]) - np.maximum(box[0], gts[:, 0]))
    ih = np.where(apart, 0.0, np.minimum(box[3], gts[:, 3]) - np.maximum(box[1], gts[:, 1]))
    if not normalized:
        iw, ih = iw + 1, ih + 1
    meet = (iw > 0) & (ih > 0)
    inter = np.where(meet, iw * ih, 0.0)
    union = _size(box, normalized) + _size(gts, normalized) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meet, inter / union, 0.0)


def _to_pixels(boxes, size):
    """SSD's OutputBBox without a resize (or WARP): clip to [0, 1], scale to the image."""
    h, w = size
    b = np.clip(boxes, 0.0, 1.0) * np.array([w, h, w, h], np.float64)
    return b


@register_layer("DetectionEvaluate")
class DetectionEvaluateLayer(Layer):
    """Match detections to ground truth, per image and class, as SSD's solver evaluates.

    Bottom 0: detections 1 x 1 x D x 7 ``[image_id, label, score, xmin, ymin, xmax, ymax]``
    (DetectionOutput's rows; rows with label -1 are "no detection"). Bottom 1: ground truth
    1 x 1 x G x 8 ``[image_id, label, instance_id, xmin, ymin, xmax, ymax, difficult]``; the list
    ends at the first image_id -1.
    Top: 1 x 1 x (P + D') x 5 with P the positive classes (``num_classes`` less the background)
    and D' the valid detections:
      * one row per positive class c, ascending: ``[-1, c, number of ground-truth boxes of c, -1, -1]``
        (difficult boxes count only with ``evaluate_difficult_gt``);
      * then per image (ascending id) and label (ascending), the detections
        ``[image_id, label, score, tp, fp]``: with no ground truth of that label in the image, in
        input order with tp 0, fp 1; else by descending score, each matched to the ground truth
        of largest Jaccard overlap: overlap >= ``overlap_threshold`` and that box not yet taken
        gives tp 1 (it is then taken), taken gives fp 1, below the threshold fp 1; a match to a
        difficult box without ``evaluate_difficult_gt`` gives 0, 0.
    With ``name_size_file`` (lines ``name height width``, one per test image, cycled), boxes are
    clipped to [0, 1] and scaled to the image (pixel overlaps, +1 convention) as SSD's OutputBBox
    does without a resize or with WARP; other resize modes are not supported. A name_size_file
    that cannot be read is reported in one WARNING and normalised boxes are used.

    prototxt: ``detection_evaluate_param { num_classes (required) background_label_id: 0
    overlap_threshold: 0.5 evaluate_difficult_gt: true name_size_file resize_param }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_evaluate_param
        if not p.HasField("num_classes"):
            raise self.error("detection_evaluate_param.num_classes is required")
        if p.overlap_threshold <= 0:
            raise self.error("overlap_threshold must be positive, got %g" % p.overlap_threshold)
        self.num_classes, self.background = int(p.num_classes), int(p.background_label_id)
        self.threshold, self.difficult = float(p.overlap_threshold), bool(p.evaluate_difficult_gt)
        self.sizes, self.count = [], 0
        if p.name_size_file:
            self.sizes = self._read_sizes(p.name_size_file)
        if self.sizes and p.HasField("resize_param") and p.resize_param.resize_mode not in (
                0, p.resize_param.WARP):
            raise self.error("resize_param.resize_mode %d is not supported with name_size_file"
                             % p.resize_param.resize_mode)

    def _read_sizes(self, path):
        try:
            with open(path) as f:
                words = f.read().split()
        except OSError as e:
            log.warning("layer '%s' (DetectionEvaluate): cannot read name_size_file %s (%s); "
                        "overlaps are taken on normalised boxes", self.layer_param.name, path,
                        e.strerror or e)
            return []
        try:
            return [(int(words[i + 1]), int(words[i + 2])) for i in range(0, len(words) - 2, 3)]
        except ValueError:
            raise self.error("name_size_file %s: lines must read 'name height width'" % path)

    def reshape(self, bottom, top):
        det, gt = bottom
        if det.num_axes != 4 or det.shape[:2] != (1, 1) or det.shape[3] != 7:
            raise self.error("bottom[0] must be 1 x 1 x D x 7, got %s" % (det.shape,))
        if gt.num_axes != 4 or gt.shape[:2] != (1, 1) or gt.shape[3] != 8:
            raise self.error("bottom[1] must be 1 x 1 x G x 8, got %s" % (gt.shape,))
        positive = self.num_classes - (0 if self.background == -1 else 1)
        valid = int((det.data[0, 0, :, 1] != -1).sum())
        top[0].reshape(1, 1, positive + valid, 5)

    def _ground_truth(self, gt):
        out = {}
        for row in gt:
            if int(row[0]) == -1:
                break
            label = int(row[1])
            if label == self.background:
                raise self.error("found the background label %d in the ground truth" % label)
            out.setdefault(int(row[0]), {}).setdefault(label, []).append(row)
        return {i: {l: np.array(r) for l, r in d.items()} for i, d in out.items()}

    def forward_cpu(self, bottom, top):
        gts = self._ground_truth(bottom[1].data[0, 0].astype(np.float64))
        dets = {}
        for row in bottom[0].data[0, 0].astype(np.float64):
            if int(row[0]) == -1:
                continue
            if int(row[1]) == self.background:
                raise self.error("found the background label in the detections")
            dets.setdefault(int(row[0]), {}).setdefault(int(row[1]), []).append(row)
        rows = []
        for c in range(self.num_classes):
            if c == self.background:
                continue
            n = sum(int(self.difficult) * len(g) + int(not self.difficult) * int(
                (g[:, 7] == 0).sum()) for d in gts.values() for l, g in d.items() if l == c)
            rows.append([-1, c, n, -1, -1])
        for image in sorted(dets):
            for label in sorted(dets[image]):
                if label == -1:
                    continue
                found = np.array(dets[image][label])
                truth = gts.get(image, {}).get(label)
                if truth is None:
                    rows.extend([image, label, d[2], 0, 1] for d in found)
                    continue
                rows.extend(self._match(image, label, found, truth))
            if self.sizes:
                self.count = (self.count + 1) % len(self.sizes)
        out = np.array(rows, np.float64).reshape(-1, 5)
        top[0].reshape(1, 1, len(out), 5)
        top[0].data[0, 0] = out

    def _match(self, image, label, found, truth):
        found = found[np.argsort(-found[:, 2], kind="stable")]
        boxes, gt_boxes, normalized = found[:, 3:7], truth[:, 3:7], True
        if self.sizes:
            size = self.sizes[self.count]
            boxes, gt_boxes, normalized = _to_pixels(boxes, size), _to_pixels(gt_boxes, size), False
        taken = np.zeros(len(truth), bool)
        rows = []
        for d, box in zip(found, boxes):
            overlaps = jaccard(box, gt_boxes, normalized)
            j = int(np.argmax(overlaps))
            tp = fp = 0
            if overlaps[j] >= self.threshold:
                if self.difficult or not truth[j, 7]:
                    tp, fp = (0, 1) if taken[j] else (1, 0)
                    taken[j] = True
            else:
                fp = 1
            rows.append([image, label, d[2], tp, fp])
        return rows

    def backward_cpu(self, top, propagate_down, bottom):
        pass
