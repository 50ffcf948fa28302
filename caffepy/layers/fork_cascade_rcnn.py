"""Cascade R-CNN's caffe (zhaoweicai/cascade-rcnn): ``BoxGroupOutput``, its RPN proposal layer
(anchor groups per branch). Its ``DecodeBBox`` is MSCNN's (``fork_mscnn.py``).
"""
import numpy as np

from .base import Layer, register_layer


def jaccard(a, b, mode="IOU"):
    """The fork's JaccardOverlap of [x1, y1, x2, y2] boxes (+1 sizes; note its x test is strict
    and its y test is not); IOMU divides by the smaller area, IOFU by the first box's."""
    def size(r):
        return 0.0 if (r[2] < r[0] or r[3] < r[1]) else (r[2] - r[0] + 1) * (r[3] - r[1] + 1)
    if a[2] < a[0] or a[3] < a[1] or b[2] < b[0] or b[3] < b[1]:
        return 0.0
    ix1, iy1, ix2, iy2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = 0.0 if (ix1 > ix2 or iy1 >= iy2) else (ix2 - ix1 + 1) * (iy2 - iy1 + 1)
    sa, sb = size(a), size(b)
    union = min(sa, sb) if mode == "IOMU" else sa if mode == "IOFU" else sa + sb - inter
    return 0.0 if union <= 0 else inter / union


