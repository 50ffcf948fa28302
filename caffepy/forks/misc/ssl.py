"""Structured sparsity learning's caffe (wenwei202/caffe): ``Sparsify`` and ``SymmetricRectify``,
soft thresholds that zero small activations (its ``force_mult`` ParamSpec field is schema only).
"""
import numpy as np

from ... import fillers
from ...layers.base import Layer, register_layer


def _soft_threshold(x, t):
    return np.where(np.abs(x) <= t, 0.0, x - np.sign(x) * t)


@register_layer("Sparsify")
class SparsifyLayer(Layer):
    """y = x - sign(x) thre where |x| > thre, else 0 (y = x when thre is 0).

    Backward (the fork's, which adds an L1 penalty on the outputs): dx = (dy + coef sign(y)),
    times [y != 0] when thre > 0. With coef 0 this is the gradient of the forward.

    prototxt: ``sparsify_param { thre: 0 coef: 0 }``. Bottom x, top y (same shape).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.sparsify_param
        self.thre, self.coef = float(p.thre), float(p.coef)

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        self.y = _soft_threshold(bottom[0].data, self.thre) if self.thre else bottom[0].data.copy()
        top[0].data[...] = self.y

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            d = top[0].diff + np.sign(self.y) * self.coef
            if self.thre:
                d = d * (self.y != 0)
            bottom[0].diff[...] = d


@register_layer("SymmetricRectify")
class SymmetricRectifyLayer(Layer):
    """Soft threshold with a learned threshold per channel: y = x - sign(x) t_c where
    |x| > t_c, else 0. Negative thresholds are set to 0 before each forward (the fork's rule).

    Backward: dx = dy [y != 0]; dt_c += sum over the channel of -sign(y) dy, and
    dt_c += -thre_decay (t_c >= 0) or +thre_decay (t_c < 0), the fork's pull to larger thresholds.

    prototxt: ``symmetric_rectify_param { filler (constant 0) channel_shared: false
    thre_decay: 0 }``. Bottom x (N x C x ...), top y (same shape). Blob: t (C values, or one
    when channel_shared).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.symmetric_rectify_param
        if bottom[0].num_axes < 2:
            raise self.error("bottom must have at least 2 axes, got %s" % (bottom[0].shape,))
        self.shared = bool(p.channel_shared)
        if not self.blobs:
            blob = self.new_blob((1,) if self.shared else (bottom[0].shape[1],))
            if p.HasField("filler"):
                fillers.fill(blob, p.filler)
            else:
                blob.data[...] = 0.0
            self.blobs = [blob]
        self.param_propagate_down = [True]
        if self.blobs[0].count != (1 if self.shared else bottom[0].shape[1]):
            raise self.error("threshold blob has %d values for %d channels (channel_shared %s)"
                             % (self.blobs[0].count, bottom[0].shape[1], self.shared))

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def _thresholds(self, x):
        t = self.blobs[0].data.reshape(-1)
        return t.reshape((1, -1) + (1,) * (x.ndim - 2)) if not self.shared else t[0]

    def forward_cpu(self, bottom, top):
        np.maximum(self.blobs[0].data, 0, out=self.blobs[0].data)
        x = bottom[0].data
        self.y = _soft_threshold(x, self._thresholds(x))
        top[0].data[...] = self.y

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if self.param_propagate_down and self.param_propagate_down[0]:
            g = -np.sign(self.y) * dy
            g = g.sum() if self.shared else g.sum(axis=tuple(i for i in range(g.ndim) if i != 1))
            t = self.blobs[0].data.reshape(-1)
            decay = self.layer_param.symmetric_rectify_param.thre_decay
            self.blobs[0].diff.reshape(-1)[...] += g + np.where(t < 0, 1.0, -1.0) * decay
        if propagate_down[0]:
            bottom[0].diff[...] = dy * (self.y != 0)
