"""Caffe-YOLO v1 (yeahkun/caffe-yolo): its training loss ``DetectionLoss``, a darknet-style delta
loss on :class:`caffepy.forks.yolo.loss._DeltaLossLayer` (loss sum(D^2) / N, backward
top_diff D / N)."""
import numpy as np

from ...layers.base import register_layer
from .loss import _center_iou, _DeltaLossLayer


@register_layer("DetectionLoss")
class DetectionLossLayer(_DeltaLossLayer):
    """YOLOv1's detection loss (yeahkun/caffe-yolo's ``DetectionLoss``), squared errors.

    S = ``side``, K = S^2 cells (j), C = ``num_class``, B = ``num_object``. Bottom 0 per image
    (count K (C + 5 B)): class scores p[c] at c K + j, confidences q[k] at (C + k) K + j, boxes
    b[k][o] at (C + B + 4 k + o) K + j. Bottom 1 per image (count 7 K): objectness at K + j, class
    at 2 K + j, the truth box (x, y, w, h) at 3 K + 4 j .. 3 K + 4 j + 3.
    Every confidence: D = noobject_scale q. For a cell with an object: D(p[c]) = class_scale
    (p[c] - [c = label]); among the B boxes (w, h squared when ``sqrt``; x, y made absolute,
    (j mod S + x) / S, (j div S + y) / S, when ``constriant``) the one of largest IoU with the
    truth (smallest RMSE while every IoU is 0) answers: D(q) = object_scale (q - IoU), D(b[o]) =
    coord_scale (b[o] - t[o]) with t the truth (x, y relative to the cell when ``constriant``,
    square roots of w, h when ``sqrt``).
    loss = (class + coord + area + object losses) / objects + noobject loss / (N K B - objects),
    each the sum of scale (value - target)^2 (the object term against 1, as the fork);
    backward: top_diff D / N (darknet's convention; D is the gradient of scale/2 (v - t)^2 with
    the targets held).

    prototxt: ``detection_loss_param { side: 7 num_class: 20 num_object: 2 object_scale: 1
    noobject_scale: 0.5 class_scale: 1 coord_scale: 5 sqrt: true constriant: false }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_loss_param
        self.p, self.S, self.C, self.B = p, int(p.side), int(p.num_class), int(p.num_object)

    def reshape(self, bottom, top):
        K, n = self.S * self.S, bottom[0].shape[0]
        if bottom[0].count != n * K * (self.C + 5 * self.B) or bottom[1].count != n * 7 * K:
            raise self.error("bottoms must hold %d predictions and %d label values per image "
                             "(side %d, num_class %d, num_object %d); got %s and %s"
                             % (K * (self.C + 5 * self.B), 7 * K, self.S, self.C, self.B,
                                bottom[0].shape, bottom[1].shape))
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        p, S, C, B = self.p, self.S, self.C, self.B
        K, N = S * S, bottom[0].shape[0]
        x = bottom[0].data.astype(np.float64).reshape(N, C + 5 * B, K)
        lab = bottom[1].data.astype(np.float64).reshape(N, 7 * K)
        D = np.zeros_like(x)
        D[:, C:C + B] = p.noobject_scale * x[:, C:C + B]
        parts = dict(cls=0.0, obj=0.0, coord=0.0, area=0.0)
        noobj = p.noobject_scale * np.square(x[:, C:C + B]).sum()
        objects = 0
        for n in range(N):
            for j in np.nonzero(lab[n, K:2 * K])[0]:
                objects += 1
                label = int(lab[n, 2 * K + j])
                if not 0 <= label < C:
                    raise self.error("class label %d out of [0, %d)" % (label, C))
                target = np.eye(C)[label]
                D[n, :C, j] = p.class_scale * (x[n, :C, j] - target)
                parts["cls"] += p.class_scale * np.square(x[n, :C, j] - target).sum()
                truth = lab[n, 3 * K + 4 * j:3 * K + 4 * j + 4].copy()
                boxes = x[n, C + B:, j].reshape(B, 4).copy()
                if p.constriant:
                    boxes[:, 0] = (j % S + boxes[:, 0]) / S
                    boxes[:, 1] = (j // S + boxes[:, 1]) / S
                if p.sqrt:
                    boxes[:, 2:] = np.square(boxes[:, 2:])
                ious = _center_iou(boxes, truth)
                if ious.max() > 0:
                    k = int(np.argmax(ious))
                else:
                    rmse = np.sqrt(np.square(boxes - truth).sum(axis=1))   # the fork starts at 20
                    k = int(np.argmin(np.where(rmse < 20, rmse, np.inf))) if (rmse < 20).any() else 0
                q = x[n, C + k, j]
                noobj -= p.noobject_scale * q * q
                parts["obj"] += p.object_scale * (q - 1) ** 2
                D[n, C + k, j] = p.object_scale * (q - ious[k])
                if p.constriant:
                    truth[0], truth[1] = truth[0] * S - j % S, truth[1] * S - j // S
                if p.sqrt:
                    truth[2:] = np.sqrt(truth[2:])
                best = x[n, C + B + 4 * k:C + B + 4 * k + 4, j]
                D[n, C + B + 4 * k:C + B + 4 * k + 4, j] = p.coord_scale * (best - truth)
                parts["coord"] += p.coord_scale * np.square(best[:2] - truth[:2]).sum()
                parts["area"] += p.coord_scale * np.square(best[2:] - truth[2:]).sum()
        with np.errstate(divide="ignore", invalid="ignore"):   # the fork divides by 0 too
            loss = sum(parts.values()) / objects + noobj / (N * K * B - objects)
        self.delta = D
        top[0].data[...] = loss
