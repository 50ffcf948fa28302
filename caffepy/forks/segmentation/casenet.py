"""CASENet (lt573152873/CASEnet, also Chrisding/seal): the class-aware edge loss
MultiChannelReweightedSigmoidCrossEntropyLoss
(caffe/src/caffe/layers/multichannel_reweighted_sigmoid_cross_entropy_loss_layer.cpp).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer

_IGNORE = np.uint32(1 << 31)


def _bits(label):
    """The label blob's values as the float bit patterns the fork reads (N x L x HW uint32)."""
    return np.ascontiguousarray(label.astype(np.float32)).view(np.uint32)


@register_layer("MultiChannelReweightedSigmoidCrossEntropyLoss")
class MultiChannelReweightedSigmoidCrossEntropyLossLayer(LossLayer):
    """Per-class sigmoid cross-entropy on bit-packed edge labels, reweighted per image.

    Bottoms: scores x (N x C x H x W) and labels (N x L x H x W, C < 32 L) whose float values
    are read as 32-bit patterns: class k's target t is bit k % 32 of label channel k // 32; a
    pixel whose last label channel has bit 31 set is ignored. Per image, among the pixels not
    ignored, P have a non-zero pattern in one of the first C // 32 + 1 label channels (edge
    pixels of any class) and Q do not; w+ = Q / (P + Q) weights targets 1 and w- = P / (P + Q)
    targets 0 (both 0 when P + Q = 0):

        L = (1/N) sum_n sum_{k, pixels not ignored} w_t l(x, t),
        l(x, t) = -(x (t - [x >= 0]) - log(1 + e^{x - 2 x [x >= 0]}))   (sigmoid cross-entropy)
        dL/dx = loss_weight / N w_t (sigmoid(x) - t),   0 at ignored pixels.

    No parameters. In a float64 net the labels are rounded to float32 before their bits are
    read (the fork's blobs are float).
    """

    def reshape(self, bottom, top):
        x, lab = bottom
        if x.num_axes > 4 or lab.num_axes > 4:
            raise self.error("bottoms need at most 4 axes (N x C x H x W)", ShapeError)
        if x.channels >= lab.channels * 32:
            raise self.error("%d score channels need fewer than 32 x %d label channels"
                             % (x.channels, lab.channels), ShapeError)
        if x.height * x.width != lab.height * lab.width or x.num != lab.num:
            raise self.error("scores %s and labels %s must have the same N and H x W"
                             % (x.shape, lab.shape), ShapeError)
        top[0].reshape(())

    def _targets(self, bottom):
        """(targets t N x C x HW, kept pixels N x 1 x HW, w+ and w- N x 1 x 1)."""
        x = bottom[0]
        n, c = x.num, x.channels
        bits = _bits(bottom[1].data).reshape(n, bottom[1].channels, -1)
        kept = (bits[:, -1] & _IGNORE) == 0
        edge = np.any(bits[:, :c // 32 + 1] != 0, axis=1)
        p = np.sum(edge & kept, axis=1).astype(np.float64)
        q = np.sum(~edge & kept, axis=1).astype(np.float64)
        total = np.where(p + q > 0, p + q, 1.0)
        k = np.arange(c)
        t = (bits[:, k // 32] >> (k % 32).astype(np.uint32)[None, :, None]) & 1
        return (t.astype(np.float64), kept[:, None], (q / total)[:, None, None],
                (p / total)[:, None, None])

    def forward_cpu(self, bottom, top):
        n = bottom[0].num
        x = bottom[0].data.reshape(n, bottom[0].channels, -1).astype(np.float64)
        t, kept, wpos, wneg = self._targets(bottom)
        pos = x >= 0
        l = -(x * (t - pos) - np.log1p(np.exp(x - 2 * x * pos))) * kept
        loss = np.sum(l * t * wpos) + np.sum(l * (1 - t) * wneg)
        top[0].data[...] = loss / n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to label inputs")
        if not propagate_down[0]:
            return
        n = bottom[0].num
        x = bottom[0].data.reshape(n, bottom[0].channels, -1)
        t, kept, wpos, wneg = self._targets(bottom)
        sig = 0.5 * np.tanh(0.5 * x) + 0.5
        g = (sig - t) * np.where(t > 0, wpos, wneg) * kept
        bottom[0].diff[...] = (g * (top[0].diff.reshape(-1)[0] / n)).reshape(bottom[0].shape)
