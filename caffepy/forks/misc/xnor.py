"""XNOR-Net's input binarisation: ``BinActiv`` of loswensiana/BWN-XNOR-caffe
(src/caffe/ex_layers/binactiv_layer.cpp), the layer its XNOR nets put before each
BinaryConvolution.

Two tops from a bottom x (N x C x H x W):

    top 0:  B = sign(x), +1 where x >= 0, else -1 (same shape as x)
    top 1:  K = conv(A; W) / k^2,  A = sum_c x[:, c] / C  (N x 1 x H x W)

where the convolution is the layer's own ``convolution_param`` (its num_output, pad, stride,
kernel_size k, weight_filler, bias) applied to A, and k is the first ``kernel_size``. The
convolution's weights belong to an inner layer, not to BinActiv (a .caffemodel holds no blobs for
it): they are drawn from ``weight_filler`` when the net is built (XNOR-Net's files set a constant 1,
so K is the k x k box average of A). K must have N H W values (num_output 1, a size-preserving
geometry), which the fork checks; they are read in memory order as N x 1 x H x W.
Backward (straight through, top 0 only): dx = dB where |x| <= 1, else 0; K passes no gradient.
"""
import numpy as np

from ... import fillers
from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...math.cpu import im2col


@register_layer("BinActiv")
class BinActivLayer(Layer):
    """loswensiana/BWN-XNOR-caffe's BinActiv: see the module doc."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.convolution_param
        if not len(p.kernel_size):
            raise self.error("BinActiv needs convolution_param.kernel_size (the fork reads "
                             "kernel_size(0))")
        k = int(p.kernel_size[0])
        pad = int(p.pad[0]) if len(p.pad) else 0
        stride = int(p.stride[0]) if len(p.stride) else 1
        if k < 1 or stride < 1 or pad < 0 or p.num_output < 1:
            raise self.error("BinActiv's convolution_param needs num_output, kernel_size and "
                             "stride >= 1 and pad >= 0")
        self.geometry = ((k, k), (pad, pad), (stride, stride))
        w = self.new_blob((int(p.num_output), 1, k, k))
        fillers.fill(w, p.weight_filler)
        self.inner_weight = w.data.copy()
        self.inner_bias = None
        if p.bias_term:
            b = self.new_blob((int(p.num_output),))
            fillers.fill(b, p.bias_filler)
            self.inner_bias = b.data.copy()

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("BinActiv takes an N x C x H x W bottom, got %s"
                             % (bottom[0].shape,), ShapeError)
        n, c, h, w = bottom[0].shape
        (k, _), (pad, _), (stride, _) = self.geometry
        out = [(s + 2 * pad - k) // stride + 1 for s in (h, w)]
        if self.inner_weight.shape[0] * out[0] * out[1] != h * w:
            raise self.error("BinActiv's convolution gives %d x %d x %d values for an input of "
                             "%d x %d; the fork needs H x W of them (num_output 1 and a size "
                             "that stays)" % ((self.inner_weight.shape[0],) + tuple(out) + (h, w)),
                             ShapeError)
        top[0].reshape(bottom[0].shape)
        top[1].reshape((n, 1, h, w))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = np.where(x >= 0, 1.0, -1.0)
        a = (x / x.shape[1]).sum(axis=1, keepdims=True)
        kernel, pad, stride = self.geometry
        col = im2col(a, kernel, pad, stride, (1, 1))
        k = np.matmul(self.inner_weight.reshape(self.inner_weight.shape[0], -1), col)
        if self.inner_bias is not None:
            k = k + self.inner_bias[:, None]
        top[1].data.reshape(-1)[...] = k.reshape(-1) * (1.0 / (kernel[0] * kernel[0]))

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x = bottom[0].data
            bottom[0].diff[...] = np.where(np.abs(x) <= 1, top[0].diff, 0.0)
