"""The semantic-edge losses of CASENet / SEAL (Chrisding/seal, lt573152873/CASEnet):
MultiChannelSigmoidCrossEntropyLoss and ReweightedSigmoidCrossEntropyLoss. Both read each label
value as the 32-bit pattern of its float32 value: bit 31 marks an ignored pixel, bits 0..30 the
classes present there (the forks' data layers store such integers in float blobs)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer

_IGNORED = np.uint32(1 << 31)


def _label_bits(blob):
    return np.ascontiguousarray(blob.data, dtype=np.float32).view(np.uint32)


def _sigmoid_ce(x, t):
    """Caffe's stable -[t log s(x) + (1 - t) log(1 - s(x))], element by element."""
    pos = (x >= 0).astype(np.float64)
    return -(x * (t - pos) - np.log1p(np.exp(x - 2 * x * pos)))


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


class _BitLabelLoss(LossLayer):
    """Shared checks: N x C x H x W scores, N x 1 x H' x W' labels with H' W' = H W."""
    max_score_channels = 31

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        x, t = bottom
        if x.num_axes != 4 or t.num_axes != 4:
            raise self.error("scores and labels must be N x C x H x W, got %s and %s"
                             % (x.shape, t.shape), ShapeError)
        if x.shape[1] > self.max_score_channels:
            raise self.error("at most %d score channels, got %d"
                             % (self.max_score_channels, x.shape[1]), ShapeError)
        want = (x.shape[0], 1) + tuple(x.shape[2:])
        if t.shape[1] != 1 or t.count_range(2) != x.count_range(2):
            raise self.needs("the labels must be one channel of the scores' spatial size: %s, "
                             "got %s" % (want, t.shape), [(1, want, None)])

    def _split(self, bottom):
        x = bottom[0].data.reshape(bottom[0].shape[0], bottom[0].shape[1], -1).astype(np.float64)
        bits = _label_bits(bottom[1]).reshape(x.shape[0], 1, -1)
        return x, bits, (bits & _IGNORED) != 0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels (bottom 1)")
        if propagate_down[0]:
            g = self._grad(bottom) * (float(top[0].diff.reshape(())) / bottom[0].shape[0])
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("MultiChannelSigmoidCrossEntropyLoss")
class MultiChannelSigmoidCrossEntropyLossLayer(_BitLabelLoss):
    """Sigmoid cross-entropy of C bit-coded binary maps (Chrisding/seal,
    caffe/src/caffe/layers/multichannel_sigmoid_cross_entropy_loss_layer.cpp). For scores x
    N x C x H x W (C <= 31) and labels L (N x 1 x H x W, read as uint32 bit patterns), channel k
    at pixel p has target t = bit k of L[p]; pixels with bit 31 set are left out:

        loss = sum over kept (n, k, p) of -[t log s(x) + (1 - t) log(1 - s(x))] / N
        dL/dx = loss_weight (s(x) - t) / N   (0 at ignored pixels)

    No prototxt fields. The labels get no gradient.
    """

    def _targets(self, bottom):
        x, bits, ignored = self._split(bottom)
        k = np.arange(x.shape[1], dtype=np.uint32)[None, :, None]
        t = ((bits >> k) & np.uint32(1)).astype(np.float64)
        return x, t, np.broadcast_to(ignored, x.shape)

    def forward_cpu(self, bottom, top):
        x, t, ignored = self._targets(bottom)
        loss = np.where(ignored, 0.0, _sigmoid_ce(x, t))
        top[0].data[...] = loss.sum() / x.shape[0]

    def _grad(self, bottom):
        x, t, ignored = self._targets(bottom)
        return np.where(ignored, 0.0, _sigmoid(x) - t)


@register_layer("ReweightedSigmoidCrossEntropyLoss")
class ReweightedSigmoidCrossEntropyLossLayer(_BitLabelLoss):
    """Class-balanced sigmoid cross-entropy of one binary map (Chrisding/seal and
    lt573152873/CASEnet, caffe/src/caffe/layers/reweighted_sigmoid_cross_entropy_loss_layer.cpp).
    For scores x (N x 1 x H x W) and labels L (N x 1 x H x W, read as uint32 bit patterns): a
    pixel with bit 31 set is ignored, else positive when L != 0. Per image n, with P and Q its
    positive and negative pixel counts:

        loss = sum_n [Q/(P+Q) sum_pos CE(x, 1) + P/(P+Q) sum_neg CE(x, 0)] / N
        dL/dx = loss_weight w (s(x) - t) / N,  w = Q/(P+Q) (positive), P/(P+Q) (negative),
                0 at ignored pixels

    An image whose pixels are all ignored is an error (the fork stops with "All pixels
    ignored!"). No prototxt fields. The labels get no gradient.
    """
    max_score_channels = 1

    def _weighted(self, bottom):
        x, bits, ignored = self._split(bottom)
        t = (bits != 0).astype(np.float64)
        pos, neg = ~ignored & (bits != 0), ~ignored & (bits == 0)
        p = pos.sum(axis=(1, 2), keepdims=True).astype(np.float64)
        q = neg.sum(axis=(1, 2), keepdims=True).astype(np.float64)
        if np.any(p + q == 0):
            raise self.error("all pixels of an image are ignored (label bit 31 set everywhere)")
        w = np.where(pos, q / (p + q), np.where(neg, p / (p + q), 0.0))
        return x, t, w

    def forward_cpu(self, bottom, top):
        x, t, w = self._weighted(bottom)
        top[0].data[...] = np.sum(w * _sigmoid_ce(x, t)) / x.shape[0]

    def _grad(self, bottom):
        x, t, w = self._weighted(bottom)
        return w * (_sigmoid(x) - t)
