"""Layers of aharley/segaware (segmentation-aware convolution; also jialinwu17/segawareatt):
Im2parity (same-label masks of every patch) and DistLoss (the embedding-distance hinge on
them). segaware's ChannelReduce is in :mod:`caffepy.forks.misc.channel_ops`."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer
from ...layers.conv_base import _ConvolutionBase


def _patch_geometry(layer, bottom):
    """kernel, pad, stride, dilation (2 values each) of ``convolution_param`` for a 4-axis
    bottom with the channel axis at 1, checked as Caffe's convolution checks them."""
    p = layer.layer_param.convolution_param
    if bottom.num_axes != 4 or (p.axis % 4) != 1:
        raise layer.error("bottom must be N x C x H x W with convolution_param.axis 1, got "
                          "shape %s" % (bottom.shape,), ShapeError)
    spatial = _ConvolutionBase._spatial_field
    kernel = spatial(layer, p, "kernel_size", 2, None)
    pad = spatial(layer, p, "pad", 2, 0)
    stride = spatial(layer, p, "stride", 2, 1)
    dil = list(p.dilation) or [1]
    if len(dil) not in (1, 2):
        raise layer.error("dilation must be given once or twice, got %d" % len(dil))
    dilation = tuple(int(d) for d in (dil * 2)[:2])
    if min(kernel) <= 0 or min(stride) <= 0:
        raise layer.error("kernel sizes and strides must be > 0, got %s and %s"
                          % (kernel, stride))
    return kernel, pad, stride, dilation


