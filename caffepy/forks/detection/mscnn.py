"""MSCNN's caffe (zhaoweicai/mscnn): ``BoxOutput``, the multi-scale proposal layer of its deploy
nets. Its ROIPooling ``pad_ratio`` (context padding) is read by ``roi.ROIPoolingLayer``.
"""
import numpy as np

from ...layers.base import Layer, register_layer

_FLT_MAX = float(np.finfo(np.float32).max)


def box_iou(a, b, mode="IOU"):
    """MSCNN's BoxIOU of [x, y, w, h] boxes: overlap / union ("IOU"), / the smaller area ("IOMU"),
    / the first area ("IOFU"); 0 for an empty box."""
    if a[2] <= 0 or a[3] <= 0 or b[2] <= 0 or b[3] <= 0:
        return 0.0
    tlx, tly = max(a[0], b[0]), max(a[1], b[1])
    brx, bry = min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    over = 0.0 if (tlx >= brx or tly >= bry) else (brx - tlx) * (bry - tly)
    if mode == "IOMU":
        u = min(a[2] * a[3], b[2] * b[3])
    elif mode == "IOFU":
        u = a[2] * a[3]
    else:
        u = a[2] * a[3] + b[2] * b[3] - over
    return over / u


def greedy_nms(boxes, overlap, mode, threshold):
    """MSCNN's and Cascade R-CNN's NMS over boxes sorted best first: box b is dropped when
    ``overlap(boxes[a], boxes[b], mode)`` exceeds ``threshold`` for a kept a before it.
    Returns the keep mask."""
    alive = np.ones(len(boxes), bool)
    for a in range(len(boxes)):
        if not alive[a]:
            continue
        for b in range(a + 1, len(boxes)):
            if alive[b] and overlap(boxes[a], boxes[b], mode) > threshold:
                alive[b] = False
    return alive


def nms_proposals(boxes, p, overlap):
    """``BoxOutput``/``BoxGroupOutput``'s per-image step on score-sorted boxes: the first
    ``max_nms_num`` (0: all), :func:`greedy_nms` at ``iou_thr`` by ``nms_type``, then the first
    ``max_post_nms_num`` (0: all) of those kept."""
    if p.max_nms_num and len(boxes) > p.max_nms_num:
        boxes = boxes[:p.max_nms_num]
    kept = boxes[greedy_nms(boxes, overlap, p.nms_type, p.iou_thr)]
    if p.max_post_nms_num:
        kept = kept[:p.max_post_nms_num]
    return kept


