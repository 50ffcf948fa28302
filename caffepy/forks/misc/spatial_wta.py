"""SpatialWta: the spatial winner-take-all of t2mhanh/caffe_convLSTM_WTA (the sparse convolutional
autoencoders of its examples/mnist_wta_autoencoder; src/caffe/layers/spatial_wta_layer.cpp, .cu,
include/caffe/layers/spatial_wta_layer.hpp).
"""
import math

import numpy as np

from ...layers.base import Layer, register_layer


@register_layer("SpatialWta")
class SpatialWtaLayer(Layer):
    """Keeps, in every window of every feature map, the one value of largest magnitude:

        mask[n, c, h, w] = 1 if (h, w) wins some window, else 0
        y = x . mask                                  (y has x's shape)
        dL/dx = dL/dy . mask

    The windows are kernel_h x kernel_w, starting at rows ``i stride_h`` and columns ``j
    stride_w`` for i < floor((H - kernel_h) / stride_h) + 1 (the same for the columns; none when
    the kernel is larger than the map). A window's winner is its first element (rows first) of the
    largest |x|; a position winning several windows is kept once. With ``global_wta`` the window is
    the whole H x W map: one value per map survives.

    prototxt: ``spatial_wta_param { kernel_size | kernel_h + kernel_w; stride | stride_h +
    stride_w (default 1); global_wta (default false) }``. With ``global_wta`` no kernel may be set
    and the stride must be 1; otherwise the kernel is required (the fork's LayerSetUp checks).
    ``pad`` / ``pad_h`` / ``pad_w`` and ``engine`` are declared by the fork's message but read by
    neither its CPU nor its GPU forward (the loops in spatial_wta_layer.cpp / .cu start the
    windows at 0 and never offset them), so they change nothing here either.

    Bottom: N x C x H x W (4 axes, as the fork's Reshape checks). Tops: y (N x C x H x W) and,
    optionally, the mask (1 / 0, the same shape); with one top the mask is kept internally.
    Not in place: the fork's forward clears the top before it reads the bottom.
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.spatial_wta_param
        has = p.HasField
        if top[0] is bottom[0]:
            raise self.error("does not compute in place (the fork clears its top before reading "
                             "the bottom)")
        self.global_wta = bool(p.global_wta)
        if self.global_wta:
            if has("kernel_size") or has("kernel_h") or has("kernel_w"):
                raise self.error("with global_wta: true the kernel size cannot be specified")
        else:
            if has("kernel_size") == (has("kernel_h") and has("kernel_w")):
                raise self.error("kernel size is kernel_size OR kernel_h and kernel_w; not both"
                                 if has("kernel_size") else
                                 "kernel_size, or both kernel_h and kernel_w, is required")
            self.kernel = ((p.kernel_size, p.kernel_size) if has("kernel_size")
                           else (p.kernel_h, p.kernel_w))
            if min(self.kernel) <= 0:
                raise self.error("kernel dimensions cannot be zero")
        if has("stride_h") or has("stride_w"):
            if has("stride") or not (has("stride_h") and has("stride_w")):
                raise self.error("stride is stride OR stride_h and stride_w (both)")
            self.stride = (p.stride_h, p.stride_w)
        else:
            self.stride = (p.stride, p.stride)
        if min(self.stride) <= 0:
            raise self.error("stride must be positive")
        if self.global_wta and self.stride != (1, 1):
            raise self.error("with global_wta: true the stride must be 1")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("input must have 4 axes (num, channels, height, width), got shape %s"
                             % (bottom[0].shape,))
        for t in top:
            t.reshape(bottom[0].shape)
        self.mask = np.zeros(bottom[0].shape, dtype=bool)

    def _windows(self, shape):
        h, w = shape[2:]
        kh, kw = (h, w) if self.global_wta else self.kernel
        sh, sw = self.stride
        nh = math.floor(float(h - kh) / sh) + 1
        nw = math.floor(float(w - kw) / sw) + 1
        return kh, kw, sh, sw, max(nh, 0), max(nw, 0)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        kh, kw, sh, sw, nh, nw = self._windows(x.shape)
        mask = self.mask
        mask[...] = False
        if nh and nw:
            a = np.abs(x)
            a = np.where(np.isnan(a), -np.inf, a)       # NaN never wins a comparison there
            win = np.lib.stride_tricks.sliding_window_view(a, (kh, kw), axis=(2, 3))
            win = win[:, :, :(nh - 1) * sh + 1:sh, :(nw - 1) * sw + 1:sw]
            best = win.reshape(win.shape[:4] + (kh * kw,)).argmax(axis=-1)
            n, c, i, j = np.indices(best.shape)
            rows = i * sh + best // kw
            cols = j * sw + best % kw
            mask[n, c, rows, cols] = True
        top[0].data[...] = np.where(mask, x, 0)
        if len(top) > 1:
            top[1].data[...] = mask

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.where(self.mask, top[0].diff, 0)
