"""YOLO on Caffe (eric612/MobileNet-YOLO): the training losses RegionLoss (YOLOv2) and Yolov3
(YOLOv1's DetectionLoss, on the same delta base, is in v1.py).

Both follow darknet: the layer builds a "delta" D of the bottom's shape, its loss is sum(D^2) / N
and its backward passes top_diff D / N, which is not the derivative of that sum but the gradient
of a surrogate (scale/2 (t - f(v))^2 or scale BCE(t, sigmoid v) per entry, softmax cross entropy
for YOLOv2's classes); tests/forks/yolo/test_output.py checks the backward against a central
difference of that surrogate and the deltas against hand-computed cases.

Layout: bottom 0 is N x B*L x H x W with box n of cell (j, i) at channels n L .. (n+1) L - 1
(L = 5 + classes); bottom 1 holds per image up to 300 truths [class, x, y, w, h] (normalised
centre / size), the list ending at a zero x (matching) or zero w (assignment).
"""
import numpy as np

from ...layers.base import Layer, register_layer
from .output import _biases, _sigmoid
from .iou import CIOU, DIOU, GIOU, MSE, iou_gradient, variant_iou


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


class _DeltaLossLayer(Layer):
    """darknet-style losses: forward leaves the delta D in ``self.delta`` (bottom 0's shape);
    backward gives bottom 0 top_diff * :meth:`backward_delta` / N (labels get no gradient)."""

    def backward_delta(self):
        return self.delta

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to label inputs")
        if propagate_down[0]:
            alpha = float(top[0].diff) / bottom[0].shape[0]
            bottom[0].diff[...] = (alpha * self.backward_delta()).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


