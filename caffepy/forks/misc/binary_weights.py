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

dongyp13/Stochastic-Quantization's layers of the same names (caffe/src/caffe/layers/
conv_layer_binary.cu, inner_product_layer_binary.cu, util/lowbit_functions.cu) are built when the
layer sets ``convolution_param`` / ``inner_product_param`` ``sq`` or ``ratio``: B = alpha_o
sign(W[o]) with alpha_o = mean_j |W[o, j]| always; with ``sq: true`` and ``ratio`` < 100
(default 100), each forward (TRAIN and TEST alike) keeps int((1 - ratio / 100) num_output)
rows in full precision, drawn without replacement by roulette with probability proportional to
the row's quantization error ||W[o] - B[o]||_1 / ||W[o]||_1 (0 for an all-zero row): a uniform
p in [0, 1) times the sum of the errors not yet drawn picks the first remaining row o with
p in [acc, acc + e_o). That is the fork's GPU path; its CPU path is a plain float layer (its
binarizing code there is commented out). Backward as above (straight through). The weights are
read as num_output rows of K values in memory order, ``transpose`` or not (as the fork does).
A net of that fork that sets neither field runs as AR-Ped's layer above (no alpha by default).
loswensiana/BWN-XNOR-caffe's BinaryConvolution (alpha always; the float weights put back only in
the backward) is not built.
"""
import numpy as np

from ...layers.base import register_layer, register_variant
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

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)        # the float layer's, then the quantizer's fields
        self._read_binary()

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

    def _make_binary(self):
        return binarize(self.blobs[0].data, self.use_alpha, self.use_binarization)

    def forward_cpu(self, bottom, top):
        self.binary = self._make_binary()
        self._with_binary(super().forward_cpu, bottom, top)

    def backward_cpu(self, top, propagate_down, bottom):
        self._with_binary(super().backward_cpu, top, propagate_down, bottom)


@register_layer("BinaryConvolution")
class BinaryConvolutionLayer(_BinaryWeights, ConvolutionLayer):
    """AR-Ped's BinaryConvolution: Convolution with binarized weights (module docstring)."""
    type = "BinaryConvolution"  # not the parent's type: summaries and net passes read it
    param_field = "binary_convolution_param"


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


def roulette(errors, real_num, rng):
    """The fork's Roulette(): the rows kept in full precision (mask 0), by the order of draws."""
    quantized = np.ones(len(errors), dtype=bool)
    total = errors.dtype.type(errors.sum())
    for _ in range(real_num):
        p = errors.dtype.type(rng.random()) * total
        acc = errors.dtype.type(0)
        for n in range(len(errors)):
            if quantized[n]:
                if acc <= p < acc + errors[n]:
                    quantized[n] = False
                    total -= errors[n]
                    break
                acc += errors[n]
    return quantized


class _StochasticBinary(_BinaryWeights):
    def _read_binary(self):
        p = getattr(self.layer_param, self.param_field)
        self.sq, self.ratio = bool(p.sq), float(p.ratio)

    def _make_binary(self):
        w = self.blobs[0].data
        rows = w.reshape(self.num_output, -1)
        dt = rows.dtype.type
        alpha = (np.abs(rows).sum(axis=1) / dt(rows.shape[1])).astype(rows.dtype)
        b = np.where(rows >= 0, dt(1), dt(-1)) * alpha[:, None]
        if self.sq and self.ratio < 100:
            b = np.where(self._quantized(rows, b)[:, None], b, rows)
        return b.astype(w.dtype).reshape(w.shape)

    def _quantized(self, rows, q):
        """The fork's Roulette over the rows' errors ||W[o] - Q[o]||_1 / ||W[o]||_1: the rows
        that stay quantized (the others keep their float weights)."""
        dt = rows.dtype.type
        denom = np.abs(rows).sum(axis=1)
        err = np.abs(rows - q).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.where(denom == 0, dt(0), err / denom).astype(rows.dtype)
        real_num = int((np.float32(1) - np.float32(self.ratio) / np.float32(100))
                       * np.float32(rows.shape[0]))
        return roulette(err, real_num, self.rng())


def _sets(field):
    def when(lp):
        p = getattr(lp, field)
        return p.HasField("sq") or p.HasField("ratio")
    return when


@register_variant("BinaryConvolution", _sets("convolution_param"))
class StochasticBinaryConvolutionLayer(_StochasticBinary, ConvolutionLayer):
    """dongyp13/Stochastic-Quantization's BinaryConvolution (module docstring):
    ``convolution_param { ... sq: false ratio: 100 }``."""
    type = "BinaryConvolution"
    param_field = "convolution_param"


@register_variant("BinaryInnerProduct", _sets("inner_product_param"))
class StochasticBinaryInnerProductLayer(_StochasticBinary, InnerProductLayer):
    """dongyp13/Stochastic-Quantization's BinaryInnerProduct (module docstring):
    ``inner_product_param { ... sq: false ratio: 100 }``; ``transpose`` is read."""
    type = "BinaryInnerProduct"
    param_field = "inner_product_param"
