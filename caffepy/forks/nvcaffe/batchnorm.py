"""NVIDIA Caffe (NVCaffe): BatchNorm's built-in scale and bias (``scale_bias``).

NVCaffe's BatchNorm (``batch_norm_layer.cpp``) may carry the affine part itself instead of a
following Scale layer:

    y = scale * x_hat + bias,   x_hat = the BVLC BatchNorm output (x - mu) / sqrt(var + eps)

prototxt: ``batch_norm_param { scale_bias: false scale_filler {} bias_filler {} }``; giving either
filler turns ``scale_bias`` on, as in NVCaffe. Params: NVCaffe's blob order, the three statistics
blobs then scale (C,) and bias (C,) (fillers default to constant 1 and 0); the statistics keep
lr_mult 0, scale and bias default to lr_mult 1 / decay_mult 1 (NVCaffe sets both to 1).
Gradients: d scale += sum(dy x_hat), d bias += sum(dy) over N and the spatial axes; the
normalisation's backward then runs on scale * dy.

NVCaffe caffemodels may hold weights as raw fp16 / fp32 / fp64 bytes (BlobProto ``raw_data`` with
``raw_data_type``): :func:`caffepy.proto.packed.raw_blob_values` decodes them for ``Blob.from_proto``.

NVCaffe stores the statistics with the third blob fixed at 1 (mean and variance themselves), which
BVLC's reading ``mean = blob0 / blob2`` gives back, so NVCaffe weights load unchanged.
"""
import numpy as np

from ... import fillers
from ...layers.base import register_variant
from ...layers.normalization import BatchNormLayer


def wants_scale_bias(batch_norm_param):
    p = batch_norm_param
    return bool(p.scale_bias) or p.HasField("scale_filler") or p.HasField("bias_filler")


def setup_scale_bias(layer, channels):
    """Append scale and bias blobs (when the layer has only its statistics) and their ParamSpecs."""
    p = layer.layer_param.batch_norm_param
    if len(layer.blobs) == 3:
        scale, bias = layer.new_blob((channels,)), layer.new_blob((channels,))
        for blob, field, value in ((scale, "scale_filler", 1.0), (bias, "bias_filler", 0.0)):
            if p.HasField(field):
                fillers.fill(blob, getattr(p, field))
            else:
                blob.data[...] = value
        layer.blobs.extend([scale, bias])
    if len(layer.blobs) != 5:
        raise layer.error("scale_bias expects 5 parameter blobs, has %d" % len(layer.blobs))
    specs = layer.layer_param.param
    while len(specs) < 5:
        spec = specs.add()
        spec.lr_mult, spec.decay_mult = (0.0, 0.0) if len(specs) <= 3 else (1.0, 1.0)


def _bcast(v):
    return v.reshape(1, -1, 1)


def forward_scale_bias(layer, y):
    """``y`` (N, C, S view of the normalised output) <- scale * y + bias, in place."""
    y *= _bcast(layer.blobs[3].data)
    y += _bcast(layer.blobs[4].data)


def backward_scale_bias(layer, dy, x_hat):
    """Accumulate the scale/bias gradients; returns the gradient w.r.t. x_hat (scale * dy)."""
    if layer.param_propagate_down[3]:
        layer.blobs[3].diff[...] += (dy * x_hat).sum(axis=(0, 2))
    if layer.param_propagate_down[4]:
        layer.blobs[4].diff[...] += dy.sum(axis=(0, 2))
    return dy * _bcast(layer.blobs[3].data)


@register_variant("BatchNorm", lambda lp: wants_scale_bias(lp.batch_norm_param))
class ScaleBiasBatchNormLayer(BatchNormLayer):
    """BatchNorm with NVCaffe's learned scale and bias (``scale_bias``, or a scale / bias filler):
    BVLC's normalisation, then y = scale * x_hat + bias. Runs on the host in GPU mode."""
    scale_bias = True

    def setup_scale_bias(self, channels):
        setup_scale_bias(self, channels)

    def forward_scale_bias(self, y):
        forward_scale_bias(self, y)

    def backward_scale_bias(self, dy, x_hat):
        return backward_scale_bias(self, dy, x_hat)

    def forward_gpu(self, bottom, top):
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)
