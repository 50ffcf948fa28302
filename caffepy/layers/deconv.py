"""Deconvolution (transposed convolution): Convolution's geometry and parameters, data path reversed."""
import numpy as np

from ..math.sizes import deconv_out_shape
from . import conv_onednn
from .base import register_layer
from .conv_base import _ConvolutionBase


def _weight_grad(dy, col):
    """sum_n dy[n, g] @ col[n, g].T for dy (N, G, A, O), col (N, G, B, O) -> (G, A, B)."""
    n, g = dy.shape[:2]
    if g == 1:
        a, b = dy.shape[2], col.shape[2]
        if n == 1:
            return np.matmul(dy[0], col[0].transpose(0, 2, 1))
        return np.matmul(dy[:, 0], col[:, 0].transpose(0, 2, 1)).sum(axis=0).reshape(1, a, b)
    return np.einsum("ngao,ngbo->gab", dy, col, optimize=True)


@register_layer("Deconvolution")
class DeconvolutionLayer(_ConvolutionBase):
    """Deconvolution (transposed convolution): the adjoint of Convolution's data path.

    forward = Convolution's backward-data pass: col = W^T x per group, then col2im + bias;
    backward: dx = W im2col(dY), dW += x im2col(dY)^T, db += sum dY.
    Output size per spatial axis (Caffe's rule):
    O = stride (S - 1) + dilation (kernel - 1) + 1 - 2 pad.

    ``shape_offset`` (happynear/caffe-windows@967eedf, deconv_layer.cpp compute_output_shape;
    also its forks Centerus/caffe-windows, Aliang-SEU/MTCNN-on-caffe-window): one value per
    spatial axis added to O; the extra rows and columns take what the kernels reach, as an
    output padding. Each must be below the stride: the fork's col2im would otherwise read past
    its column buffer. Convolution ignores the field, as the fork's does.

    Where oneDNN is installed, float32 layers run its deconvolution primitives (conv_onednn.py),
    except with a shape_offset.

    Fields as Convolution. Weight blob: (channels, num_output / group, *kernel).
    Blobs: bottom (*B, C, *S) -> top (*B, num_output, *O).
    """
    reverse = True
    shape_offset = None

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        p = self.layer_param.convolution_param
        off = tuple(int(v) for v in getattr(p, "shape_offset", ()))
        if not off:
            return
        if len(off) != self.num_spatial:
            raise self.error("convolution_param.shape_offset needs one value per spatial axis "
                             "(%d), got %d" % (self.num_spatial, len(off)))
        if any(o >= s for o, s in zip(off, self.stride)):
            raise self.error("convolution_param.shape_offset %s must be below the stride %s"
                             % (off, self.stride))
        if any(off):
            self.shape_offset = off

    def compute_output_shape(self, spatial):
        out = deconv_out_shape(spatial, self.kernel, self.pad, self.stride, self.dilation)
        if self.shape_offset:
            out = tuple(o + a for o, a in zip(out, self.shape_offset))
        return out

    def forward_cpu(self, bottom, top):
        if conv_onednn.forward(self, bottom, top):
            return
        w = self._weight()
        g = self.group
        oshape = (self.outer, self.num_output) + tuple(self.out_spatial)
        for b, t in zip(bottom, top):
            x = b.data.reshape(self.outer, g, self.channels // g, -1)
            col = np.matmul(w.transpose(0, 2, 1), x)
            y = t.data.reshape(oshape)
            self._col2im(col.reshape(self.outer, -1, col.shape[-1]), oshape, y)
            self._add_bias(y.reshape(self.outer, self.num_output, -1))

    def backward_cpu(self, top, propagate_down, bottom):
        if conv_onednn.backward(self, top, propagate_down, bottom):
            return
        w = self._weight()
        g = self.group
        oshape = (self.outer, self.num_output) + tuple(self.out_spatial)
        for i, (b, t) in enumerate(zip(bottom, top)):
            dy = t.diff.reshape(oshape)
            self._bias_grad(dy)
            dcol = self._im2col(dy).reshape(self.outer, g, w.shape[2], -1)
            if self.param_propagate_down[0]:
                x = b.data.reshape(self.outer, g, self.channels // g, -1)
                self.blobs[0].diff += _weight_grad(x, dcol).reshape(self.blobs[0].shape)
            if propagate_down[i]:
                dx = b.diff.reshape(self.outer, g, self.channels // g, -1)
                np.matmul(w, dcol, out=dx)
