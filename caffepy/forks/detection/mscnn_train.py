"""MSCNN's training loss (zhaoweicai/mscnn ``DetectionLoss``), a per-layer variant of the
``DetectionLoss`` type name that caffe-yolo registered first: it is built when the layer sets
MSCNN's fields of ``detection_loss_param`` (``cls_num``, ``field_h``, ...; caffe-yolo's are ``side``,
``num_class``, ...).
"""
import numpy as np

from ...layers.base import Layer, register_variant
from ...layers.loss_regression import SmoothL1LossLayer

_FLT_MIN = float(np.finfo(np.float32).tiny)
_MSCNN_FIELDS = ("cls_num", "coord_num", "lambda", "field_h", "field_w", "downsample_rate",
                 "bb_smooth", "field_whr", "field_xyr", "bg_threshold", "bg_multiple",
                 "sample_mode", "objectness", "iou_weighted", "pos_neg_weighted")


def is_mscnn_detection_loss(lp):
    p = lp.detection_loss_param
    return any(p.HasField(f) for f in _MSCNN_FIELDS)


def bbox_norm(lp, error):
    """(mean, std) of ``bbox_reg_param`` (4 each), or (0, 1)."""
    r = lp.bbox_reg_param
    if len(r.bbox_mean) and len(r.bbox_std):
        if len(r.bbox_mean) != 4 or len(r.bbox_std) != 4 or min(r.bbox_std) <= 0:
            raise error("bbox_reg_param needs 4 bbox_mean and 4 positive bbox_std values")
        return np.asarray(r.bbox_mean, np.float64), np.asarray(r.bbox_std, np.float64)
    return np.zeros(4), np.ones(4)