@register_layer("BoxOutput")
class BoxOutputLayer(Layer):
    """Proposals from several detection branches, one bottom per branch j (N x (K + 4) x h x w:
    K class scores, background first, then 4 box offsets), with field size (fw_j, fh_j) and
    stride d_j. At each cell (h, w) of image i:

        score = max_{k >= 1} s_k - s_0; kept when score >= fg_thr
        (dx, dy, dw, dh) = offsets * bbox_std + bbox_mean (when bbox_reg_param gives both)
        dx, dy clipped to [-1 / field_xyr, 1 / field_xyr]; dw, dh to [-log whr, log whr]
        cx = dx fw + (w + 0.5) d, cy = dy fh + (h + 0.5) d; bw = fw e^dw, bh = fh e^dh
        x = max(cx - bw / 2, 0), y = max(cy - bh / 2, 0); bw = min(bw, w d - x), bh likewise
        boxes with bw or bh below min_size are dropped
    then per image: sort by score (descending; equal scores by the higher index first), keep
    ``max_nms_num`` (0: all), greedy NMS with BoxIOU > iou_thr (``nms_type`` IOU / IOMU / IOFU),
    keep ``max_post_nms_num`` (0: all).
    Tops: rois (R x 5 x 1 x 1: image, x1, y1, x2 = x + bw, y2 = y + bh), [R x 6 with the score];
    with no box at all, one dummy roi (0, 1, 1, 10, 10) (and a zero row). No backward.

    prototxt: ``box_output_param { fg_thr: 0 iou_thr: 0.5 nms_type: "IOU" field_h field_w
    downsample_rate (one each per bottom) field_whr: 2 field_xyr: 2 max_nms_num: 0
    max_post_nms_num: 0 min_size: 15 }``, ``bbox_reg_param { bbox_mean bbox_std }`` (4 each).
    """
    min_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.box_output_param
        n = len(bottom)
        if not (len(p.field_h) == len(p.field_w) == len(p.downsample_rate) == n):
            raise self.error("box_output_param needs one field_h, field_w and downsample_rate per "
                             "bottom (%d bottoms; got %d, %d, %d)" % (n, len(p.field_h),
                                                                      len(p.field_w),
                                                                      len(p.downsample_rate)))
        self.p = p
        r = self.layer_param.bbox_reg_param
        self.norm = None
        if len(r.bbox_mean) and len(r.bbox_std):
            if len(r.bbox_mean) != 4 or len(r.bbox_std) != 4:
                raise self.error("bbox_reg_param needs 4 bbox_mean and 4 bbox_std values")
            self.norm = (np.asarray(r.bbox_mean, np.float64), np.asarray(r.bbox_std, np.float64))

    def reshape(self, bottom, top):
        for b in bottom:
            if b.num_axes != 4 or b.shape[0] != bottom[0].shape[0] or b.shape[1] < 5 or \
                    b.shape[1] != bottom[0].shape[1]:
                raise self.error("bottoms must be N x (classes + 4) x H x W alike, got %s"
                                 % [tuple(x.shape) for x in bottom])
        top[0].reshape((1, 5, 1, 1))           # the fork's dummy shape; forward sets the count
        if len(top) > 1:
            top[1].reshape((1, 6, 1, 1))

    def _candidates(self, bottom, i):
        p = self.p
        cls = bottom[0].shape[1] - 4
        xyr, whr = 1.0 / p.field_xyr, np.log(p.field_whr)
        out = []
        for j, b in enumerate(bottom):
            d, fw, fh = float(p.downsample_rate[j]), float(p.field_w[j]), float(p.field_h[j])
            x = b.data[i].astype(np.float64)
            H, W = x.shape[1:]
            score = (x[1:cls].max(axis=0) if cls > 1 else np.full((H, W), -_FLT_MAX)) - x[0]
            off = x[cls:cls + 4]
            if self.norm is not None:
                off = off * self.norm[1][:, None, None] + self.norm[0][:, None, None]
            hh, ww = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
            dx, dy = np.clip(off[0], -xyr, xyr), np.clip(off[1], -xyr, xyr)
            dw, dh = np.clip(off[2], -whr, whr), np.clip(off[3], -whr, whr)
            cx, cy = dx * fw + (ww + 0.5) * d, dy * fh + (hh + 0.5) * d
            bw, bh = fw * np.exp(dw), fh * np.exp(dh)
            bx, by = np.maximum(cx - bw / 2, 0), np.maximum(cy - bh / 2, 0)
            bw, bh = np.minimum(bw, W * d - bx), np.minimum(bh, H * d - by)
            keep = (score >= p.fg_thr) & (bw >= p.min_size) & (bh >= p.min_size)
            out.append(np.stack([bx, by, bw, bh, score], axis=-1)[keep])   # row-major cells
        return np.concatenate(out) if out else np.zeros((0, 5))

    def forward_cpu(self, bottom, top):
        p = self.p
        rows = []
        for i in range(bottom[0].shape[0]):
            boxes = self._candidates(bottom, i)
            if not len(boxes):
                continue
            # std::sort of (score, index) pairs with std::greater: higher index first on ties
            order = np.lexsort((-np.arange(len(boxes)), -boxes[:, 4]))
            kept = nms_proposals(boxes[order], p, box_iou)
            for bx, by, bw, bh, s in kept:
                rows.append([i, bx, by, bx + bw, by + bh, s])
        rows = np.asarray(rows, np.float64).reshape(-1, 6)
        if not len(rows):
            top[0].reshape((1, 5, 1, 1))
            top[0].data[...] = np.array([0, 1, 1, 10, 10]).reshape(1, 5, 1, 1)
            if len(top) > 1:
                top[1].reshape((1, 6, 1, 1))
                top[1].data[...] = 0
            return
        top[0].reshape((len(rows), 5, 1, 1))
        top[0].data[...] = rows[:, :5].reshape(-1, 5, 1, 1)
        if len(top) > 1:
            top[1].reshape((len(rows), 6, 1, 1))
            top[1].data[...] = rows.reshape(-1, 6, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("DecodeBBox")
class DecodeBBoxLayer(Layer):
    """Refine RoIs with class-agnostic box offsets (MSCNN's / Cascade R-CNN's next stage).

    Bottoms: offsets (R x 8: background then foreground (dx, dy, dw, dh)), rois (R x 5: image,
    x1, y1, x2, y2), [matched ground truth (R x ..., its IoU last; TRAIN only)]. With
    (dx, dy, dw, dh) = foreground offsets * bbox_std + bbox_mean, w = x2 - x1 + 1,
    h = y2 - y1 + 1, c = the roi centre:
        bw = w e^dw, bh = h e^dh; x1' = dx w + cx - (bw - 1) / 2, x2' = x1' + bw - 1 (y alike)
    In TRAIN, boxes with x1' > x2' or y1' > y2', and (with the third bottom) those whose ground
    truth IoU >= ``gt_iou_thr`` are dropped. Top: K x 5 (image, x1', y1', x2', y2'). No backward.

    prototxt: ``bbox_reg_param { bbox_mean (4) bbox_std (4) }`` (default 0 and 1),
    ``decode_bbox_param { gt_iou_thr: 0.95 }``.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        r = self.layer_param.bbox_reg_param
        self.mean, self.std = np.zeros(4), np.ones(4)
        if len(r.bbox_mean) and len(r.bbox_std):
            if len(r.bbox_mean) != 4 or len(r.bbox_std) != 4 or min(r.bbox_std) <= 0:
                raise self.error("bbox_reg_param needs 4 bbox_mean and 4 positive bbox_std values")
            self.mean, self.std = np.asarray(r.bbox_mean, float), np.asarray(r.bbox_std, float)
        if len(bottom) > 2 and self.phase != self._caffe_pb2.TRAIN:
            raise self.error("the ground-truth bottom is for the TRAIN phase only (as the fork)")

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        if bottom[0].count_range(1) != 8 or bottom[1].count_range(1) != 5 or \
                bottom[1].shape[0] != n or (len(bottom) > 2 and bottom[2].shape[0] != n):
            raise self.error("bottoms must be R x 8 offsets and R x 5 rois (got %s and %s)"
                             % (bottom[0].shape, bottom[1].shape))
        top[0].reshape(bottom[1].shape)

    def forward_cpu(self, bottom, top):
        d = bottom[0].data.reshape(-1, 8)[:, 4:].astype(np.float64) * self.std + self.mean
        rois = bottom[1].data.reshape(-1, 5).astype(np.float64)
        w, h = rois[:, 3] - rois[:, 1] + 1, rois[:, 4] - rois[:, 2] + 1
        cx, cy = 0.5 * (rois[:, 1] + rois[:, 3]), 0.5 * (rois[:, 2] + rois[:, 4])
        bw, bh = w * np.exp(d[:, 2]), h * np.exp(d[:, 3])
        x1, y1 = d[:, 0] * w + cx - (bw - 1) / 2, d[:, 1] * h + cy - (bh - 1) / 2
        out = np.stack([rois[:, 0], x1, y1, x1 + bw - 1, y1 + bh - 1], axis=1)
        keep = np.ones(len(out), bool)
        if self.phase == self._caffe_pb2.TRAIN:
            keep &= (out[:, 1] <= out[:, 3]) & (out[:, 2] <= out[:, 4])
            if len(bottom) > 2:
                gt = bottom[2].data.reshape(len(out), -1)
                keep &= gt[:, -1] < self.layer_param.decode_bbox_param.gt_iou_thr
        if not keep.any():
            raise self.error("no box left after decoding (the fork aborts too)")
        out = out[keep]
        top[0].reshape((len(out),) + tuple(bottom[1].shape[1:]))
        top[0].data[...] = out.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass
