"""Training / evaluation layers of zhaoweicai/mscnn and zhaoweicai/cascade-rcnn train and test nets.

``HardMining``, ``BboxAccuracy``, ``FrcnnOutput`` and MSCNN's ``DetectionAccuracy`` run (forward as the forks); ``ProposalTarget`` is in
``cascade_target.py``. The others are built with the
forks' top shapes so that their train / test files build (``caffepy summary``, net setup), but
their forward is not written in caffepy yet: running it raises a one-line error naming the layer
(see docs/zoo_coverage.md). Cascade R-CNN's ``DetectionEvaluate`` (a variant of SSD's) is in ``cascade_target.py``.
"""
import numpy as np

from ...layers.base import Layer, register_layer
from .mscnn import box_iou, greedy_nms
from .mscnn_train import bbox_norm


@register_layer("HardMining")
class HardMiningLayer(Layer):
    """Cascade R-CNN's OHEM selection: keep the B = min(num_image x num_roi_per_image, R) rois of
    highest ranking score.

    Bottom 0: R ranking scores (R x 1 x 1 x 1), bottom 1: rois R x 5 (image id, x1, y1, x2, y2),
    bottoms 2..: R x ... blobs. Per image (id in [0, num_image)) the rois are sorted by (score,
    index) descending and the first ``num_roi_per_image`` kept; when fewer than B are kept the
    rest are filled with the highest of the left-over rois; the kept indices are sorted
    ascending and top k = bottom k + 1 at those rows. No backward (propagate_down false).

    prototxt: ``hard_mining_param { num_roi_per_image: 128 num_image: 4 }``.
    """
    min_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.hard_mining_param
        if len(bottom) != len(top) + 1:
            raise self.error("needs one top per bottom after the first (%d bottoms, %d tops)"
                             % (len(bottom), len(top)))
        self.per, self.nimg = int(p.num_roi_per_image), int(p.num_image)
        if self.per <= 0 or self.nimg <= 0:
            raise self.error("hard_mining_param num_roi_per_image and num_image must be > 0")

    def reshape(self, bottom, top):
        r = bottom[0].shape[0]
        if bottom[0].count != r:
            raise self.error("bottom 0 (ranking scores) must be R x 1 x 1 x 1, got %s"
                             % (tuple(bottom[0].shape),))
        if bottom[1].num_axes < 2 or bottom[1].shape[1] != 5:
            raise self.error("bottom 1 (rois) must be R x 5, got %s" % (tuple(bottom[1].shape),))
        self.B = min(self.nimg * self.per, r)
        for k, t in enumerate(top):
            if bottom[k + 1].shape[0] != r:
                raise self.error("bottom %d has %d rows, bottom 0 has %d"
                                 % (k + 1, bottom[k + 1].shape[0], r))
            t.reshape((self.B,) + tuple(bottom[k + 1].shape[1:]))

    def forward_cpu(self, bottom, top):
        score = bottom[0].data.ravel()
        img = bottom[1].data.reshape(len(score), -1)[:, 0].astype(np.int64)
        if len(img) and (img.min() < 0 or img.max() >= self.nimg):
            raise self.error("roi image id out of [0, %d)" % self.nimg)
        keep, left = [], []
        for i in range(self.nimg):
            rows = sorted(((score[j], j) for j in np.flatnonzero(img == i)), reverse=True)
            keep += [j for _, j in rows[:self.per]]
            left += rows[self.per:]
        left.sort(reverse=True)
        keep += [j for _, j in left[:self.B - len(keep)]]
        keep = np.sort(np.asarray(keep, np.int64))
        for k, t in enumerate(top):
            t.data[...] = bottom[k + 1].data[keep]


