"""EscConvolution: chenxuhao/caffe-escoin's convolution for pruned (sparse) weights.

The fork (src/caffe/layers/esc_conv_layer.cpp, .cu; include/caffe/util/esc.hpp, sconv.hpp) keeps
Caffe's convolution arithmetic and only changes how the GPU computes it: its forward multiplies
the nonzero weights straight against the input (no im2col), its CPU forward and backward are the
BaseConvolutionLayer im2col + GEMM of Caffe's ``Convolution``. The sparsity is in the weights
the net loads, not in the layer, so the numbers are Caffe's convolution's.
"""
from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer


@register_layer("EscConvolution")
class EscConvolutionLayer(ConvolutionLayer):
    """Caffe's convolution, y = W * x + b (cross-correlation over ``group`` groups), exactly as
    ``Convolution`` computes it; the gradients are Caffe's (dW += dY col^T, db += sum dY,
    dx = col2im(W^T dY)).

    prototxt: ``convolution_param`` as Convolution's (num_output, kernel_size / kernel_h /
    kernel_w, stride, pad, dilation, group, bias_term, weight_filler, bias_filler). The output
    size is Caffe's (in + 2 pad - (dilation (k - 1) + 1)) / stride + 1 (the fork's
    compute_output_shape). Blobs: weight (num_output, C / group, kh, kw), bias (num_output,).
    """
    type = "EscConvolution"
