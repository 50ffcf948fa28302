"""Segmentation-aware convolution (aharley/segaware, also jialinwu17/segawareatt): Im2dist, the
distances between each pixel's embedding and its kernel-window neighbours'
(caffe/src/caffe/layers/im2dist_layer.cpp, caffe/src/caffe/util/im2dist.cpp).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer

_FAR = np.float32(np.finfo(np.float32).max / 100)     # the fork's FLT_MAX / 100


def _pair(p, name, h_name, w_name, default):
    if p.HasField(h_name) or p.HasField(w_name):
        return int(getattr(p, h_name)), int(getattr(p, w_name))
    values = list(getattr(p, name))
    if not values:
        return default, default
    return int(values[0]), int(values[-1])


@register_layer("Im2dist")
class Im2distLayer(Layer):
    """For each kernel offset k of a window centred on output position o (im2col's geometry from
    ``convolution_param``: kernel, pad, stride, dilation; 2-D), with c the window's centre pixel
    and t its tap k, both in bottom coordinates:

        top[n, k, o] = sum_ch d^2 / 2  (norm L2)  or  sum_ch |d|  (L1),   d = x[ch, c] - x[ch, t]

    0 where the centre lies outside the image; FLT_MAX / 100 for the centre tap with
    ``remove_center`` and for taps outside the image with ``remove_bounds`` (else 0 there). Top
    N x (kernel_h kernel_w) x H_out x W_out. Backward as the fork's dist2im: the centre and the
    tap get +-d dy (L2) or +-s dy with s = 1 - 2 [d <= 0] (L1), the centre tap nothing; a tap
    outside the image has d = 0, so under L1 the centre still gets -dy there (not a gradient of
    the forward, kept). prototxt: ``convolution_param { kernel_size pad stride dilation }
    im2dist_param { norm: L2 remove_center: false remove_bounds: false }``.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        c = self.layer_param.convolution_param
        if bottom[0].num_axes != 4 or bottom[0].canonical_axis_index(c.axis) != 1:
            raise self.error("bottom must be N x C x H x W with the channel axis 1, got %s"
                             % (bottom[0].shape,), ShapeError)
        self.kh, self.kw = _pair(c, "kernel_size", "kernel_h", "kernel_w", 0)
        self.ph, self.pw = _pair(c, "pad", "pad_h", "pad_w", 0)
        self.sh, self.sw = _pair(c, "stride", "stride_h", "stride_w", 1)
        self.dh, self.dw = (int(c.dilation[0]), int(c.dilation[-1])) if c.dilation else (1, 1)
        if min(self.kh, self.kw) <= 0 or min(self.sh, self.sw) <= 0:
            raise self.error("kernel and stride dimensions must be nonzero")
        p = fork_param(self.layer_param, "im2dist_param")
        self.l2 = p.norm == p.L2
        self.remove_center, self.remove_bounds = bool(p.remove_center), bool(p.remove_bounds)

    def reshape(self, bottom, top):
        n, _, h, w = bottom[0].shape
        self.ho = (h + 2 * self.ph - (self.dh * (self.kh - 1) + 1)) // self.sh + 1
        self.wo = (w + 2 * self.pw - (self.dw * (self.kw - 1) + 1)) // self.sw + 1
        if self.ho <= 0 or self.wo <= 0:
            raise self.error("the window does not fit the %d x %d input" % (h, w), ShapeError)
        top[0].reshape(n, self.kh * self.kw, self.ho, self.wo)

    def _taps(self, h, w):
        """Per kernel offset: (k, centre rows, centre cols, tap rows, tap cols, centre inside,
        tap inside, is the centre tap); rows / cols clipped into the image, masks Ho x Wo."""
        oy, ox = np.arange(self.ho) * self.sh - self.ph, np.arange(self.wo) * self.sw - self.pw
        cy, cx = oy + (self.kh // 2) * self.dh, ox + (self.kw // 2) * self.dw
        cin = ((cy >= 0) & (cy < h))[:, None] & ((cx >= 0) & (cx < w))[None, :]
        for i in range(self.kh):
            for j in range(self.kw):
                ty, tx = oy + i * self.dh, ox + j * self.dw
                tin = ((ty >= 0) & (ty < h))[:, None] & ((tx >= 0) & (tx < w))[None, :]
                yield (i * self.kw + j, np.clip(cy, 0, h - 1), np.clip(cx, 0, w - 1),
                       np.clip(ty, 0, h - 1), np.clip(tx, 0, w - 1), cin, tin,
                       i == self.kh // 2 and j == self.kw // 2)

    def _diff(self, x, cy, cx, ty, tx, cin, tin, centre):
        """d = centre - tap (C x Ho x Wo), 0 where the fork leaves its diff buffer at 0."""
        d = x[:, cy][:, :, cx] - x[:, ty][:, :, tx]
        keep = cin & tin & (not (centre and self.remove_center))
        return np.where(keep, d, 0.0)

    def forward_cpu(self, bottom, top):
        x, y = bottom[0].data, top[0].data
        _, _, h, w = x.shape
        for n in range(x.shape[0]):
            for k, cy, cx, ty, tx, cin, tin, centre in self._taps(h, w):
                d = self._diff(x[n], cy, cx, ty, tx, cin, tin, centre)
                dist = np.sum(d * d, axis=0) * 0.5 if self.l2 else np.sum(np.abs(d), axis=0)
                far = (centre and self.remove_center) | (~tin & self.remove_bounds)
                y[n, k] = np.where(cin, np.where(far, _FAR, dist), 0)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x, dy, dx = bottom[0].data, top[0].diff, bottom[0].diff
        _, c, h, w = x.shape
        dx[...] = 0
        for n in range(x.shape[0]):
            for k, cy, cx, ty, tx, cin, tin, centre in self._taps(h, w):
                if centre:
                    continue
                d = self._diff(x[n], cy, cx, ty, tx, cin, tin, centre)
                g = (d if self.l2 else 1.0 - 2.0 * (d <= 0)) * dy[n, k] * cin
                rows, cols = np.broadcast_arrays(cy[:, None], cx[None, :])
                np.add.at(dx[n], (slice(None), rows, cols), g)
                g = g * tin
                rows, cols = np.broadcast_arrays(ty[:, None], tx[None, :])
                np.subtract.at(dx[n], (slice(None), rows, cols), g)
