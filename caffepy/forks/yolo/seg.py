"""MobileNet-YOLO's later layers (eric612/MobileNet-YOLO): the segmentation branch's ``YoloSeg``
(its loss) and ``SegmentationEvaluate`` (per-class IoU), and ``AssistedExcitation``. Schema:
``yolo_seg_param`` (#604) and ``segmentation_evaluate_param`` (#605) are in proto/additions.json
already; AssistedExcitation has no parameters.
"""
import math

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


@register_layer("YoloSeg")
class YoloSegLayer(LossLayer):
    """Sigmoid L2 segmentation loss of MobileNet-YOLO (its CPU path).

    p = sigmoid(x); d = alpha (p - t) with alpha = ``object_scale``; with a third bottom w
    (N x C: per image and class, the count of label pixels, e.g. a Reduction of the label),
    d = beta_c (p - t) where t > 0.5, with beta_c = alpha (2 - s_c),
    s_c = sum_n w[n, c] / sum_n (H W - w[n, c]), and alpha (p - t) elsewhere.
    loss = sum(d^2) / N.  Backward (the fork's, not the loss's derivative: no sigmoid factor,
    no 2): dx = top_diff * d / N. The fork's obj / no_obj / mIOU log lines are not written.

    prototxt: ``yolo_seg_param { object_scale: 5 num_class: 0 class_scale: 1
    use_logic_gradient: false use_hardsigmoid: false }`` (the last four are read and unused by
    the fork). Bottoms: x (N x C x H x W), t (same count), [w (N x C)]. Top: loss (scalar).
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_bottom_blobs = None

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self.alpha = float(self.layer_param.yolo_seg_param.object_scale)

    def reshape(self, bottom, top):
        x = bottom[0]
        if bottom[1].count != x.count:
            raise self.error("inputs must have the same count (x %s, label %s)"
                             % (x.shape, bottom[1].shape), ShapeError)
        if len(bottom) == 3:
            if x.num_axes != 4 or bottom[2].count != x.shape[0] * x.shape[1]:
                raise self.error("the weighting bottom %s must hold N x C = %d values for x %s"
                                 % (bottom[2].shape, x.shape[0] * x.shape[1] if x.num_axes > 1
                                    else x.count, x.shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.astype(np.float64)
        t = bottom[1].data.reshape(x.shape).astype(np.float64)
        p = 1.0 / (1.0 + np.exp(-x))
        d = self.alpha * (p - t)
        if len(bottom) == 3:
            N, C = x.shape[:2]
            w = bottom[2].data.reshape(N, C).astype(np.float64)
            hw = x.shape[2] * x.shape[3]
            s = w.sum(axis=0) / (hw - w).sum(axis=0)
            beta = (self.alpha * (2.0 - s))[None, :, None, None]
            d = np.where(t > 0.5, beta * (p - t), d)
        self.d = d
        top[0].data[...] = np.sum(d * d) / x.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if len(propagate_down) > 1 and any(propagate_down[1:]):
            raise self.error("cannot backpropagate to the label or weighting bottoms")
        if propagate_down[0]:
            bottom[0].diff[...] = float(top[0].diff) * self.d / bottom[0].shape[0]


@register_layer("SegmentationEvaluate")
class SegmentationEvaluateLayer(Layer):
    """Per-class IoU of a thresholded map against a thresholded label (first image only, as the
    fork indexes it): for each channel c, with P = pred[0, c] > threshold, G = gt[0, c] >
    threshold, iou_c = |P & G| / (|G| + |P| - |P & G|), 0 when P & G is empty.

    The fork resizes the prediction with OpenCV (INTER_AREA) when its H x W differs from the
    label's; caffepy refuses that case at forward time. prototxt: ``segmentation_evaluate_param
    { num_classes: 1 (must be set) threshold: 0.5 }``. Bottoms: pred (N x C x H x W), label
    (N x C x H' x W'). Top: 1 x 1 x 1 x C (C from the label).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.segmentation_evaluate_param
        if not p.HasField("num_classes"):
            raise self.error("segmentation_evaluate_param needs num_classes (as the fork)")
        self.threshold = float(p.threshold)

    def reshape(self, bottom, top):
        for name, b in (("prediction", bottom[0]), ("label", bottom[1])):
            if b.num_axes != 4:
                raise self.error("%s must be N x C x H x W, got %s" % (name, b.shape), ShapeError)
        if bottom[0].shape[1] > bottom[1].shape[1]:
            raise self.error("prediction has %d channels, the label %d"
                             % (bottom[0].shape[1], bottom[1].shape[1]), ShapeError)
        top[0].reshape((1, 1, 1, bottom[1].shape[1]))

    def forward_cpu(self, bottom, top):
        pred, gt = bottom[0].data[0], bottom[1].data[0]
        if pred.shape[1:] != gt.shape[1:]:
            raise self.error("prediction %s and label %s differ in H x W: the fork resizes with "
                             "OpenCV INTER_AREA, which caffepy does not reproduce"
                             % (bottom[0].shape, bottom[1].shape))
        out = np.zeros(gt.shape[0])
        for c in range(pred.shape[0]):
            P, G = pred[c] > self.threshold, gt[c] > self.threshold
            inter = np.count_nonzero(P & G)
            if inter:
                out[c] = inter / float(np.count_nonzero(G) + np.count_nonzero(P) - inter)
        top[0].data[...] = out.reshape(top[0].shape)


