"""Local response normalisation (LRN), across channels or within each channel."""
import numpy as np

from ..errors import ShapeError
from ..math import kernels
from .base import Layer, register_layer
from .pooling import PoolGeometry, ave_pool, ave_pool_backward


def _across_scale(x, size, a_over_n, k):
    """ACROSS_CHANNELS scale of x (N, C, ...) as Caffe's CPU layer sums it (the numba kernel
    lrn_across_scale makes the same float32 operations): channel 0's = k + a_over_n x^2 of each
    channel of its window in turn, channel c's = channel (c - 1)'s + a_over_n x^2 of the channel
    entering the window - a_over_n x^2 of the one leaving it (channels outside the blob: zeros,
    skipped)."""
    c, pre = x.shape[1], (size - 1) // 2
    sq = x * x
    scale = np.empty_like(x)
    scale[:, 0] = k
    for cj in range(max(0, -pre), min(c, size - pre)):
        scale[:, 0] += a_over_n * sq[:, cj]
    for ci in range(1, c):
        head, tail = ci + size - 1 - pre, ci - 1 - pre
        scale[:, ci] = scale[:, ci - 1]
        if head < c:
            scale[:, ci] += a_over_n * sq[:, head]
        if tail >= 0:
            scale[:, ci] -= a_over_n * sq[:, tail]
    return scale


def _across_backward(x, y, dy, scale, powed, size, coef):
    """dx = dy * powed - coef * (x * acc), acc the window's sum of dy * y / scale slid over the
    channels in Caffe's order (as the numba kernel lrn_across_backward)."""
    c, pre = x.shape[1], (size - 1) // 2
    ratio = dy * y / scale
    dx = dy * powed
    acc = np.zeros_like(ratio[:, 0])
    for cj in range(max(0, -pre), min(c, size - 1 - pre)):
        acc += ratio[:, cj]
    for ci in range(c):
        head, tail = ci + size - 1 - pre, ci - pre
        if head < c:
            acc += ratio[:, head]
        dx[:, ci] -= coef * (x[:, ci] * acc)
        if tail >= 0:
            acc -= ratio[:, tail]
    return dx


@register_layer("LRN")
class LRNLayer(Layer):
    """Local response normalisation, y = x * scale^-beta.

    ACROSS_CHANNELS: scale = k + alpha / n * sum of x^2 over the n channels centred on c
    (zero outside the blob), the sum slid over the channels as Caffe's CPU layer does (channel
    c's from channel c - 1's: + the entering channel's term, - the leaving one's; so too the
    backward's window sum). Backward:
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
            k.lrn_across_scale(x.reshape(n, c, -1), self.size, dt(self.alpha) / dt(self.size),
                               dt(self.k), self.scale.reshape(n, c, -1))
            k.powx(self.scale.reshape(-1), dt(-self.beta), self.powed.reshape(-1))
            np.multiply(x, self.powed, out=top[0].data)
            return
        if self.across:
            self.scale = _across_scale(x, self.size, dt(self.alpha) / dt(self.size), dt(self.k))
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
        powed = np.power(self.scale, dt(-self.beta))
        if self.across:
            bottom[0].diff[...] = _across_backward(
                x, y, dy, self.scale, powed, self.size, dt(2 * self.alpha * self.beta / self.size))
            return
        acc = ave_pool_backward(dy * y / self.scale, self.geom) * dt(2 * self.alpha * self.beta)
        bottom[0].diff[...] = dy * powed - x * acc
