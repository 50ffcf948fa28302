"""BVLC's ``Im2col`` layer: the convolution column buffer as a blob (CTPN feeds it to its LSTM)."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu
from .base import Layer, register_layer
from .conv_base import _ConvolutionBase


@register_layer("Im2col")
class Im2colLayer(Layer):
    """y[n, (c, k_1 .. k_d), o_1 .. o_d] = x_padded[n, c, o_1 s_1 + k_1 e_1, ...] (x zero-padded
    by ``pad``; s stride, e dilation), i.e. every convolution window laid out in the channels:
    top (N, C * prod(K), *O) with O = (S + 2 pad - (e (K - 1) + 1)) / s + 1 per spatial axis
    (C++ division, toward zero: caffepy.math.sizes).
    Backward: dx = col2im(dy), the sum of the window entries that read each input.

    prototxt: ``convolution_param { kernel_size (or kernel_h / kernel_w) pad stride dilation
    axis: 1 }`` (num_output, group and the fillers are not used). Bottom (N, C, *S).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    _spatial_field = _ConvolutionBase._spatial_field

    def layer_setup(self, bottom, top):
        p = self.layer_param.convolution_param
        self.axis = bottom[0].canonical_axis_index(p.axis)
        if self.axis != 1:
            raise self.error("only convolution_param.axis 1 is supported, got %d" % self.axis)
        n = bottom[0].num_axes - 2
        if n < 1:
            raise self.error("needs at least one spatial axis (bottom shape %s)"
                             % (bottom[0].shape,))
        self.kernel = self._spatial_field(p, "kernel_size", n, None)
        self.stride = self._spatial_field(p, "stride", n, 1)
        self.pad = self._spatial_field(p, "pad", n, 0)
        dil = [int(d) for d in p.dilation]
        if len(dil) not in (0, 1, n):
            raise self.error("dilation must be given once or %d times, got %d" % (n, len(dil)))
        self.dilation = tuple(dil * n if len(dil) == 1 else dil) if dil else (1,) * n
        if min(self.kernel + self.stride + self.dilation) <= 0:
            raise self.error("kernel, stride and dilation must be positive")

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 2 + len(self.kernel):
            raise self.error("bottom num_axes may not change (got shape %s)" % (x.shape,),
                             ShapeError)
        out = cpu.conv_out_shape(x.shape[2:], self.kernel, self.pad, self.stride, self.dilation)
        if any(o <= 0 for o in out):
            raise self.error("output spatial shape %s is empty for input %s"
                             % (tuple(out), x.shape), ShapeError)
        self.out = tuple(int(o) for o in out)
        top[0].reshape((x.shape[0], x.shape[1] * int(np.prod(self.kernel))) + self.out)

    def _geometry(self):
        return self.kernel, self.pad, self.stride, self.dilation

    def forward_cpu(self, bottom, top):
        col = cpu.im2col(bottom[0].data, *self._geometry())
        top[0].data[...] = col.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            col = top[0].diff.reshape(top[0].shape[0], top[0].shape[1], -1)
            bottom[0].diff[...] = cpu.col2im(col, bottom[0].shape, *self._geometry())