@register_layer("BoxGroupOutput")
class BoxGroupOutputLayer(Layer):
    """Proposals from (probability, box) bottom pairs, one pair per branch j with G_j anchor
    groups (field sizes fw_k x fh_k) and stride s_j. Bottoms 2j: probabilities (N G_j x C x h x w,
    background in channel 0); 2j + 1: offsets (N G_j x 4 x h x w). For image i, group k, cell
    (h, w):

        score = 1 - p_background; kept when score >= fg_thr
        (dx, dy, dw, dh) = offsets * bbox_std + bbox_mean, dx, dy clipped to +-1 / field_xyr and
        dw, dh to +-log field_whr; cx = dx fw + (w + 0.5) s, bw = fw e^dw (y alike)
        box = (cx - bw / 2, cy - bh / 2, x1 + bw - 1, y1 + bh - 1), clipped to [0, w s] x [0, h s]
        dropped when x2 - x1 + 1 or y2 - y1 + 1 is below min_size
    then per image: the ``max_nms_num`` highest scores (0: all; equal scores keep their order),
    greedy NMS (overlap > iou_thr, ``jaccard`` with ``nms_type``), at most ``max_post_nms_num``.
    Tops: rois (R x 5 x 1 x 1), [R x 6 with the score]; no box: one dummy roi (0, 1, 1, 10, 10).
    No backward.

    prototxt: ``box_group_output_param { fg_thr: 0 iou_thr: 0.5 nms_type: "IOU" box_group_param {
    field_h field_w (one per group) stride } (one per bottom pair) field_whr: 2 field_xyr: 2
    max_nms_num: 0 max_post_nms_num: 0 min_size: 15 }``, ``bbox_reg_param``.
    """
    min_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.box_group_output_param
        if len(bottom) % 2 or len(p.box_group_param) != len(bottom) // 2:
            raise self.error("needs (probabilities, offsets) bottom pairs, one box_group_param each "
                             "(%d bottoms, %d box_group_param)" % (len(bottom), len(p.box_group_param)))
        for g in p.box_group_param:
            if len(g.field_h) != len(g.field_w) or not len(g.field_w) or not g.stride:
                raise self.error("each box_group_param needs as many field_h as field_w and a stride")
        self.p = p
        r = self.layer_param.bbox_reg_param
        self.mean, self.std = np.zeros(4), np.ones(4)
        if len(r.bbox_mean) and len(r.bbox_std):
            if len(r.bbox_mean) != 4 or len(r.bbox_std) != 4:
                raise self.error("bbox_reg_param needs 4 bbox_mean and 4 bbox_std values")
            self.mean, self.std = np.asarray(r.bbox_mean, float), np.asarray(r.bbox_std, float)

    def reshape(self, bottom, top):
        n = None
        for j, g in enumerate(self.p.box_group_param):
            prob, off = bottom[2 * j], bottom[2 * j + 1]
            G = len(g.field_w)
            if prob.num_axes != 4 or off.num_axes != 4 or off.shape[1] != 4 or \
                    prob.shape[0] != off.shape[0] or prob.shape[2:] != off.shape[2:] or \
                    prob.shape[0] % G:
                raise self.error("pair %d: probabilities %s and offsets %s do not fit %d groups"
                                 % (j, prob.shape, off.shape, G))
            if n not in (None, prob.shape[0] // G):
                raise self.error("the bottom pairs disagree on the number of images")
            n = prob.shape[0] // G
        self.num = n
        top[0].reshape((1, 5, 1, 1))
        if len(top) > 1:
            top[1].reshape((1, 6, 1, 1))

    def _candidates(self, bottom, i):
        p = self.p
        xyr, whr = 1.0 / p.field_xyr, np.log(p.field_whr)
        out = []
        for j, g in enumerate(p.box_group_param):
            G, s = len(g.field_w), float(g.stride)
            for k in range(G):
                prob = bottom[2 * j].data[i * G + k].astype(np.float64)
                off = bottom[2 * j + 1].data[i * G + k].astype(np.float64)
                H, W = off.shape[1:]
                off = off * self.std[:, None, None] + self.mean[:, None, None]
                hh, ww = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
                fw, fh = float(g.field_w[k]), float(g.field_h[k])
                dx, dy = np.clip(off[0], -xyr, xyr), np.clip(off[1], -xyr, xyr)
                dw, dh = np.clip(off[2], -whr, whr), np.clip(off[3], -whr, whr)
                bw, bh = fw * np.exp(dw), fh * np.exp(dh)
                x1, y1 = dx * fw + (ww + 0.5) * s - bw / 2, dy * fh + (hh + 0.5) * s - bh / 2
                x2, y2 = x1 + bw - 1, y1 + bh - 1
                x1, y1 = np.maximum(x1, 0), np.maximum(y1, 0)
                x2, y2 = np.minimum(x2, W * s), np.minimum(y2, H * s)
                score = 1 - prob[0]
                keep = (score >= p.fg_thr) & (x2 - x1 + 1 >= p.min_size) & (y2 - y1 + 1 >= p.min_size)
                out.append(np.stack([x1, y1, x2, y2, score], axis=-1)[keep])
        return np.concatenate(out)

    def forward_cpu(self, bottom, top):
        p = self.p
        rows = []
        for i in range(self.num):
            boxes = self._candidates(bottom, i)
            if not len(boxes):
                continue
            boxes = boxes[np.argsort(-boxes[:, 4], kind="stable")]
            if p.max_nms_num and len(boxes) > p.max_nms_num:
                boxes = boxes[:p.max_nms_num]
            alive = np.ones(len(boxes), bool)
            for a in range(len(boxes)):
                if not alive[a]:
                    continue
                for b in range(a + 1, len(boxes)):
                    if alive[b] and jaccard(boxes[a], boxes[b], p.nms_type) > p.iou_thr:
                        alive[b] = False
            kept = boxes[alive]
            if p.max_post_nms_num:
                kept = kept[:p.max_post_nms_num]
            rows.extend([[i] + list(r) for r in kept])
        rows = np.asarray(rows, np.float64).reshape(-1, 6)
        empty = not len(rows)
        if empty:                               # the fork's dummy roi and all-zero scored row
            rows = np.array([[0, 1, 1, 10, 10, 0]], np.float64)
        top[0].reshape((len(rows), 5, 1, 1))
        top[0].data[...] = rows[:, :5].reshape(-1, 5, 1, 1)
        if len(top) > 1:
            top[1].reshape((len(rows), 6, 1, 1))
            top[1].data[...] = 0 if empty else rows.reshape(-1, 6, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        pass
