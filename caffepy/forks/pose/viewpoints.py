"""Viewpoints and Keypoints (shubhtuls/ViewpointsAndKeypoints, external/caffe, 2014): its V1
types EUCLIDEAN_WEIGHTED_LOSS (``EuclideanWeightedLoss``) and MASK_OUTPUTS (``MaskOutputs``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


@register_layer("EuclideanWeightedLoss")
class EuclideanWeightedLossLayer(LossLayer):
    """Euclidean loss with extra weight where the target is on: d = x - t,
    loss = (|d|^2 + lambda |d * t|^2) / N / 2 (``euclidean_weight_param { lambda: 100 }``).
    dL/dx = (d + lambda d * t) / N, as the fork writes it -- the derivative for targets in
    {0, 1} (its heat-map masks), where t^2 = t. Only the prediction gets a gradient.
    """

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape:
            raise self.error("prediction %s and target %s must have one shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        lam = float(getattr(self.layer_param.euclidean_weight_param, "lambda"))
        t = bottom[1].data.astype(np.float64)
        self.d = bottom[0].data.astype(np.float64) - t
        self.dpos = self.d * t
        self.lam = lam
        n = bottom[0].shape[0]
        top[0].data[...] = (np.sum(self.d ** 2) + lam * np.sum(self.dpos ** 2)) / n / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            alpha = float(top[0].diff) / bottom[0].shape[0]
            bottom[0].diff[...] = alpha * self.d + self.lam * alpha * self.dpos


@register_layer("MaskOutputs")
class MaskOutputsLayer(Layer):
    """Per sample n, the k channels (k = ``mask_outputs_param { kernel_size }``) starting at
    channel s_n k of x (N x C x H x W), s_n the second bottom's n-th value (an index, e.g. the
    class): y = x[n, s_n k : (s_n + 1) k], N x k x H x W. dL/dx is dy there, 0 elsewhere."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x = bottom[0]
        self.k = int(self.layer_param.mask_outputs_param.kernel_size)
        if x.num_axes != 4 or bottom[1].count < x.shape[0]:
            raise self.error("expected x N x C x H x W and N start indices, got %s and %s"
                             % (x.shape, bottom[1].shape), ShapeError)
        if not 0 < self.k <= x.shape[1]:
            raise self.error("kernel_size %d must be in [1, %d]" % (self.k, x.shape[1]))
        top[0].reshape((x.shape[0], self.k) + x.shape[2:])

    def _starts(self, bottom):
        s = bottom[1].data.reshape(-1)[:bottom[0].shape[0]].astype(np.int64) * self.k
        if np.any(s < 0) or np.any(s + self.k > bottom[0].shape[1]):
            raise self.error("a start index puts channels outside [0, %d)" % bottom[0].shape[1])
        return s

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        for n, s in enumerate(self._starts(bottom)):
            top[0].data[n] = x[n, s:s + self.k]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the start indices")
        if propagate_down[0]:
            dx = np.zeros_like(bottom[0].diff)
            for n, s in enumerate(self._starts(bottom)):
                dx[n, s:s + self.k] = top[0].diff[n]
            bottom[0].diff[...] = dx