@register_layer("Im2parity")
class Im2parityLayer(Layer):
    """For every kernel-sized patch of a label map, whether each position has the label of the
    patch centre (aharley/segaware, caffe/src/caffe/util/im2parity.cpp). With the patch geometry
    of ``convolution_param`` (kernel_size / kernel_h kernel_w, pad, stride, dilation), top
    N x (kh kw) x Ho x Wo (Ho, Wo as a convolution's output); for patch (i, j) at output (u, v):

        centre = label at (u s_h - p_h + (kh/2) d_h, v s_w - p_w + (kw/2) d_w)
        here   = label at (u s_h - p_h + i d_h, v s_w - p_w + j d_w), 0 outside the map
        y[i kw + j, u, v] = ignore_label   where ``ignore_label`` is set and here or centre is it,
                                            and where the centre lies outside the map
                          = (here == centre)  else   (labels compared as ints, truncated)

    With several channels each channel overwrites the same kh kw outputs, so the last channel
    decides (as in the fork). prototxt: ``convolution_param { kernel_size pad stride dilation }``,
    ``im2parity_param { ignore_label }``. A geometry that puts patch centres outside the map
    needs ``ignore_label`` (the fork writes it there unset). No backward (NOT_IMPLEMENTED in the
    fork).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.im2parity_param
        self.ignore = int(p.ignore_label) if p.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        self.geometry = _patch_geometry(self, bottom[0])
        (kh, kw), (ph, pw), (sh, sw), (dh, dw) = self.geometry
        n, _, h, w = bottom[0].shape
        ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
        wo = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
        if ho <= 0 or wo <= 0:
            raise self.error("the patches do not fit the %d x %d map" % (h, w), ShapeError)
        self.ch = np.arange(ho) * sh - ph + (kh // 2) * dh
        self.cw = np.arange(wo) * sw - pw + (kw // 2) * dw
        outside = (self.ch.min() < 0 or self.ch.max() >= h or self.cw.min() < 0
                   or self.cw.max() >= w)
        if outside and self.ignore is None:
            raise self.error("the padding puts patch centres outside the map: set "
                             "im2parity_param.ignore_label (the fork writes it there)")
        top[0].reshape((n, kh * kw, ho, wo))

    def forward_cpu(self, bottom, top):
        (kh, kw), (ph, pw), (sh, sw), (dh, dw) = self.geometry
        n, c, h, w = bottom[0].shape
        lab = np.trunc(bottom[0].data[:, c - 1]).astype(np.int64)
        ho, wo = len(self.ch), len(self.cw)
        inside_c = ((self.ch >= 0) & (self.ch < h))[:, None] & ((self.cw >= 0) & (self.cw < w))
        centre = lab[:, np.clip(self.ch, 0, h - 1)][:, :, np.clip(self.cw, 0, w - 1)]
        out = np.empty((n, kh * kw, ho, wo))
        for i in range(kh):
            rows = np.arange(ho) * sh - ph + i * dh
            for j in range(kw):
                cols = np.arange(wo) * sw - pw + j * dw
                inside = ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))
                here = lab[:, np.clip(rows, 0, h - 1)][:, :, np.clip(cols, 0, w - 1)]
                here = np.where(inside, here, 0)
                val = (here == centre).astype(np.float64)
                if self.ignore is not None:
                    val = np.where((here == self.ignore) | (centre == self.ignore),
                                   self.ignore, val)
                out[:, i * kw + j] = np.where(inside_c, val,
                                              self.ignore if self.ignore is not None else 0)
        top[0].data[...] = out


@register_layer("DistLoss")
class DistLossLayer(LossLayer):
    """Hinge on embedding distances against same-label masks (aharley/segaware,
    caffe/src/caffe/layers/dist_loss_layer.cpp). Bottoms: distances d and parities q (the
    masks of ``Im2parity``; the same count), one loss over the K = count(d) elements:

        m = max(d - alpha, 0)    where int(q) != 0  (same label: pull closer than alpha)
        m = -max(beta - d, 0)    where int(q) == 0  (other label: push past beta)
        m = 0                    where ``ignore_label`` is set and int(q) equals it
        loss = sum |m| / K;      bottom[0]'s diff = m / K

    The backward is the fork's: it writes m / K, which is the gradient of sum m^2 / (2K) rather
    than of the loss, and does not scale it by the top's diff (loss_weight). This follows the
    fork's CPU path (its GPU kernel reads only the first sample); where the fork zeroes only
    the first sample's buffer, ignored elements of later samples keep the previous forward's m
    there, and get 0 here. prototxt: ``dist_loss_param { alpha beta ignore_label }`` (0 < alpha
    < beta), and ``convolution_param`` with a kernel size > 0 (the fork checks it and uses
    nothing else of it). The parities get no gradient.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.dist_loss_param
        self.alpha, self.beta = float(p.alpha), float(p.beta)
        if not 0 < self.alpha < self.beta:
            raise self.error("dist_loss_param needs 0 < alpha < beta, got alpha %g beta %g"
                             % (self.alpha, self.beta))
        self.ignore = int(p.ignore_label) if p.HasField("ignore_label") else None
        if bottom[0].num_axes == 4:
            _patch_geometry(self, bottom[0])
        else:
            raise self.error("bottom[0] must be N x C x H x W, got shape %s"
                             % (bottom[0].shape,), ShapeError)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[1].count != bottom[0].count:
            raise self.needs("the parities must have the count of the distances (%s vs %s)"
                             % (bottom[1].shape, bottom[0].shape), [(1, bottom[0].shape, 0)])

    def _margins(self, bottom):
        d = bottom[0].data.astype(np.float64)
        q = np.trunc(bottom[1].data.reshape(d.shape)).astype(np.int64)
        m = np.where(q != 0, np.maximum(d - self.alpha, 0), -np.maximum(self.beta - d, 0))
        if self.ignore is not None:
            m = np.where(q == self.ignore, 0.0, m)
        return m

    def forward_cpu(self, bottom, top):
        m = self._margins(bottom)
        self.m = m
        top[0].data[...] = np.abs(m).sum() / m.size

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the parities (bottom 1)")
        if propagate_down[0]:
            bottom[0].diff[...] = self.m / self.m.size
