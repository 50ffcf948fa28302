"""MobileNet-YOLO's segmentation branch (eric612/MobileNet-YOLO): ``YoloSeg`` (its loss) and
``SegmentationEvaluate`` (per-class IoU). Schema: ``yolo_seg_param`` (#604) and
``segmentation_evaluate_param`` (#605) are in proto/additions.json already.
"""
import numpy as np

from ..errors import ShapeError
from .base import Layer, LossLayer, register_layer


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
