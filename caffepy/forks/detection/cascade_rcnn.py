"""Cascade R-CNN's caffe (zhaoweicai/cascade-rcnn): ``BoxGroupOutput``, its RPN proposal layer
(anchor groups per branch). Its ``DecodeBBox`` is MSCNN's (``mscnn.py``).
"""
import numpy as np

from ...layers.base import Layer, register_layer
from .mscnn import nms_proposals
from .roi import features_diff_wanted


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
            kept = nms_proposals(boxes[np.argsort(-boxes[:, 4], kind="stable")], p, jaccard)
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


def _box_size(r):
    return 0.0 if (r[2] < r[0] or r[3] < r[1]) else (r[2] - r[0] + 1) * (r[3] - r[1] + 1)


@register_layer("ScaleRoute")
class ScaleRouteLayer(Layer):
    """Route RoIs to an FPN level by size: keep the rows whose scale sqrt((x2 - x1 + 1)(y2 - y1 + 1))
    of bottom 0 (rois, R x 5) is in [low_scale, high_scale), from every bottom (all with R rows);
    when none is, the one row whose log2(scale / mid) is smallest, mid = sqrt(low high) (or the one
    given, or 256). One top per bottom. No backward (the fork requires propagate_down false).

    prototxt: ``scale_route_param { low_scale (0) high_scale (FLT_MAX) }``.
    """
    min_bottom_blobs = 1
    min_top_blobs = 1
    equal_num_bottom_top_blobs = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.scale_route_param
        self.low = float(p.low_scale) if p.HasField("low_scale") else 0.0
        self.high = float(p.high_scale) if p.HasField("high_scale") else float("inf")
        if p.HasField("low_scale") and p.HasField("high_scale"):
            self.mid = float(np.sqrt(self.low * self.high))
        else:
            self.mid = self.low if p.HasField("low_scale") else \
                self.high if p.HasField("high_scale") else 256.0
        if self.high < self.low or self.mid <= 0:
            raise self.error("scale_route_param needs 0 < low_scale <= high_scale")

    def reshape(self, bottom, top):
        if bottom[0].count_range(1) != 5:
            raise self.error("bottom 0 must be R x 5 rois, got %s" % (bottom[0].shape,))
        for b, t in zip(bottom, top):
            if b.shape[0] != bottom[0].shape[0]:
                raise self.error("every bottom needs one row per roi")
            t.reshape((1,) + tuple(b.shape[1:]))       # the fork's dummy shape

    def forward_cpu(self, bottom, top):
        rois = bottom[0].data.reshape(-1, 5).astype(np.float64)
        scale = np.sqrt([_box_size(r) for r in rois[:, 1:]])
        keep = np.flatnonzero((scale >= self.low) & (scale < self.high))
        if not len(keep):
            with np.errstate(divide="ignore"):
                keep = np.array([int(np.argmin(np.abs(np.log2(scale / self.mid))))])
        for b, t in zip(bottom, top):
            t.reshape((len(keep),) + tuple(b.shape[1:]))
            t.data[...] = b.data[keep]

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("cannot backpropagate (the fork requires propagate_down: false)")


@register_layer("ROIAlign")
class ROIAlignLayer(Layer):
    """Cascade R-CNN's ROIAlign: bilinear samples on a (pooled_h + 1) x (pooled_w + 1) grid.

    With pad = pad_ratio (x2 - x1 + 1) (y alike), the roi on the map is
    [(x1 - pad) scale - 0.5, (x2 + pad) scale - 0.5] (y alike); bin = size / pooled; sample
    (i, j) at (y0 + i bin_h, x0 + j bin_w), i = 0 .. pooled_h, bilinear from the 4 neighbours
    (coordinates and neighbours clipped to the map). A sample outside [-0.5, H - 0.5] x
    [-0.5, W - 0.5], or any sample of an empty roi, is 0. Backward: each sample's gradient goes
    to its neighbours with the same weights.

    prototxt: ``roi_pooling_param { pooled_h pooled_w spatial_scale: 1 pad_ratio: 0 }``.
    Bottoms: features (N x C x H x W), rois (R x 5). Top: R x C x (pooled_h + 1) x (pooled_w + 1).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_pooling_param
        self.ph, self.pw, self.scale = int(p.pooled_h), int(p.pooled_w), float(p.spatial_scale)
        self.pad_ratio = float(getattr(p, "pad_ratio", 0.0))
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("roi_pooling_param pooled_h and pooled_w must be > 0")

    def reshape(self, bottom, top):
        if bottom[1].count_range(1) != 5:
            raise self.error("rois must be R x 5, got %s" % (bottom[1].shape,))
        top[0].reshape((bottom[1].shape[0], bottom[0].shape[1], self.ph + 1, self.pw + 1))

    def _samples(self, roi, H, W):
        """Per grid point: (valid, y0, y1, x0, x1, w00, w01, w10, w11) arrays."""
        pw_, ph_ = ((roi[3] - roi[1] + 1) * self.pad_ratio, (roi[4] - roi[2] + 1) * self.pad_ratio)
        x0, y0 = (roi[1] - pw_) * self.scale - 0.5, (roi[2] - ph_) * self.scale - 0.5
        x1, y1 = (roi[3] + pw_) * self.scale - 0.5, (roi[4] + ph_) * self.scale - 0.5
        rh, rw = y1 - y0, x1 - x0
        hs = y0 + np.arange(self.ph + 1) * (rh / self.ph)
        ws = x0 + np.arange(self.pw + 1) * (rw / self.pw)
        hf, wf = np.meshgrid(hs, ws, indexing="ij")
        valid = (hf >= -0.5) & (hf <= H - 0.5) & (wf >= -0.5) & (wf <= W - 0.5) & \
            (rh > 0) & (rw > 0)
        hlo, wlo = np.floor(hf).astype(int), np.floor(wf).astype(int)
        hhi, whi = np.clip(hlo + 1, 0, H - 1), np.clip(wlo + 1, 0, W - 1)
        hlo, wlo = np.clip(hlo, 0, H - 1), np.clip(wlo, 0, W - 1)
        hf, wf = np.clip(hf, 0, H - 1), np.clip(wf, 0, W - 1)
        lh, lw = hf - hlo, wf - wlo
        return valid, hlo, hhi, wlo, whi, (1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw), lh * lw

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        out = np.zeros(top[0].shape)
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5).astype(np.float64)):
            b = int(roi[0])
            if not 0 <= b < N:
                raise self.error("roi %d names image %d of %d" % (r, b, N))
            v, hlo, hhi, wlo, whi, w00, w01, w10, w11 = self._samples(roi, H, W)
            f = x[b]
            val = (w00 * f[:, hlo, wlo] + w01 * f[:, hlo, whi] + w10 * f[:, hhi, wlo] +
                   w11 * f[:, hhi, whi])
            out[r] = np.where(v, val, 0.0)
        top[0].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        dx = np.zeros((N, C, H, W))
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5).astype(np.float64)):
            b = int(roi[0])
            v, hlo, hhi, wlo, whi, w00, w01, w10, w11 = self._samples(roi, H, W)
            g = top[0].diff[r] * v
            for hi, wi, wt in ((hlo, wlo, w00), (hlo, whi, w01), (hhi, wlo, w10), (hhi, whi, w11)):
                np.add.at(dx[b], (slice(None), hi, wi), g * wt)
        bottom[0].diff[...] = dx
