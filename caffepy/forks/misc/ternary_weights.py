"""Ternary-weight layers of dongyp13/Stochastic-Quantization (caffe/src/caffe/layers/
conv_layer_ternary.cu, inner_product_layer_ternary.cu, util/lowbit_functions.cu; its GPU path,
the CPU one being a plain float layer): ``TernaryConvolution`` and ``TernaryInnerProduct``,
TWN-style, with the fork's stochastic quantization.

Each forward, with W the float weights as num_output rows of K values (N = num_output K):

    delta = 0.7 / N * sum |W - mean(W)|          (one threshold for the whole layer)
    T[o, j] = alpha_o * (+1 if W[o, j] > delta, -1 if W[o, j] < -delta, else 0)
    alpha_o = mean of |W[o, j]| over the j with |W[o, j]| > delta   (0 when there is none)

With ``sq: true`` and ``ratio`` < 100 in ``convolution_param`` / ``inner_product_param``,
int((1 - ratio / 100) num_output) rows keep their float weights, drawn by the binary layers'
roulette (caffepy.forks.misc.binary_weights.roulette) with probability proportional to
||W[o] - T[o]||_1 / ||W[o]||_1. The layer then runs Convolution / InnerProduct with T and the
float bias. Backward (straight through): the weight gradient is the float layer's (from the bottom
and the top gradient), accumulated into the float weights; the bottom gradient uses T.
"""
import numpy as np

from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.inner_product import InnerProductLayer
from .binary_weights import _StochasticBinary


def ternarize(rows, quantized=None):
    """T of the module doc for ``rows`` (num_output x K); rows where ``quantized`` is False stay
    float."""
    dt = rows.dtype.type
    n = rows.size
    scale = dt(0.7) / dt(n)
    delta = np.abs(scale * (rows - dt(rows.sum(dtype=np.float64) / n))).sum(dtype=np.float64)
    delta = dt(delta)
    code = np.where(rows > delta, dt(1), np.where(rows < -delta, dt(-1), dt(0)))
    kept = np.abs(rows) > delta
    counts = kept.sum(axis=1)
    sums = np.where(kept, np.abs(rows), dt(0)).sum(axis=1)
    alpha = np.where(counts > 0, sums / np.maximum(counts, 1), dt(0)).astype(rows.dtype)
    t = (code * alpha[:, None]).astype(rows.dtype)
    if quantized is not None:
        t = np.where(quantized[:, None], t, rows)
    return t


class _Ternary(_StochasticBinary):
    def _make_binary(self):
        w = self.blobs[0].data
        rows = w.reshape(self.num_output, -1)
        t = ternarize(rows)
        if self.sq and self.ratio < 100:
            t = ternarize(rows, self._quantized(rows, t))
        return t.astype(w.dtype).reshape(w.shape)


@register_layer("TernaryConvolution")
class TernaryConvolutionLayer(_Ternary, ConvolutionLayer):
    """Stochastic-Quantization's TernaryConvolution (module doc):
    ``convolution_param { ... sq: false ratio: 100 }``."""
    type = "TernaryConvolution"
    param_field = "convolution_param"


@register_layer("TernaryInnerProduct")
class TernaryInnerProductLayer(_Ternary, InnerProductLayer):
    """Stochastic-Quantization's TernaryInnerProduct (module doc):
    ``inner_product_param { ... sq: false ratio: 100 }``."""
    type = "TernaryInnerProduct"
    param_field = "inner_product_param"
