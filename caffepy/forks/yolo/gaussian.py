"""Gaussian YOLOv3 on Caffe (eric612/MobileNet-YOLO's ``GaussianYolov3``): the box is four
Gaussians (mean and sigma each for x, y, w, h), trained with darknet-style deltas of their
negative log likelihood."""
import math

import numpy as np

from ...layers.base import register_layer
from .output import _sigmoid
from .loss import _center_iou, _Yolov3Base

RAW = (4, 6)            # mu_w, mu_h stay raw; every other channel goes through a sigmoid
SIGMA_CONST, EPSI = 0.3, 1e-9


@register_layer("GaussianYolov3")
class GaussianYolov3LossLayer(_Yolov3Base):
    """Gaussian YOLOv3's training loss on one output scale.

    Bottom 0: N x B*L x H x W, L = 9 + num_class: box n of cell (j, i) holds v0..v8 + classes
    with channels mu_x, sigma_x, mu_y, sigma_y, mu_w, sigma_w, mu_h, sigma_h, objectness,
    classes; s = sigmoid(v) except mu_w, mu_h (raw). Anchor a = mask[n]; predicted box
    x = (i + s0) / W, y = (j + s2) / H, w = exp(v4) biases[2a] / (W k), h = exp(v6)
    biases[2a+1] / (H k) (k = ``anchors_scale``). Bottom 1: as ``Yolov3`` (rows
    [class, x, y, w, h]).
    Delta D (plain IoU everywhere, ``iou_loss`` is not read):
      * every box: D8 = s8, 0 when its best IoU with a truth exceeds ``thresh``;
      * every truth, at cell (int(x W), int(y H)), the best-matching anchor of ``biases`` when it
        is in ``mask`` (and, with the fork's reuse of the mask index, the mask anchors whose IoU
        with the truth exceeds ``iou_thresh``): for each coordinate q with target
        t (tx = x W - i, ty = y H - j, tw = log(w W k / biases[2a]), th likewise), mean m and
        sigma s: z = (t - m) / s, g = exp(-z^2 / 2) / (sqrt(2 pi) (s + 0.3)),
        c = 0.5 g / (g + 1e-9) coord_scale (2 - w h), then
        D_mean -= n clip(c z / s), D_sigma -= n clip(c (z^2 / s - 1 / (s + 0.3)))
        (n = ``iou_normalizer``, clip to +-``max_delta``, NaN -> 0; without ``accumulate`` the
        8 box entries are reset first); D8 = -(1 - s8) (times object_scale with
        use_logic_gradient); classes: if the class-0 entry is already set, only
        D_label = -(1 - s_label); else D_c = -class_scale ([c = label] - s_c) (times 0.5 g_f with
        ``use_focal_loss``, g_f as in Yolov3), no label smoothing;
    loss = (sum of D^2 over objectness and classes + n sum(1 - IoU) / #matched) / N.
    Backward: top_diff D / N (D times s (1 - s) except on mu_w, mu_h with use_logic_gradient).

    prototxt: ``yolov3_param`` as ``Yolov3`` (num_class, num, biases, mask, anchors_scale, thresh,
    coord_scale, object_scale, class_scale, iou_normalizer, iou_thresh, max_delta, accumulate,
    use_logic_gradient, use_focal_loss). Top: the scalar loss.
    """
    box_values, box_channels = 9, (0, 2, 4, 6)

    def _box_delta(self, s, v, t, scale, D):
        p = self.p
        if not p.accumulate:
            D[:8] = 0
        for q in range(4):
            m = v[2 * q] if 2 * q in RAW else s[2 * q]
            sig = s[2 * q + 1]
            with np.errstate(divide="ignore", invalid="ignore"):
                z = (t[q] - m) / sig
                g = math.exp(-z * z / 2) / (math.sqrt(2 * math.pi) * (sig + SIGMA_CONST))
                c = 0.5 * g / (g + EPSI) * scale
                grads = np.array([c * z / sig, c * (z * z / sig - 1 / (sig + SIGMA_CONST))])
            grads = np.where(np.isfinite(grads * p.iou_normalizer), grads * p.iou_normalizer, 0)
            if p.max_delta != np.finfo(np.float32).max:
                grads = np.clip(grads, -p.max_delta, p.max_delta)
            D[2 * q] -= grads[0]
            D[2 * q + 1] -= grads[1]

    def _deltas(self, v, s, truths, D):
        p, (B, L, H, W), k = self.p, v.shape, float(self.p.anchors_scale)
        pred = self.pred_boxes(v, s)
        upto = next((t for t, r in enumerate(truths) if not r[1]), len(truths))
        D[:, 8] = s[:, 8]
        if upto:
            best = _center_iou(pred[:, :, :, None], truths[None, None, None, :upto, 1:]).max(-1)
            D[:, 8][best > p.thresh] = 0
        anchors = self.anchor_boxes(W, H, k)
        for cls, x, y, w, h in truths:
            if not w:
                break
            i, j, cls = int(x * W), int(y * H), int(cls)
            ious = _center_iou(anchors, np.array([0.0, 0.0, w, h]))
            for m in self.matched_anchors(ious):
                an = self.mask[m]
                t = (x * W - i, y * H - j, np.log(w * W * k / self.biases[2 * an]),
                     np.log(h * H * k / self.biases[2 * an + 1]))
                self._box_delta(s[m, :, j, i], v[m, :, j, i], t, p.coord_scale * (2 - w * h),
                                D[m, :, j, i])
                self.iou_terms.append(1 - float(_center_iou(pred[m, j, i], np.array([x, y, w, h]))))
                D[m, 8, j, i] = -(1 - s[m, 8, j, i]) * (p.object_scale if p.use_logic_gradient
                                                        else 1.0)
                sc = s[m, 9:, j, i]
                if D[m, 9, j, i]:
                    D[m, 9 + cls, j, i] = -(1 - sc[cls])
                    continue
                onehot = np.eye(self.num_class)[cls]
                D[m, 9:, j, i] = -p.class_scale * (onehot - sc)
                if p.use_focal_loss:
                    pt = sc[cls] + 1e-15
                    D[m, 9:, j, i] *= 0.5 * -(1 - pt) * (2 * pt * np.log(pt) + pt - 1)

    def forward_cpu(self, bottom, top):
        N, _, H, W = bottom[0].shape
        v = bottom[0].data.astype(np.float64).reshape(N, self.num, -1, H, W)
        s = _sigmoid(v)
        s[:, :, RAW] = v[:, :, RAW]
        labels = bottom[1].data.astype(np.float64).reshape(N, -1, 5)[:, :300]
        self.delta, self.iou_terms = np.zeros_like(v), []
        for b in range(N):
            self._deltas(v[b], s[b], labels[b], self.delta[b])
        self.delta_back = self.delta
        if self.p.use_logic_gradient:
            self.delta_back = self.delta * s * (1 - s)
            self.delta_back[:, :, RAW] = self.delta[:, :, RAW]
        loss = np.square(self.delta[:, :, 8:]).sum()
        if self.iou_terms:
            loss += self.p.iou_normalizer * sum(self.iou_terms) / len(self.iou_terms)
        top[0].data[...] = loss / N

    def backward_delta(self):
        return self.delta_back