@register_variant("DetectionLoss", is_mscnn_detection_loss)
class MSCNNDetectionLossLayer(Layer):
    """MSCNN's per-branch detection loss: softmax over K classes plus box regression at every cell.

    Bottom 0: N x (K + 4) x H x W (K = ``cls_num`` class scores, then 4 box offsets t).
    Bottom 1: N x (2 + 4) x H x W labels: class c, box centre / size (x, y, w, h) in image pixels,
    overlap o (the reader's). With ``objectness`` c is min(c, 1) (K must be 2).
    Negatives kept for the class loss (cells with c = 0 and o < ``bg_threshold``):
    ``sample_mode`` "random": max(P m, 4 (K - 1)) cells drawn uniformly (P positives of the image,
    m = ``bg_multiple``; a cell drawn twice counts once); "bootstrap": per class k >= 1 the
    max(4, n_k m) negatives of highest raw score k; "mixture": both with m / 2; anything else: all.
    Weights w = 1, = o at positives with ``iou_weighted``; with ``pos_neg_weighted`` positives are
    scaled by S / (1 + m) / sum(w_pos) and kept negatives (and all other cells) by
    S m / (1 + m) / sum(w_neg), S = kept negatives + positives (when sum(w_pos) > 0).
    cls = sum over positives and kept negatives of -w log max(p_c, FLT_MIN) / their count.
    At positives (label != ignore_label, c != 0) with stride d and field (f_w, f_h):
        g = ((x - (w + 0.5) d) / f_w, (y - (h + 0.5) d) / f_h, log(max(w, 2) / f_w),
             log(max(h, 2) / f_h)), normalised (g - mean) / std (``bbox_reg_param``);
        t clipped to +-1 / field_xyr (x, y) and +-log field_whr (w, h), both normalised by the
        mean / geometric-mean std pairs as the fork; delta = t - g;
    coord = sum smooth_L1(delta) (``bb_smooth``, else delta^2 / 2) / (4 positives).
    Top (1 x 1 x 1 x 2): [cls + lambda coord, lambda coord].
    Backward (the fork's): top diff[0] x (w (p - onehot) / cls count at the counted cells; clamp(delta,
    -1, 1) (bb_smooth) or delta, x lambda / (4 positives) at positives; 0 elsewhere).

    prototxt: ``detection_loss_param { cls_num coord_num: 4 lambda: 1 field_h field_w
    downsample_rate bb_smooth: true field_whr: 2 field_xyr: 2 bg_threshold: 0.5 bg_multiple: 4
    sample_mode: "random" objectness: false iou_weighted: false pos_neg_weighted: false }``,
    ``bbox_reg_param { bbox_mean bbox_std }``, ``loss_param { ignore_label }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        self.p = p = self.layer_param.detection_loss_param
        self.K, self.C = int(p.cls_num), int(p.coord_num)
        if self.C != 4:
            raise self.error("detection_loss_param coord_num must be 4 (got %d)" % self.C)
        self.mean, self.std = bbox_norm(self.layer_param, self.error)
        lp = self.layer_param.loss_param
        self.ignore = lp.ignore_label if lp.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        b, l = bottom[0].shape, bottom[1].shape
        if len(b) != 4 or b[1] != self.K + self.C:
            raise self.error("bottom 0 must be N x (cls_num + coord_num) = N x %d x H x W, got %s"
                             % (self.K + self.C, tuple(b)))
        if len(l) != 4 or l[0] != b[0] or l[2:] != b[2:] or l[1] < 2 + self.C:
            raise self.error("bottom 1 (labels) must be N x %d x %d x %d, got %s"
                             % (2 + self.C, b[2], b[3], tuple(l)))
        if self.p.objectness and self.K != 2:
            raise self.error("objectness needs cls_num 2")
        top[0].reshape((1, 1, 1, 2))

    def _keep(self, x, cls, ov):
        """Kept negatives (the fork's sampling); cls, ov: N x S."""
        p, N, S = self.p, cls.shape[0], cls.shape[1]
        keep = np.zeros((N, S), bool)
        neg = (cls == 0) & (ov < p.bg_threshold)
        mode = p.sample_mode
        ratio = 0.5 if mode == "mixture" else 1.0
        for i in range(N):
            counts = np.bincount(cls[i], minlength=self.K)
            if mode in ("random", "mixture"):
                draws = max(int(int((cls[i] != 0).sum()) * p.bg_multiple * ratio), 4 * (self.K - 1))
                idx = self.rng().integers(0, S, size=draws)
                keep[i, idx[neg[i, idx]]] = True
            if mode in ("bootstrap", "mixture"):
                cand = np.flatnonzero(neg[i])
                for k in range(1, self.K):
                    n = min(max(4, int(counts[k] * p.bg_multiple * ratio)), cand.size)
                    if n:
                        order = np.lexsort((-cand, -x[i, k].ravel()[cand]))  # score, then index
                        keep[i, cand[order[:n]]] = True
            if mode not in ("random", "mixture", "bootstrap"):
                keep[i] = neg[i]
        return keep

    def forward_cpu(self, bottom, top):
        p, K = self.p, self.K
        x = bottom[0].data.astype(np.float64)
        lab = bottom[1].data
        N, _, H, W = x.shape
        S = H * W
        raw = lab[:, 0].reshape(N, S).astype(np.int64)
        cls = np.minimum(raw, 1) if p.objectness else raw
        ov = lab[:, 1 + self.C].reshape(N, S)
        keep = self._keep(x, cls, ov)
        pos = cls != 0
        wmap = np.ones((N, S))
        if p.iou_weighted:
            wmap[pos] = ov[pos]
        if p.pos_neg_weighted:
            pw, nw = wmap[pos].sum(), wmap[keep & ~pos].sum()
            fg, sn = 1.0 / (1 + p.bg_multiple), keep.sum() + pos.sum()
            if pw != 0:
                wmap = np.where(pos, wmap * (fg * sn / pw), wmap * ((1 - fg) * sn / nw))
        s = x[:, :K].reshape(N, K, S)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        prob = e / e.sum(axis=1, keepdims=True)
        counted = pos | keep
        if self.ignore is not None:
            counted &= cls != self.ignore
        ci = np.clip(cls, 0, K - 1)
        pc = np.take_along_axis(prob, ci[:, None, :], axis=1)[:, 0]
        n_cls = int(counted.sum())
        cls_loss = float(-(np.log(np.maximum(pc, _FLT_MIN)) * wmap)[counted].sum()) / max(n_cls, 1)
        # regression
        m, sd = self.mean, self.std
        whr, xyr = np.log(p.field_whr), 1.0 / p.field_xyr
        xm, wm = (m[0] + m[1]) / 2, (m[2] + m[3]) / 2
        xs, ws = np.sqrt(sd[0] * sd[1]), np.sqrt(sd[2] * sd[3])
        lo = np.array([(-xyr - xm) / xs, (-xyr - xm) / xs, (-whr - wm) / ws, (-whr - wm) / ws])
        hi = np.array([(xyr - xm) / xs, (xyr - xm) / xs, (whr - wm) / ws, (whr - wm) / ws])
        regp = (raw != 0) if self.ignore is None else (raw != 0) & (raw != self.ignore)
        hh, ww = np.divmod(np.arange(S), W)
        d, fw, fh = float(p.downsample_rate), float(p.field_w), float(p.field_h)
        g = np.stack([(lab[:, 1].reshape(N, S) - (ww + 0.5) * d) / fw,
                      (lab[:, 2].reshape(N, S) - (hh + 0.5) * d) / fh,
                      np.log(np.maximum(lab[:, 3].reshape(N, S), 2.0) / fw),
                      np.log(np.maximum(lab[:, 4].reshape(N, S), 2.0) / fh)], axis=1)
        g = (g - m[None, :, None]) / sd[None, :, None]
        t = np.clip(x[:, K:].reshape(N, 4, S), lo[None, :, None], hi[None, :, None])
        delta = np.where(regp[:, None, :], t - g, 0.0)
        if p.bb_smooth:
            a = np.abs(delta)
            coord = float(np.where(a < 1, 0.5 * delta * delta, a - 0.5).sum())
            delta = np.clip(delta, -1.0, 1.0)
        else:
            coord = float((delta * delta).sum()) / 2
        n_coord = 4 * int(regp.sum())
        coord = coord / n_coord if n_coord else 0.0
        top[0].data[...] = np.array([cls_loss + getattr(p, "lambda") * coord,
                                     getattr(p, "lambda") * coord]).reshape(1, 1, 1, 2)
        self._saved = (prob, ci, counted, wmap, n_cls, delta, n_coord)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input (bottom 1)")
        if not propagate_down[0]:
            return
        prob, ci, counted, wmap, n_cls, delta, n_coord = self._saved
        N, K, S = prob.shape
        gc = prob.copy()
        np.put_along_axis(gc, ci[:, None, :], np.take_along_axis(gc, ci[:, None, :], 1) - 1, 1)
        gc *= (counted * wmap)[:, None, :]
        lw = float(top[0].diff.ravel()[0])
        if n_cls:
            gc *= lw / n_cls
        gr = delta * (lw * getattr(self.p, "lambda") / n_coord) if n_coord else delta * 0
        H, W = bottom[0].shape[2:]
        bottom[0].diff[...] = np.concatenate([gc, gr], axis=1).reshape(N, K + 4, H, W)


def _is_cascade_smooth_l1(lp):
    return len(lp.bottom) == 4 and len(lp.top) == 2


@register_variant("SmoothL1Loss", _is_cascade_smooth_l1)
class CascadeSmoothL1LossLayer(SmoothL1LossLayer):
    """Cascade R-CNN's SmoothL1Loss (its R-FCN OHEM nets): py-faster-rcnn's loss (sigma, inside
    and outside weights, / N; see ``SmoothL1LossLayer``) with a second top, the loss of every
    instance: top 1 (N x 1 x H x W) = sum over channels of w_out f(w_in (a - b)). The gradient is
    the first top's (top 1's diff is not read). Chosen for 4 bottoms and 2 tops.
    """
    min_top_blobs = 1
    max_top_blobs = 2
    exact_num_top_blobs = None

    def reshape(self, bottom, top):
        SmoothL1LossLayer.reshape(self, bottom, top[:1])
        s = bottom[0].shape
        if len(top) > 1:
            top[1].reshape((s[0], 1) + tuple(s[2:]) if len(s) > 2 else (s[0], 1))

    def forward_cpu(self, bottom, top):
        SmoothL1LossLayer.forward_cpu(self, bottom, top[:1])
        if len(top) > 1:
            d = self.d
            ad = np.abs(d)
            err = np.where(ad < 1.0 / self.sigma2, 0.5 * self.sigma2 * d * d, ad - 0.5 / self.sigma2)
            err = err * self._weight(bottom, 3)
            top[1].data[...] = err.sum(axis=1).reshape(top[1].shape)
