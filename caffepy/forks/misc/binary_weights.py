"""Binary-weight layers of garrickbrazil/AR-Ped's Caffe (external/caffe,
src/caffe/layers/binary_conv_layer.cpp/.cu, binary_inner_product_layer.cpp/.cu, and the cuDNN
BinaryConvolution, which binarizes the same way): ``BinaryConvolution`` and
``BinaryInnerProduct``, BWN / XNOR-Net style.

Each forward builds binary weights from the float ones, per output o:
B[o, j] = alpha_o * (+1 if W[o, j] >= 0 else -1), alpha_o = mean_j |W[o, j]| with ``use_alpha``,
else 1; with ``use_binarization: false`` B = W. The layer then runs Convolution / InnerProduct
with B as the weights and the float bias. Backward (straight through): the weight gradient is
the float layer's (dL/dB, from the bottom and the top gradient), accumulated into the float
weights; the bottom gradient uses B; the bias gradient as usual.

``binary_convolution_param { use_alpha: false use_binarization: true }`` with
``convolution_param`` as Convolution's; ``binary_inner_product_param { ... }`` (same fields)
with ``inner_product_param`` as InnerProduct's, except that ``transpose`` is not read (the
fork's LayerSetUp sets transpose_ = false).

dongyp13/Stochastic-Quantization and loswensiana/BWN-XNOR-caffe register types of the same
names with other parameters and arithmetic; those are not these layers.
"""
import numpy as np

from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.inner_product import InnerProductLayer


def binarize(w, use_alpha, use_binarization):
    """B as the fork's Forward computes it, for a weight blob whose first axis is the output."""
    if not use_binarization:
        return w.copy()
    rows = w.reshape(w.shape[0], -1)
    alpha = np.abs(rows).sum(axis=1) * (1.0 / rows.shape[1]) if use_alpha else \
        np.ones(rows.shape[0])
    code = np.where(rows >= 0, 1.0, -1.0)
    return (code * alpha[:, None].astype(w.dtype)).astype(w.dtype).reshape(w.shape)


class _BinaryWeights(object):
    param_field = None

    def _read_binary(self):
        p = getattr(self.layer_param, self.param_field)
        self.use_alpha, self.use_binarization = bool(p.use_alpha), bool(p.use_binarization)

    def _with_binary(self, run, *args):
        w = self.blobs[0]
        saved = w.data.copy()
        w.data[...] = self.binary
        try:
            run(*args)
        finally:
            w.data[...] = saved

    def forward_cpu(self, bottom, top):
        self.binary = binarize(self.blobs[0].data, self.use_alpha, self.use_binarization)
        self._with_binary(super().forward_cpu, bottom, top)

    def backward_cpu(self, top, propagate_down, bottom):
        self._with_binary(super().backward_cpu, top, propagate_down, bottom)


@register_layer("BinaryConvolution")
class BinaryConvolutionLayer(_BinaryWeights, ConvolutionLayer):
    """AR-Ped's BinaryConvolution: Convolution with binarized weights (module docstring)."""
    type = "BinaryConvolution"  # not the parent's type: summaries and net passes read it
    param_field = "binary_convolution_param"

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self._read_binary()


@register_layer("BinaryInnerProduct")
class BinaryInnerProductLayer(_BinaryWeights, InnerProductLayer):
    """AR-Ped's BinaryInnerProduct: InnerProduct with binarized (num_output, K) weights
    (module docstring); ``transpose`` is not read."""
    type = "BinaryInnerProduct"  # not the parent's type: summaries and net passes read it
    param_field = "binary_inner_product_param"

    def layer_setup(self, bottom, top):
        lp = self.layer_param
        if lp.inner_product_param.transpose:
            lp = type(lp)()
            lp.CopyFrom(self.layer_param)
            lp.inner_product_param.transpose = False
            self.layer_param = lp
        super().layer_setup(bottom, top)
        self._read_binary()
