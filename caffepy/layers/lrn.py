"""Local response normalisation (LRN), across channels or within each channel."""
import numpy as np

from ..errors import ShapeError
from ..math import kernels
from .base import Layer, register_layer
from .pooling import PoolGeometry, ave_pool, ave_pool_backward


def _channel_window_sum(a, size):
    """sum over the channel window [c - (size-1)/2, c + (size-1)/2] of a (N, C, ...), zero-padded."""
    half = (size - 1) // 2
    c = a.shape[1]
    padded = np.zeros((a.shape[0], c + size - 1) + a.shape[2:], dtype=a.dtype)
    padded[:, half:half + c] = a
    out = padded[:, 0:c].copy()
    for o in range(1, size):
        out += padded[:, o:o + c]
    return out


@register_layer("LRN")
class LRNLayer(Layer):
    """Local response normalisation, y = x * scale^-beta.

    ACROSS_CHANNELS: scale = k + alpha / n * sum of x^2 over the n channels centred on c
    (zero outside the blob). Backward:
    dx = dy * scale^-beta - (2 alpha beta / n) * x * sum_window(dy * y / scale).
    WITHIN_CHANNEL (as Caffe builds it from Power/Pooling/Eltwise): scale = 1 + alpha *
    AVE-pool(x^2) over an n x n window, stride 1, pad (n - 1) / 2, padding counting as zeros
    (``k`` is not used); the gradient goes through the same average pooling.

    prototxt: ``lrn_param { local_size: 5 (odd) alpha: 1 beta: 0.75 norm_region:
    ACROSS_CHANNELS k: 1 }`` (engine ignored).
    Blobs: bottom (N, C, H, W) -> top (N, C, H, W).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.lrn_param
        self.size = p.local_size
        if self.size % 2 != 1:
            raise self.error("LRN only supports odd values for local_size, got %d" % self.size)
        self.alpha, self.beta, self.k = p.alpha, p.beta, p.k
        self.across = p.norm_region == type(p).ACROSS_CHANNELS

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("input must have 4 axes (num, channels, height, width), got shape %s"
                             % (bottom[0].shape,), ShapeError)
        top[0].reshape(bottom[0].shape)
        if not self.across:
            half = (self.size - 1) // 2
            self.geom = PoolGeometry(bottom[0].shape[2:], (self.size,) * 2, (1, 1), (half, half))

    def _buffer(self, name, like):
        buf = getattr(self, name, None)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype:
            buf = np.empty_like(like)
            setattr(self, name, buf)
        return buf

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        dt = x.dtype.type
        self.powed = None
        k = kernels.get()
        if self.across and k is not None and kernels.contiguous(x, top[0].data):
            n, c = x.shape[:2]
            self.scale = self._buffer("_scale_buf", x)
            self.powed = self._buffer("_powed_buf", x)
            k.lrn_across_scale(x.reshape(n, c, -1), self.size, dt(self.alpha / self.size),
                               dt(self.k), self.scale.reshape(n, c, -1))
            np.power(self.scale, dt(-self.beta), out=self.powed)     # numpy's SIMD power
            np.multiply(x, self.powed, out=top[0].data)
            return
        if self.across:
            self.scale = _channel_window_sum(x * x, self.size)
            self.scale *= dt(self.alpha / self.size)
            self.scale += dt(self.k)
        else:
            self.scale = ave_pool(x * x, self.geom)
            self.scale *= dt(self.alpha)
            self.scale += dt(1)
        np.multiply(x, np.power(self.scale, dt(-self.beta)), out=top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x, y, dy = bottom[0].data, top[0].data, top[0].diff
        dt = x.dtype.type
        k = kernels.get()
        if self.powed is not None and k is not None and kernels.contiguous(dy, bottom[0].diff):
            n, c = x.shape[:2]
            v = [a.reshape(n, c, -1) for a in (x, y, dy, self.scale, self.powed)]
            k.lrn_across_backward(*v, self.size, dt(2 * self.alpha * self.beta / self.size),
                                  bottom[0].diff.reshape(n, c, -1))
            return
        ratio = dy * y / self.scale
        if self.across:
            acc = _channel_window_sum(ratio, self.size) * dt(2 * self.alpha * self.beta / self.size)
        else:
            acc = ave_pool_backward(ratio, self.geom) * dt(2 * self.alpha * self.beta)
        bottom[0].diff[...] = dy * np.power(self.scale, dt(-self.beta)) - x * acc
