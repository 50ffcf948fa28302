"""Layers of the AttentionMask object-proposal forks (chwilms/AttentionMask,
chwilms/superpixelRefinement, harm-matthias-harms/AttentionBox): TopK (the k best-scored
windows) and NormalizedSigmoidCrossEntropyLoss."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


def _sigmoid_ce(x, t):
    """Caffe's stable -[t log s(x) + (1 - t) log(1 - s(x))], element by element."""
    pos = (x >= 0).astype(x.dtype)
    return -(x * (t - pos) - np.log1p(np.exp(x - 2 * x * pos)))


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


@register_layer("TopK")
class TopKLayer(Layer):
    """The k best-scored rows of bottom 0 (chwilms/AttentionMask,
    caffe/src/caffe/layers/top_k_layer.cu; the fork's CPU path is NOT_IMPLEMENTED, this is its
    GPU path). Bottoms: x (N x ...), scores (M x S, M >= N), and any blob whose first axis K
    gives the count. With s_i = scores[i] when S = 1, else max(0, scores[i, 1:]) (the
    background column 0 ignored), the rows of x are ordered by s descending (ties: lower index
    first; the fork's std::sort leaves their order unspecified), the first k = min(K, N) of
    that order are sorted by index, and

        y[b] = x[ids[b]]  (b < k);   top[1] (optional, K x 1 x 1 x 1) = the same ids as floats
        dL/dx[ids[b]] = dL/dy[b];    the rows not chosen get 0

    Past position k, top[1] holds the rest of the score order as the fork's buffer does; a K
    greater than N (the fork would read unset ids there) is refused when top[1] is asked for.
    No prototxt fields. The scores and the count get no gradient.
    """
    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        x, s, k = bottom
        if x.num_axes == 0 or s.num_axes == 0 or k.num_axes == 0:
            raise self.error("the three bottoms need a first axis", ShapeError)
        n = x.shape[0]
        if s.shape[0] < n:
            raise self.needs("the scores need a row for each of the %d rows of bottom[0], got "
                             "shape %s" % (n, s.shape), [(1, (n,) + tuple(s.shape[1:]), None)])
        if len(top) == 2 and k.shape[0] > n:
            raise self.error("bottom[2]'s first axis (%d) exceeds bottom[0]'s (%d): the fork's "
                             "second top would read unset ids" % (k.shape[0], n), ShapeError)
        self.k = min(k.shape[0], n)
        top[0].reshape((self.k,) + tuple(x.shape[1:]))
        if len(top) == 2:
            top[1].reshape((k.shape[0], 1, 1, 1))

    def _ids(self, bottom):
        n = bottom[0].shape[0]
        s = bottom[1].data.reshape(bottom[1].shape[0], -1)
        score = s[:, 0] if s.shape[1] == 1 else np.maximum(0, s[:, 1:].max(axis=1))
        order = np.argsort(-score[:n], kind="stable")
        order[:self.k] = np.sort(order[:self.k])
        return order

    def forward_cpu(self, bottom, top):
        self.ids = self._ids(bottom)
        top[0].data[...] = bottom[0].data[self.ids[:self.k]]
        if len(top) == 2:
            top[1].data.reshape(-1)[...] = self.ids[:top[1].shape[0]]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            bottom[0].diff[self.ids[:self.k]] = top[0].diff
        for i in (1, 2):
            if propagate_down[i]:
                bottom[i].diff[...] = 0

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("NormalizedSigmoidCrossEntropyLoss")
class NormalizedSigmoidCrossEntropyLossLayer(LossLayer):
    """Sigmoid cross-entropy summed over all elements and divided by N H W (not C)
    (chwilms/AttentionMask, caffe/src/caffe/layers/normalized_sigmoid_cross_entropy_loss_layer.cpp;
    also chwilms/superpixelRefinement and harm-matthias-harms/AttentionBox). For x N x C x H x W
    and targets t of x's count:

        loss = -sum [t log s(x) + (1 - t) log(1 - s(x))] / (N H W)
        dL/dx = loss_weight (s(x) - t) / (N H W)

    No prototxt fields. Bottoms: x (4 axes, as the fork reads shape(2) and shape(3)), t.
    The targets get no gradient.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got shape %s" % (x.shape,),
                             ShapeError)
        if bottom[1].count != x.count:
            raise self.needs("the targets must have the count of the scores (%s vs %s)"
                             % (bottom[1].shape, x.shape), [(1, x.shape, 0)])
        self.norm = float(x.shape[0] * x.shape[2] * x.shape[3])

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        t = bottom[1].data.reshape(x.shape)
        top[0].data[...] = np.sum(_sigmoid_ce(x, t), dtype=np.float64) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the targets (bottom 1)")
        if propagate_down[0]:
            x = bottom[0].data
            g = _sigmoid(x) - bottom[1].data.reshape(x.shape)
            bottom[0].diff[...] = g * (float(top[0].diff.reshape(())) / self.norm)
