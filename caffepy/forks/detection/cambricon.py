"""Cambricon/caffe's ImageDetect (its V1 IMAGE_DETECT): Faster R-CNN box decoding and per-class
non-maximum suppression for the final detections, as the fork's CPU forward does it."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


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