class _Yolov3Base(_DeltaLossLayer):
    """``Yolov3`` and ``GaussianYolov3``'s setup, shapes (bottom 0: N x num (box_values +
    num_class) x H x W) and the fork's choice of the anchors that learn a truth."""
    box_values = 5              # channels of a box before its class scores
    box_channels = (0, 1, 2, 3)     # x, y (sigmoid) and w, h (raw) of the predicted box
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.yolov3_param
        self.p, self.num_class, self.num = p, int(p.num_class), int(p.num)
        self.mask = [int(m) for m in p.mask][:self.num]
        if len(self.mask) < self.num:
            raise self.error("yolov3_param.mask needs %d entries, got %s" % (self.num, self.mask))
        self.biases = _biases(self, p.biases, max(self.mask) + 1)

    def reshape(self, bottom, top):
        length = self.box_values + self.num_class
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != self.num * length:
            raise self.error("bottom[0] must be N x %d x H x W (num * (%d + num_class)), got %s"
                             % (self.num * length, self.box_values, bottom[0].shape))
        if bottom[1].count % (bottom[0].shape[0] * 5):
            raise self.error("bottom[1] (labels) must hold rows of 5 values per image, got %s"
                             % (bottom[1].shape,))
        top[0].reshape(())

    def pred_boxes(self, v, s):
        """Each box of one image (v, s: B x L x H x W) as normalised x, y, w, h: B x H x W x 4."""
        (_, _, H, W), k = v.shape, float(self.p.anchors_scale)
        cx, cy, cw, ch = self.box_channels
        jj, ii = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        a = np.array(self.mask)
        return np.stack([(ii + s[:, cx]) / W, (jj + s[:, cy]) / H,
                         np.exp(v[:, cw]) * self.biases[2 * a][:, None, None] / (W * k),
                         np.exp(v[:, ch]) * self.biases[2 * a + 1][:, None, None] / (H * k)], -1)

    def anchor_boxes(self, W, H, k):
        """Every anchor as a centre/size box at the origin, normalised to the W x H grid."""
        return np.stack([np.zeros(len(self.biases) // 2)] * 2 + [
            self.biases[0::2] / (W * k), self.biases[1::2] / (H * k)], -1)

    def matched_anchors(self, ious):
        """Mask indices that learn a truth from its IoU with each anchor: the best anchor if
        masked, then other masked ones over iou_thresh (n vs best_n's mask index, as the fork)."""
        p = self.p
        best_n = int(np.argmax(ious)) if ious.max() > 0 else -1
        chosen = []
        if best_n in self.mask:
            best_n = self.mask.index(best_n)
            chosen.append(best_n)
        for n in range(len(ious)):
            if n in self.mask and n != best_n and p.iou_thresh < 1 and ious[n] > p.iou_thresh:
                chosen.append(self.mask.index(n))
        return chosen


@register_layer("Yolov3")
class Yolov3LossLayer(_Yolov3Base):
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
    loss = sum(D^2) / N.
    ``iou_loss`` IOU / GIOU / DIOU / CIOU (:mod:`.iou`): matching (the no-object
    threshold and the anchor choice) compares that kind's value instead of IoU, and a matched
    box's coords get D -= n clip(g (1, 1, e^v2, e^v3)) (n = ``iou_normalizer``, clipped to
    +-``max_delta``, NaN / inf -> 0; without ``accumulate`` the coords are reset first) with g
    the fork's ``dx_box_iou`` of the predicted box and the truth; r = the box's GIoU (GIOU),
    CIoU (CIOU) or DIoU (IOU, DIOU: the fork's choice) is kept, and
    loss = (sum of D^2 over objectness and classes + n sum(1 - r) / #matched) / N.
    ``use_focal_loss``: a class delta not already set is
    D_c = -class_scale ([c = label] - s_c) 0.5 g with p = s_label + 1e-15,
    g = -(1 - p) (2 p log p + p - 1) (no label smoothing).
    Backward (darknet's convention, not the derivative of that sum):
    d bottom0 = top_diff D / N, with D times s (1 - s) on the sigmoid entries when
    ``use_logic_gradient``. The gradient of each entry is the derivative of
    c/2 (v - t)^2 (raw) or c * BCE(t, sigmoid(v)) (others), so a central difference of that
    surrogate matches it (tests/forks/yolo/test_output.py).

    prototxt: ``yolov3_param { num_class: 20 num: 5 object_scale: 1 class_scale: 1
    noobject_scale: 0.5 (unused by the fork) coord_scale: 5 thresh: 0.2 anchors_scale: 32
    biases: [] mask: [] use_logic_gradient: false use_focal_loss: false iou_loss: MSE
    iou_normalizer: 0.25 iou_thresh: 0.5 max_delta: 10 accumulate: true label_smooth_eps: 0.1
    }``. Top: the scalar loss.
    """
    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self.kind = int(self.p.iou_loss)

    def _deltas(self, v, s, truths, D):
        p, (B, L, H, W), k = self.p, v.shape, float(self.p.anchors_scale)
        pred = self.pred_boxes(v, s)
        upto = next((t for t, r in enumerate(truths) if not r[1]), len(truths))
        D[:, 4] = s[:, 4]
        if upto:
            best = variant_iou(pred[:, :, :, None], truths[None, None, None, :upto, 1:],
                               self.kind).max(-1)
            D[:, 4][best > p.thresh] = 0
        eps = p.label_smooth_eps
        anchors = self.anchor_boxes(W, H, k)
        for cls, x, y, w, h in truths:
            if not w:
                break
            i, j = int(x * W), int(y * H)
            ious = variant_iou(anchors, np.array([0.0, 0.0, w, h]), self.kind)
            for m in self.matched_anchors(ious):
                a = self.mask[m]
                if self.kind == MSE:
                    c = p.coord_scale * (2 - w * h)
                    t = (x * W - i, y * H - j, np.log(w * W * k / self.biases[2 * a]),
                         np.log(h * H * k / self.biases[2 * a + 1]))
                    for q in range(4):
                        D[m, q, j, i] = -c * (t[q] - (s if q < 2 else v)[m, q, j, i])
                else:
                    self._iou_delta(pred[m, j, i], (x, y, w, h), v[m, :, j, i], D[m, :4, j, i])
                scale = p.object_scale if p.use_logic_gradient else 1.0
                D[m, 4, j, i] = -(1 - s[m, 4, j, i]) * scale
                cls = int(cls)
                if D[m, 5 + cls, j, i]:
                    yt = 1 - eps / 2 if eps else 1.0
                    D[m, 5 + cls, j, i] = -p.class_scale * (yt - s[m, 5 + cls, j, i])
                elif p.use_focal_loss:
                    pt = s[m, 5 + cls, j, i] + 1e-15
                    g = -(1 - pt) * (2 * pt * np.log(pt) + pt - 1)
                    yt = np.eye(self.num_class)[cls]
                    D[m, 5:, j, i] = -p.class_scale * (yt - s[m, 5:, j, i]) * 0.5 * g
                else:
                    yt = np.zeros(self.num_class)
                    yt[cls] = 1
                    if eps:
                        yt = yt * (1 - eps) + 0.5 * eps
                    D[m, 5:, j, i] = -p.class_scale * (yt - s[m, 5:, j, i])

    def _iou_delta(self, pred, truth, v, D):
        """Coords delta of the IoU family for one matched box (see class doc)."""
        p = self.p
        g = np.array(iou_gradient(pred, truth, self.kind), np.float64)
        g[2:] *= np.exp(v[2:4])
        g *= p.iou_normalizer
        g = np.where(np.isfinite(g), g, 0.0)
        if p.max_delta != np.finfo(np.float32).max:
            g = np.clip(g, -p.max_delta, p.max_delta)
        if not p.accumulate:
            D[:] = 0
        D -= g
        kind = self.kind if self.kind in (GIOU, CIOU) else DIOU
        self.iou_terms.append(1 - float(variant_iou(np.asarray(pred), np.asarray(truth), kind)))

    def forward_cpu(self, bottom, top):
        N, _, H, W = bottom[0].shape
        v = bottom[0].data.astype(np.float64).reshape(N, self.num, -1, H, W)
        s = _sigmoid(v)
        s[:, :, 2:4] = v[:, :, 2:4]
        labels = bottom[1].data.astype(np.float64).reshape(N, -1, 5)[:, :300]
        self.delta = np.zeros_like(v)
        self.iou_terms = []
        for b in range(N):
            self._deltas(v[b], s[b], labels[b], self.delta[b])
        if self.p.use_logic_gradient:
            self.delta_back = self.delta * s * (1 - s)
            self.delta_back[:, :, 2:4] = self.delta[:, :, 2:4]
        else:
            self.delta_back = self.delta
        if self.kind == MSE:
            top[0].data[...] = np.square(self.delta).sum() / N
        else:
            loss = np.square(self.delta[:, :, 4:]).sum()
            if self.iou_terms:
                loss += self.p.iou_normalizer * sum(self.iou_terms) / len(self.iou_terms)
            top[0].data[...] = loss / N

    def backward_delta(self):
        return self.delta_back


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@register_layer("RegionLoss")
class RegionLossLayer(_DeltaLossLayer):
    """YOLOv2's region loss (MobileNet-YOLO's ``RegionLoss``, darknet's deltas).

    Box n of cell (j, i), v = bottom[b, n L : (n+1) L, j, i] (S = the map's width, used for both
    axes as the fork does): x = (i + sigmoid(v0)) / S, y = (j + sigmoid(v1)) / S,
    w = exp(v2) biases[2n] / S, h = exp(v3) biases[2n+1] / S; o = sigmoid(v4); p = softmax(v5..).
    Delta D:
      * every box: D4 = noobject_scale o o (1 - o), 0 when its best IoU with a truth > ``thresh``;
      * every truth, cell (int(x S), int(y S)): the box n whose anchor (``bias_match``; else its
        predicted size) best fits the truth's (w, h) gets, with c = coord_scale (times
        (2 - w h) unless ``rescore``): D0 = -c (x S - i - s0) s0 (1 - s0), D1 likewise,
        D2 = -c (log(w S / biases[2n]) - v2), D3 likewise; D4 = -object_scale (t - o) o (1 - o)
        with t = the IoU of the predicted box and the truth when ``rescore`` else 1;
        D5.. = -class_scale (onehot - p).
    loss = sum(D^2) / N; backward: top_diff D / N.

    prototxt: ``region_loss_param { side: 13 (read from the bottom) num_class: 20 coords: 4
    num: 5 softmax: 1 bias_match: 1 rescore: 1 object_scale: 1 class_scale: 1 noobject_scale: 0.5
    coord_scale: 5 thresh: 0.2 biases: [] (fewer than 10 values: all 0, as the fork) }``
    (jitter, random, absolute: not used; ``softmax_tree`` / ``class_map``, YOLO9000's
    hierarchical softmax, change the math and are refused). Top: the scalar loss.

    gklz1982/caffe-yolov2's form, taken when bottom[1] has 2 axes and 30 x 5 values per image
    (its BoxData labels; :func:`caffepy.forks.yolo.caffe_yolov2.region_loss_deltas`): the grid is
    ``side`` x ``side``, ``rescore`` is ignored (c = coord_scale, t = 1), the IoUs clip the boxes to
    [0, 1], for the layer's first 12800 / N forwards every box also gets D0,1 = -0.01 (0.5 - s) s
    (1 - s), D2,3 = 0.01 v (the fork counts forwards of all its RegionLoss layers in one global),
    and loss = sum(D^2) (not divided by N); the backward is the same top_diff D / N.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.region_loss_param
        if p.coords != 4:
            raise self.error("only coords: 4 is supported, got %d" % p.coords)
        for name in ("softmax_tree", "class_map"):
            if getattr(p, name, ""):
                raise self.error("region_loss_param.%s (YOLO9000's hierarchical softmax) is not "
                                 "supported" % name)
        self.p, self.num, self.num_class = p, int(p.num), int(p.num_class)
        self.biases = np.asarray(p.biases if len(p.biases) >= 10 else [0.0] * 10, np.float64)
        if len(self.biases) < 2 * self.num:
            raise self.error("needs %d biases, got %d" % (2 * self.num, len(self.biases)))
        self.seen = 0

    def reshape(self, bottom, top):
        from . import caffe_yolov2
        self.yolov2_form = caffe_yolov2.is_yolov2_labels(self, bottom)
        if bottom[0].num_axes != 4 or bottom[0].shape[1] != self.num * (5 + self.num_class):
            raise self.error("bottom[0] must be N x %d x H x W (num * (5 + num_class)), got %s"
                             % (self.num * (5 + self.num_class), bottom[0].shape))
        if bottom[1].count % (bottom[0].shape[0] * 5):
            raise self.error("bottom[1] (labels) must hold rows of 5 values per image, got %s"
                             % (bottom[1].shape,))
        if self.yolov2_form:
            caffe_yolov2.check_grid(self, bottom[0], int(self.p.side), self.num)
        top[0].reshape(())

    def _deltas(self, v, truths, D):
        p, (B, L, H, S) = self.p, v.shape
        s01, o, cls = _sigmoid(v[:, 0:2]), _sigmoid(v[:, 4]), _softmax(v[:, 5:], 1)
        jj, ii = np.meshgrid(np.arange(H), np.arange(S), indexing="ij")
        bw, bh = self.biases[0:2 * B:2], self.biases[1:2 * B:2]
        pred = np.stack([(ii + s01[:, 0]) / S, (jj + s01[:, 1]) / S,
                         np.exp(v[:, 2]) * bw[:, None, None] / S,
                         np.exp(v[:, 3]) * bh[:, None, None] / S], -1)
        upto = next((t for t, r in enumerate(truths) if not r[1]), len(truths))
        D[:, 4] = p.noobject_scale * o * o * (1 - o)
        if upto:
            best = _center_iou(pred[:, :, :, None], truths[None, None, None, :upto, 1:]).max(-1)
            D[:, 4][best > p.thresh] = 0
        for label, x, y, w, h in truths:
            if not w:
                break
            i, j = int(x * S), int(y * S)
            sizes = (np.stack([bw / S, bh / S], 1) if p.bias_match
                     else pred[:, j, i, 2:4])
            shift = np.concatenate([np.zeros((B, 2)), sizes], 1)
            ious = _center_iou(shift, np.array([0.0, 0.0, w, h]))
            n = int(np.argmax(ious)) if ious.max() > 0 else 0
            c = p.coord_scale * (1.0 if p.rescore else 2 - w * h)
            sx, sy = s01[n, 0, j, i], s01[n, 1, j, i]
            D[n, 0, j, i] = -c * (x * S - i - sx) * sx * (1 - sx)
            D[n, 1, j, i] = -c * (y * S - j - sy) * sy * (1 - sy)
            D[n, 2, j, i] = -c * (np.log(w * S / bw[n]) - v[n, 2, j, i])
            D[n, 3, j, i] = -c * (np.log(h * S / bh[n]) - v[n, 3, j, i])
            target = _center_iou(pred[n, j, i], np.array([x, y, w, h])) if p.rescore else 1.0
            on = o[n, j, i]
            D[n, 4, j, i] = -p.object_scale * (target - on) * on * (1 - on)
            onehot = np.zeros(self.num_class)
            onehot[int(label)] = 1
            D[n, 5:, j, i] = -p.class_scale * (onehot - cls[n, :, j, i])

    def forward_cpu(self, bottom, top):
        if self.yolov2_form:
            from .caffe_yolov2 import region_loss_deltas
            loss, self.delta = region_loss_deltas(self, bottom)
            top[0].data[...] = loss
            return
        N, _, H, W = bottom[0].shape
        v = bottom[0].data.astype(np.float64).reshape(N, self.num, -1, H, W)
        labels = bottom[1].data.astype(np.float64).reshape(N, -1, 5)[:, :300]
        self.delta = np.zeros_like(v)
        for b in range(N):
            self._deltas(v[b], labels[b], self.delta[b])
        top[0].data[...] = np.square(self.delta).sum() / N
