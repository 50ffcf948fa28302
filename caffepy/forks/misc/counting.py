"""Crowd-counting losses: MAELoss of shizenglin/Deep-NCL (negative-correlation learning)."""
import numpy as np
from ...layers.base import LossLayer, register_layer


@register_layer("MAELoss")
class MAELossLayer(LossLayer):
    """Absolute count error (shizenglin/Deep-NCL, src/caffe/layers/mae_layer.cpp / .cu):

        loss = | sum |x| - sum |t| |      (x: predicted density map, t: ground truth; whole batch)

    The backward is the fork's GPU one, an L2-style gradient that is not the derivative of the
    loss (the fork's CPU backward reads a buffer it never fills):

        dL/dx = loss_weight (x - t) / N;   dL/dt = -loss_weight (x - t) / N

    No parameters. Bottoms: x (N x ...), t (N x ..., the same count per sample). Top: the loss ().
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].count != bottom[1].count:
            raise self.shape_mismatch("inputs must have the same dimension (%s vs %s)"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)

    def forward_cpu(self, bottom, top):
        a = np.sum(np.abs(bottom[0].data), dtype=np.float64)
        b = np.sum(np.abs(bottom[1].data), dtype=np.float64)
        top[0].data[...] = abs(a - b)

    def backward_cpu(self, top, propagate_down, bottom):
        diff = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        w = float(top[0].diff.reshape(()))
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * w / bottom[i].shape[0] * diff).reshape(
                    bottom[i].shape)

    def allow_force_backward(self, bottom_index):
        return True
