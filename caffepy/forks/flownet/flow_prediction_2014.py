"""Arroosh/optical_flow_prediction (2014 Caffe, optical flow as classification over flow-cluster
codewords; before type strings): its V1 types MULTI_SOFTMAX (``MultiSoftmax``) and
MULTI_SOFTMAX_LOSS (``MultiSoftmaxWithLoss``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer

_FLT_MIN = np.finfo(np.float32).tiny


def _multi_softmax(x, multiple):
    """m softmax(x) over the channels at each pixel (N x C x ...)."""
    n, c = x.shape[:2]
    x = x.reshape(n, c, -1).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return multiple * e / e.sum(axis=1, keepdims=True)


@register_layer("MultiSoftmax")
class MultiSoftmaxLayer(Layer):
    """y = m softmax(x) over the channels at each pixel, m = ``mult_softmax_param {
    max_multiple: 1 }``. Backward as the fork: dL/dx = y (g - sum_c g y) (g = dL/dy), the exact
    derivative for m = 1 (for other m the fork's gradient is that formula, not m's)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        m = float(self.layer_param.mult_softmax_param.max_multiple)
        top[0].data[...] = _multi_softmax(bottom[0].data, m).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n, c = top[0].shape[:2]
            y = top[0].data.reshape(n, c, -1)
            g = top[0].diff.reshape(n, c, -1)
            dx = (g - (g * y).sum(axis=1, keepdims=True)) * y
            bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("MultiSoftmaxWithLoss")
class MultiSoftmaxWithLossLayer(LossLayer):
    """Per-pixel softmax loss with 1-based labels: p = MultiSoftmax(x) (its ``mult_softmax_param``,
    default m = 1), loss = -sum over the pixels of log max(p[label - 1], FLT_MIN), divided by N.
    dL/dx = (p - onehot(label - 1)) l / N, l = ``mult_softmax_loss_param { learning_multiple: 1 }``
    (it scales the gradient only, as in the fork). Bottoms: scores N x C x H x W, labels
    N x 1 x H x W (1..C) [, a third the fork ignores]. Tops: loss [, p]."""
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        s, lab = bottom[0], bottom[1]
        if s.num_axes < 2 or lab.count != s.count // s.shape[1]:
            raise self.error("scores %s and labels %s: expected one label per pixel"
                             % (s.shape, lab.shape), ShapeError)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(s.shape)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        m = float(self.layer_param.mult_softmax_param.max_multiple)
        self.p = _multi_softmax(bottom[0].data, m)
        lab = bottom[1].data.reshape(n, -1).astype(np.int64) - 1
        if np.any((lab < 0) | (lab >= c)):
            raise self.error("a label is outside 1..%d (the labels are 1-based)" % c)
        self.lab = lab
        picked = np.take_along_axis(self.p, lab[:, None, :], axis=1)
        top[0].data[...] = -np.log(np.maximum(picked, _FLT_MIN)).sum() / n
        if len(top) > 1:
            top[1].data[...] = self.p.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            n = bottom[0].shape[0]
            g = self.p.copy()
            np.put_along_axis(g, self.lab[:, None, :],
                              np.take_along_axis(g, self.lab[:, None, :], axis=1) - 1, axis=1)
            mult = float(self.layer_param.mult_softmax_loss_param.learning_multiple)
            g *= float(top[0].diff) * mult / n
            bottom[0].diff[...] = g.reshape(bottom[0].shape)
