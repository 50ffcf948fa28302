"""Inference mode's folding (caffepy.infer.plan, step 1; caffepy.infer.parts for the onnxruntime
engine): a BatchNorm with fixed statistics, a Scale or a Bias as per-channel ``y = a x + c``, and
a Convolution / InnerProduct that computes ``a * (its output) + c``: with its weights scaled in
place (``folded_copy``), or as new arrays (``folded_params``)."""
import copy

import numpy as np

from ..blob import Blob


def shallow(layer):
    """A copy of ``layer`` sharing its blobs, with an im2col cache of its own."""
    new = copy.copy(layer)
    if hasattr(layer, "_cols"):
        new._cols = {}
    return new


def affine_of(layer, nbottom):
    """(a, c) per channel for y = a x + c of a BatchNorm (fixed statistics), Scale or Bias with
    learned one-bottom parameters over axis 1; None for any other layer."""
    t = layer.type
    if nbottom != 1:
        return None
    if t == "BatchNorm" and layer.use_global_stats:
        sum_mu, sum_var, s = (b.data.astype(np.float64).reshape(-1) for b in layer.blobs[:3])
        factor = 0.0 if s[0] == 0 else 1.0 / s[0]
        std = np.sqrt(factor * sum_var + layer.eps)
        a, c = 1.0 / std, -factor * sum_mu / std
        if getattr(layer, "scale_bias", False):      # NVCaffe: scale * x_hat + bias built in
            scale, bias = (b.data.astype(np.float64).reshape(-1) for b in layer.blobs[3:5])
            a, c = scale * a, scale * c + bias
        return a, c
    p = getattr(layer, "layer_param", None)
    if t == "Scale" and p.scale_param.axis in (1, -3) and p.scale_param.num_axes == 1:
        a = layer.blobs[0].data.astype(np.float64).reshape(-1)
        c = (layer.blobs[layer.bias_index].data.astype(np.float64).reshape(-1)
             if layer.bias_index is not None else np.zeros_like(a))
        return a, c
    if t == "Bias" and p.bias_param.axis in (1, -3) and p.bias_param.num_axes == 1:
        c = layer.blobs[0].data.astype(np.float64).reshape(-1)
        return np.ones_like(c), c
    return None


def folded_copy(layer, a, c, in_place=True):
    """A copy of Convolution / InnerProduct ``layer`` computing a * (its output) + c. The
    weights are scaled in place (a second copy of a ResNet's weights would cost more memory than
    the mode saves), row by row in float64, or in a new blob (``in_place`` False: the layer's
    own weights are left as they are); the bias is a new blob."""
    new = shallow(layer)
    wb = layer.blobs[0]
    if not in_place:
        wb = Blob(wb.shape, wb.dtype)
        wb.data[...] = layer.blobs[0].data
    w = wb.data
    rows = w.T if layer.type == "InnerProduct" and layer.transpose else w
    for m in range(rows.shape[0]):
        rows[m] = rows[m].astype(np.float64) * a[m]
    b = layer.blobs[1].data.astype(np.float64).reshape(-1) if layer.bias_term else 0.0
    bb = Blob((a.size,), w.dtype)
    bb.data[...] = a * b + c
    new.blobs = [wb, bb]
    new.bias_term = True
    return new


def folded_params(layer, a, c):
    """(W', b') as new float32 arrays for Convolution / InnerProduct ``layer`` computing
    a * (its output) + c, in float64; the layer's own weights are left as they are."""
    w = layer.blobs[0].data.astype(np.float64)
    if layer.type == "InnerProduct" and layer.transpose:
        w = w * a.reshape(1, -1)
    else:
        w = w * a.reshape((-1,) + (1,) * (w.ndim - 1))
    b = layer.blobs[1].data.astype(np.float64).reshape(-1) if layer.bias_term else 0.0
    return w.astype(np.float32), (a * b + c).astype(np.float32)