@register_layer("BboxAccuracy")
class BboxAccuracyLayer(Layer):
    """Mean IoU of the regressed boxes with their matched ground truth (MSCNN / Cascade R-CNN).

    Bottoms: box predictions R x 4 M (deltas per class; M = 2 when not ``cls_aware``, class
    min(label, 1)), rois R x 5 (id, x1, y1, x2, y2), matched gt R x 6 (label, x1, y1, x2, y2,
    overlap). Rows with label > 0 count (F of them) unless overlap > 0.975 (left out of both sums).
    Box from roi (x, y, w = x2 - x + 1, h) and delta d (de-normalised by ``bbox_reg_param``):
    w' = w e^{d_w}, h' = h e^{d_h}, x' = d_x w + x + w / 2 - w' / 2, y' likewise; IoU as MSCNN's
    BoxIOU of [x, y, w, h] boxes with the gt (w = x2 - x1 + 1).
    Top 0: sum IoU(box, gt) / F (-1 when F = 0); top 1: the same for the roi itself.
    No backward.

    prototxt: ``bbox_reg_param { bbox_mean bbox_std cls_aware: false }``.
    """
    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.mean, self.std = bbox_norm(self.layer_param, self.error)
        self.aware = self.layer_param.bbox_reg_param.cls_aware

    def reshape(self, bottom, top):
        n = bottom[0].shape[0]
        if bottom[1].shape[0] != n or bottom[2].shape[0] != n:
            raise self.error("bottoms must have the same number of rows, got %s"
                             % [tuple(b.shape) for b in bottom])
        for t in top:
            t.reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        pred = bottom[0].data.reshape(n, -1).astype(np.float64)
        rois = bottom[1].data.reshape(n, -1).astype(np.float64)
        gt = bottom[2].data.reshape(n, -1).astype(np.float64)
        lab = gt[:, 0]
        skip = (lab > 0) & (gt[:, -1] > 0.975)
        fg = int(((lab > 0) & ~skip).sum())
        after = roi_sum = 0.0
        for i in range(n):
            c = int(lab[i])
            if c <= 0 or skip[i]:
                continue
            c = c if self.aware else min(c, 1)
            if pred.shape[1] < 4 * (c + 1):
                raise self.error("bottom 0 has %d values per row, class %d needs %d"
                                 % (pred.shape[1], c, 4 * (c + 1)))
            d = pred[i, 4 * c:4 * c + 4] * self.std + self.mean
            x, y = rois[i, 1], rois[i, 2]
            w, h = rois[i, 3] - x + 1, rois[i, 4] - y + 1
            bw, bh = w * np.exp(d[2]), h * np.exp(d[3])
            bx, by = d[0] * w + x + 0.5 * w - bw / 2, d[1] * h + y + 0.5 * h - bh / 2
            g = (gt[i, 1], gt[i, 2], gt[i, 3] - gt[i, 1] + 1, gt[i, 4] - gt[i, 2] + 1)
            after += box_iou((bx, by, bw, bh), g)
            roi_sum += box_iou((x, y, w, h), g)
        top[0].data[...] = after / fg if fg else -1.0
        if len(top) > 1:
            top[1].data[...] = roi_sum / fg if fg else -1.0


class _BuildOnly(Layer):
    """Shapes only; ``forward`` names the layer and says it is not implemented."""

    def forward_cpu(self, bottom, top):
        raise self.error("the forward of zhaoweicai's %s is not implemented in caffepy (the net "
                         "builds; see docs/zoo_coverage.md)" % self.layer_param.type)


