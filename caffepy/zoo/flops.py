"""Forward FLOPs of a set-up layer, as ``caffepy summary`` shows them (a multiply-add counts 2;
estimates of the forward pass):

Convolution (NdConvolution, and the forks' convolution, deconvolution and inner-product
subclasses alike) ``2 * weight.size * H_out * W_out * N`` (+ bias), Deconvolution the same over
the input positions, InnerProduct / Embed ``2 * weight.size * M``, LSTM / RNN
``2 * weights * T * N``, Pooling (N-d and NdPooling too) ``top.count * kernel volume``, a layer
that is several operations (DenseBlock) its own ``forward_flops(bottom, top)``, everything else
``top.count`` per top (0 for layers that only move or reshape data).
"""
import numpy as np

from ..layers.conv import ConvolutionLayer
from ..layers.deconv import DeconvolutionLayer
from ..layers.inner_product import InnerProductLayer

NO_COMPUTE = frozenset(["Input", "Split", "Reshape", "Flatten", "Silence", "Concat", "Slice",
                        "Permute", "Crop", "AutoCrop", "Dropout", "Data", "DummyData", "Python",
                        "Tile", "Reorg", "ShuffleChannel", "BatchReindex", "Parameter", "Filter",
                        "RandomCrop", "DataSwitch"])


def _count(shape):
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def layer_flops(layer, bottom, top):
    """Forward FLOPs estimate of one set-up layer (see module doc)."""
    own = getattr(layer, "forward_flops", None)
    if own is not None:                 # a layer that is several operations counts its own
        return int(own(bottom, top))
    t = layer.type
    params = [b.shape for b in layer.blobs]
    if (t in ("Convolution", "DepthwiseConvolution", "ConvolutionDepthwise",
              "NdConvolution", "Winograd2x2Trans", "Winograd2x2Conv", "WinoConvolution")
            or isinstance(layer, ConvolutionLayer)) and params:
        n_out = _count(top[0].shape[2:]) * top[0].shape[0]
        return 2 * _count(params[0]) * n_out + (top[0].count if len(params) > 1 else 0)
    if (t == "Deconvolution" or isinstance(layer, DeconvolutionLayer)) and params:
        n_in = _count(bottom[0].shape[2:]) * bottom[0].shape[0]
        return 2 * _count(params[0]) * n_in + (top[0].count if len(params) > 1 else 0)
    if isinstance(layer, InnerProductLayer) and params and t != "InnerProduct":
        t = "InnerProduct"              # the forks' binary / quantised / pruned forms
    if t in ("InnerProduct", "Embed") and params:
        w = params[0]
        num_output = w[0] if t == "InnerProduct" else w[1]
        m = top[0].count // max(num_output, 1)
        return 2 * _count(w) * m
    if t in ("LSTM", "RNN") and params:
        T, N = bottom[0].shape[:2]
        return 2 * sum(_count(p) for p in params if len(p) == 2) * T * N
    if t in ("Pooling", "NdPooling"):
        pp = layer.layer_param.pooling_param
        kernel = getattr(getattr(layer, "geom", None), "kernel", None)
        if kernel is not None:           # the window the layer uses (N-d pooling included)
            area = _count(kernel)
        elif pp.global_pooling:
            area = _count(bottom[0].shape[2:])
        elif pp.kernel_h and pp.kernel_w:
            area = pp.kernel_h * pp.kernel_w
        else:
            area = pp.kernel_size ** max(bottom[0].num_axes - 2, 1)
        return top[0].count * int(area)
    if t in NO_COMPUTE:
        return 0
    return sum(tb.count for tb in top)