@register_layer("AssistedExcitation")
class AssistedExcitationLayer(Layer):
    """Adds a ground-truth-box mask, weighted by the training progress, to every channel.

    alpha = clip(cos(pi / 2 * iter / (0.75 max_iter)), 0, 1), with (iter, max_iter) what the
    solver gives the fork's ``Layer::set_iter`` before each iteration (iteration, last iteration
    of this solve). For image 0: M = alpha * mean inside every box [label, x, y, w, h] of the
    label rows (normalised centre / size, up to the first row with x = 0; cells
    [int((x - w/2) W), int((x + w/2) W + 0.95)) clipped to the map, at least one cell, same for
    y), 0 elsewhere; top = x + M on each channel. As the fork indexes its mask (it clears the
    whole mask per image but always adds the first image's part), images 1.. get M = 0.
    Outside a solver (no ``set_iter``) caffepy takes alpha = 1; the fork divides 0 by 0 there.
    Backward: dx = dy (the fork's); the label and the mean get a zero gradient (the fork
    sends them nothing, even though M depends on the mean).

    prototxt: no parameters. Bottoms: x (N x C x H x W), label (N x 1 x 300 x 5, MobileNet-YOLO's
    AnnotatedData rows), mean (N x ... with H x W values per image, e.g. a channel mean).
    Top: like x.
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1
    iter = max_iter = 0                 # until a solver calls set_iter

    def set_iter(self, iteration, max_iter):
        self.iter, self.max_iter = int(iteration), int(max_iter)

    def reshape(self, bottom, top):
        x, label, mean = bottom
        if x.num_axes != 4:
            raise self.error("bottom 0 must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        N, _, H, W = x.shape
        if label.count != N * 300 * 5:
            raise self.error("label %s must hold 300 rows of 5 values per image (N = %d)"
                             % (label.shape, N), ShapeError)
        if mean.shape[0] != N or mean.count != N * H * W:
            raise self.error("mean %s must hold H x W = %d values per image for x %s"
                             % (mean.shape, H * W, x.shape), ShapeError)
        top[0].reshape(x.shape)

    def _alpha(self):
        if self.max_iter <= 0:
            return 1.0
        a = math.cos(self.iter / (self.max_iter * 0.75) * math.pi / 2.0)
        return min(max(a, 0.0), 1.0)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        top[0].data[...] = x
        rows = bottom[1].data.reshape(N, 300, 5)[0]
        mean = bottom[2].data.reshape(N, H, W)[0]
        mask = np.zeros((H, W))
        alpha = self._alpha()
        for _, cx, cy, w, h in rows:
            if not cx:
                break
            x0 = min(max(int((cx - w / 2) * W), 0), W - 1)
            y0 = min(max(int((cy - h / 2) * H), 0), H - 1)
            x1 = min(max(int((cx + w / 2) * W + 0.95), x0 + 1), W)
            y1 = min(max(int((cy + h / 2) * H + 0.95), y0 + 1), H)
            mask[y0:y1, x0:x1] = alpha * mean[y0:y1, x0:x1]
        top[0].data[0] += mask[None].astype(x.dtype)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff
        for i in (1, 2):             # the fork sends nothing back to the label or the mean
            if propagate_down[i]:
                bottom[i].diff[...] = 0