@register_layer("DetectionAccuracy")
class MSCNNDetectionAccuracyLayer(Layer):
    """MSCNN's per-branch accuracy (no caffe-yolo layer has this type name).

    Bottoms: N x (K + 4) x H x W scores and box offsets, labels N x 6 x H x W (class c, centre /
    size x, y, w, h, overlap o; c -> min(c, 1) with ``objectness`` for the class part).
    Counted cells: c != ignore_label and not (c = 0 and o >= ``bg_threshold``). A cell is right when
    c is among its ``top_k`` scores (ranked by (score, class) descending).
    top 0 = [right / counted, right positives / positives] (-1 when a count is 0).
    top 1 (optional) = mean IoU at positives (raw c != 0) of the decoded box: offsets
    de-normalised (``bbox_reg_param``), x, y clipped to +-1 / field_xyr and w, h to +-log field_whr,
    centre = t f + (cell + 0.5) d, size = f e^t, against the label box (MSCNN's BoxIOU); -1 if none.
    No backward.

    prototxt: ``detection_accuracy_param { cls_num coord_num: 4 field_h field_w downsample_rate
    top_k: 1 field_whr: 2 field_xyr: 4 bg_threshold: 0.5 objectness: false }``,
    ``loss_param { ignore_label }``.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.p = self.layer_param.detection_accuracy_param
        self.K = int(self.p.cls_num)
        self.mean, self.std = bbox_norm(self.layer_param, self.error)
        self.norm = len(self.layer_param.bbox_reg_param.bbox_mean) > 0
        lp = self.layer_param.loss_param
        self.ignore = lp.ignore_label if lp.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        b, l = tuple(bottom[0].shape), tuple(bottom[1].shape)
        if len(b) != 4 or len(l) != 4 or b[0] != l[0] or b[2:] != l[2:] or \
                b[1] != self.K + self.p.coord_num or l[1] != 2 + self.p.coord_num:
            raise self.error("bottoms must be N x (cls_num + coord_num) x H x W and N x "
                             "(2 + coord_num) x H x W, got %s and %s" % (b, l))
        if self.p.top_k < 1 or self.p.top_k > self.K:
            raise self.error("top_k must be in [1, cls_num]")
        top[0].reshape((1, 1, 1, 2))
        if len(top) > 1:
            top[1].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        p, K = self.p, self.K
        x, lab = bottom[0].data.astype(np.float64), bottom[1].data.astype(np.float64)
        N, _, H, W = x.shape
        raw = lab[:, 0].astype(np.int64)
        c = np.minimum(raw, 1) if p.objectness else raw
        ov = lab[:, 1 + p.coord_num]
        counted = ~((c == 0) & (ov >= p.bg_threshold))
        if self.ignore is not None:
            counted &= c != self.ignore
        # rank classes by (score, class) descending: the k-th best
        order = np.lexsort((np.broadcast_to(np.arange(K)[None, :, None, None], x[:, :K].shape),
                            x[:, :K]), axis=1)[:, ::-1][:, :p.top_k]
        right = (order == c[:, None]).any(axis=1) & counted
        fore = counted & (c != 0)
        acc = right.sum() / counted.sum() if counted.any() else -1.0
        facc = (right & fore).sum() / fore.sum() if fore.any() else -1.0
        top[0].data[...] = np.array([acc, facc]).reshape(1, 1, 1, 2)
        if len(top) < 2:
            return
        xyr, whr = 1.0 / p.field_xyr, np.log(p.field_whr)
        d, fw, fh = float(p.downsample_rate), float(p.field_w), float(p.field_h)
        ious = []
        for i, h, w in zip(*np.nonzero(raw != 0)):
            if self.ignore is not None and raw[i, h, w] == self.ignore:
                continue
            t = x[i, K:K + 4, h, w]
            if self.norm:
                t = t * self.std + self.mean
            tx, ty = np.clip(t[:2], -xyr, xyr)
            tw, th = np.clip(t[2:], -whr, whr)
            bw, bh = fw * np.exp(tw), fh * np.exp(th)
            bx, by = tx * fw + (w + 0.5) * d - bw / 2, ty * fh + (h + 0.5) * d - bh / 2
            gx, gy, gw, gh = lab[i, 1:5, h, w]
            ious.append(box_iou((bx, by, bw, bh), (gx - gw / 2, gy - gh / 2, gw, gh)))
        top[1].data[...] = np.mean(ious) if ious else -1.0


class _GroupBase(_BuildOnly):
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        p = getattr(self.layer_param, self.param_field)
        g = max(len(p.field_h), 1)
        n = bottom[0].shape[0]
        if n % g or bottom[1].shape[0] != n or bottom[2].shape[0] != n:
            raise self.error("bottoms must have the same N, a multiple of the %d field sizes; got "
                             "%s" % (g, [tuple(b.shape) for b in bottom]))
        if bottom[0].shape[1] != p.cls_num or bottom[1].shape[1] != 4 or bottom[2].shape[1] != 6:
            raise self.error("bottoms must be N x cls_num (%d), N x 4 and N x 6 (x H x W); got %s"
                             % (p.cls_num, [tuple(b.shape) for b in bottom]))
        top[0].reshape((1, 1, 1, 2))
        for t in top[1:]:
            t.reshape((1, 1, 1, 1))


@register_layer("DetectionGroupLoss")
class DetectionGroupLossLayer(_GroupBase):
    """Cascade R-CNN's RPN loss over groups of anchors sharing a stride. Bottoms: scores
    N x K x H x W, boxes N x 4 x H x W, labels N x 6 x H x W (N = images x groups). Top:
    1 x 1 x 1 x 2. prototxt: ``detection_group_loss_param { cls_num lambda: 1 field_h field_w
    (one each per group) stride field_whr: 4 field_xyr: 0.25 bg_threshold: 0.5 bg_multiple: 4
    neg_mining_type: "random" neg_ranking_type: "conf_loss" min_num_neg: 5 objectness: false
    batch_size: -1 pos_neg_weighted: false bbox_loss_type: "Smooth_L1" }``. Forward not done."""
    param_field = "detection_group_loss_param"
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True


@register_layer("DetectionGroupAccuracy")
class DetectionGroupAccuracyLayer(_GroupBase):
    """Cascade R-CNN's RPN accuracy (bottoms as DetectionGroupLoss). Tops: 1 x 1 x 1 x 2
    [, 1 x 1 x 1 x 1]. prototxt: ``detection_group_accuracy_param { cls_num field_h field_w stride
    field_whr: 2 field_xyr: 4 bg_threshold: 0.5 objectness: false }``. Forward not done."""
    param_field = "detection_group_accuracy_param"
    min_top_blobs = 1
    max_top_blobs = 2


@register_layer("FrcnnOutput")
class FrcnnOutputLayer(Layer):
    """Cascade R-CNN's detection output for one image.

    Bottoms: probabilities R x K, box offsets R x 4 K (``bbox_reg_param.cls_aware``) or R x 8,
    rois R x 5 or 6 (image 0, x1, y1, x2, y2[, score]), image size 1 x 2 (height, width).
    Each offset set decodes against its roi (w = x2 - x1 + 1, centre c; offsets x std + mean):
    bw = w e^dw, x1' = dx w + cx - (bw - 1) / 2, x2' = x1' + bw - 1 (y alike). Per class c >= 1:
    boxes with score >= ``conf_thr`` (class c's offsets, or the foreground set when not
    cls_aware), clipped to [0, width] x [0, height], sorted by score, greedy NMS dropping overlaps
    > ``iou_thr`` (the fork's inclusive JaccardOverlap, ``nms_type`` IOU / IOMU / IOFU); with
    ``max_det_num`` > 0 only the best that many over all classes stay.
    Top: (1 + D) x 7 rows (image, x1, y1, x2, y2, label, score); row 0 is the image's header
    (0, then -1s). ``save_output_param`` (writing result files) is refused. No backward.

    prototxt: ``frcnn_output_param { conf_thr: 0 iou_thr: 0.5 nms_type: "IOU" max_det_num: 0 }``,
    ``bbox_reg_param { bbox_mean bbox_std cls_aware: true }``.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.p = self.layer_param.frcnn_output_param
        if self.p.HasField("save_output_param") and self.p.save_output_param.output_directory:
            raise self.error("frcnn_output_param save_output_param (writing result files) is not "
                             "supported")
        self.mean, self.std = bbox_norm(self.layer_param, self.error)
        self.aware = self.layer_param.bbox_reg_param.cls_aware

    def reshape(self, bottom, top):
        r = bottom[0].shape[0]
        c1 = 4 * bottom[0].shape[1] if self.aware else 8
        if bottom[1].shape[0] != r or bottom[2].shape[0] != r or bottom[1].shape[1] != c1 or \
                bottom[2].shape[1] not in (5, 6) or tuple(bottom[3].shape[:2]) != (1, 2):
            raise self.error("bottoms must be R x K, R x %d, R x 5|6 and 1 x 2, got %s"
                             % (c1, [tuple(b.shape) for b in bottom]))
        top[0].reshape((1, 7, 1, 1))

    def forward_cpu(self, bottom, top):
        from .cascade_rcnn import jaccard
        p = self.p
        prob = bottom[0].data.reshape(bottom[0].shape[0], -1).astype(np.float64)
        R, K = prob.shape
        off = bottom[1].data.reshape(R, -1, 4).astype(np.float64) * self.std + self.mean
        rois = bottom[2].data.reshape(R, -1).astype(np.float64)
        if R and (rois[:, 0] != 0).any():
            raise self.error("rois must all belong to image 0 (batch size 1, as the fork)")
        height, width = bottom[3].data.ravel()[:2]
        w, h = rois[:, 3] - rois[:, 1] + 1, rois[:, 4] - rois[:, 2] + 1
        cx, cy = 0.5 * (rois[:, 1] + rois[:, 3]), 0.5 * (rois[:, 2] + rois[:, 4])
        bw, bh = w[:, None] * np.exp(off[..., 2]), h[:, None] * np.exp(off[..., 3])
        x1 = off[..., 0] * w[:, None] + cx[:, None] - (bw - 1) / 2
        y1 = off[..., 1] * h[:, None] + cy[:, None] - (bh - 1) / 2
        boxes = np.stack([x1, y1, x1 + bw - 1, y1 + bh - 1], axis=-1)
        dets = []
        for c in range(1, K):
            j = c if self.aware else 1
            idx = np.flatnonzero(prob[:, c] >= p.conf_thr)
            idx = idx[np.argsort(-prob[idx, c], kind="stable")]
            b = boxes[idx, j].copy()
            b[:, :2] = np.maximum(b[:, :2], 0)
            b[:, 2] = np.minimum(b[:, 2], width)
            b[:, 3] = np.minimum(b[:, 3], height)
            alive = greedy_nms(b, jaccard, p.nms_type, p.iou_thr)
            dets += [(c, prob[i, c], b[n]) for n, i in enumerate(idx) if alive[n]]
        if p.max_det_num > 0 and len(dets) > p.max_det_num:
            best = sorted(range(len(dets)), key=lambda n: -dets[n][1])[:p.max_det_num]
            dets = [dets[n] for n in sorted(best)]
        out = -np.ones((1 + len(dets), 7))
        out[0, 0] = 0
        for n, (c, s, b) in enumerate(dets):
            out[1 + n] = [0, b[0], b[1], b[2], b[3], c, s]
        top[0].reshape((len(out), 7, 1, 1))
        top[0].data[...] = out.reshape(top[0].shape)
