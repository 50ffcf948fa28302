"""xavigibert/caffe's ``lr_pre_mult`` of ParamSpec (src/caffe/layers/base_conv_layer.cpp): a factor
on a Convolution's or Deconvolution's own contribution to its parameter gradients, so layers
that share a parameter can learn it at different rates (a shared blob has one lr_mult).

Its Data-layer fields (``source_map``, ``backend: LMDB_FILE``) are read by
caffepy.forks.misc.fork_data, ``mirror_v`` by caffepy.data.transformer.
"""
from ...layers.base import register_variant
from ...layers.conv import ConvolutionLayer
from ...layers.deconv import DeconvolutionLayer


def _pre_mults(lp):
    """(weight factor, bias factor): ``param[0].lr_pre_mult``, ``param[1].lr_pre_mult``, else 1."""
    out = []
    for i in range(2):
        p = lp.param[i] if i < len(lp.param) else None
        out.append(float(p.lr_pre_mult) if p is not None and p.HasField("lr_pre_mult") else 1.0)
    return out


def _has_pre_mult(lp):
    return any(p.HasField("lr_pre_mult") for p in lp.param)


class _PreMultiplied(object):
    """Backward as the base layer's, then each parameter diff keeps what it held before plus
    ``lr_pre_mult`` times this layer's contribution:

        dW += m_w * sum_n dL/dy_n (x) col(x_n)      db += m_b * sum_n,hw dL/dy_n

    (the fork's weight_gpu_gemm / backward_gpu_bias, which scale the gemm / gemv by the factor
    and accumulate into the diff; the fork's CPU path leaves the factor out, its GPU path is
    the one it trains with and is the one computed here). The bottom gradient is unchanged.
    """

    def backward(self, top, propagate_down, bottom):
        mults = _pre_mults(self.layer_param)
        before = [b.diff.copy() for b in self.blobs[:2]]
        super().backward(top, propagate_down, bottom)
        for b, old, m in zip(self.blobs[:2], before, mults):
            if m != 1.0:
                b.diff[...] = old + self.dtype.type(m) * (b.diff - old)


@register_variant("Convolution", _has_pre_mult)
class PreMultipliedConvolutionLayer(_PreMultiplied, ConvolutionLayer):
    """Convolution with xavigibert/caffe's ``param { lr_pre_mult }`` (module doc)."""


@register_variant("Deconvolution", _has_pre_mult)
class PreMultipliedDeconvolutionLayer(_PreMultiplied, DeconvolutionLayer):
    """Deconvolution with xavigibert/caffe's ``param { lr_pre_mult }`` (module doc)."""
