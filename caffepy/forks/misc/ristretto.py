"""Ristretto's quantized layers (pmgysel/caffe, include/ristretto/base_ristretto_layer.hpp,
src/caffe/ristretto/layers/*; copied by apple35932003/IVS-Caffe and gklz1982/caffe-yolov2):
``ConvolutionRistretto``, ``DeconvolutionRistretto``, ``FcRistretto`` and ``LRNRistretto`` --
the float layers run on fake-quantized numbers.

``quantization_param { precision rounding_scheme bw_layer_in bw_layer_out bw_params fl_layer_in
fl_layer_out fl_params mant_bits exp_bits exp_min exp_max }`` (Ristretto's defaults: bit widths
32, fractional lengths 16, 23 mantissa and 8 exponent bits, exponents -8 .. -1). Ristretto
declares the fractional lengths ``optional``; this schema has them ``repeated`` (intel/caffe's
message), so the last value given is used, as protobuf keeps the last value of an optional field.

The three trims, as base_ristretto_layer.cpp computes them on the CPU:

* dynamic fixed point (bit width b, fractional length f): x clamped to
  [-2^(b-1) 2^-f, (2^(b-1) - 1) 2^-f], divided by 2^-f, rounded (NEAREST: std::round, halves away
  from zero; STOCHASTIC: floor(x + u), u uniform in [0, 1)), multiplied by 2^-f;
* minifloat (m mantissa, e exponent bits): x as float32 split into sign, exponent and mantissa;
  the exponent re-biased to 2^(e-1) - 1; a zero / float32-denormal input or an exponent below 0
  gives 0; an exponent above 2^e - 1 saturates (exponent 2^e - 1, mantissa 2^m - 1); else the
  23-bit mantissa divided by 2^(23-m) is rounded as above;
  y = (-1)^s (1 + mant / 2^m) 2^(exp - bias). The CPU loop *returns* at the first zero /
  underflowing element (src line ``data[index] = 0; return;``): that element becomes 0 and the
  rest of the blob is left as it was -- reproduced here;
* integer power of two (weights only): y = sign 2^clamp(round(log2|x|), exp_min, exp_max), sign
  +1 for x >= 0 (so 0 becomes +2^exp_min); the bias is not trimmed, nor are the activations
  (the CPU path; the fork's GPU path trims them to fixed point).

Forward (conv / deconv / fc): in TEST the bottoms are trimmed *in place* (bw_layer_in /
fl_layer_in), the weights (and bias) are trimmed into a copy with ``rounding_scheme`` (in TRAIN
with STOCHASTIC, whatever the scheme), the float layer runs on the copy, and in TEST the tops
are trimmed (bw_layer_out / fl_layer_out). Backward: the float layer's, with the trimmed copy
as the weights (bottom gradients) while the gradients go to the full-precision blobs
(straight through). Stochastic draws come from caffepy's random stream (``random_seed``).

``LRNRistretto`` has only a GPU implementation in the fork (its Forward_cpu is LOG(FATAL)),
ACROSS_CHANNELS only, MINIFLOAT only: its lrn_ristretto_layer.cu LRNFillScaleQ trims every
intermediate (each input, each square, the running sum after each add and subtract, alpha/n
times it, k plus that) and LRNComputeOutputQ trims x, scale^-beta and their product -- with the
device trim: NEAREST as rint (halves to even), whatever ``rounding_scheme``, no early return.
Its backward is Caffe's LRN backward on the trimmed scale and top, the untrimmed bottom.
"""
import numpy as np

from ...layers.base import register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.deconv import DeconvolutionLayer
from ...layers.inner_product import InnerProductLayer
from ...layers.lrn import LRNLayer, _across_backward

DYNAMIC_FIXED_POINT, MINIFLOAT, INTEGER_POWER_OF_2_WEIGHTS = 0, 1, 2
NEAREST, STOCHASTIC = 0, 1
_PRECISIONS = ("DYNAMIC_FIXED_POINT", "MINIFLOAT", "INTEGER_POWER_OF_2_WEIGHTS")


def _std_min(a, b):
    return np.where(b < a, b, a)          # std::min(a, b): a unless b < a (a NaN stays)


def _std_max(a, b):
    return np.where(a < b, b, a)


def _round_away(x):
    return np.where(x < 0, -np.floor(-x + 0.5), np.floor(x + 0.5))


def _round(x, rounding, rng):
    if rounding == NEAREST:
        return _round_away(x)
    if rounding == STOCHASTIC:
        return np.floor(x + rng.random(x.shape))
    return x


def trim_fixed_point(x, bit_width, fl, rounding, rng=None):
    """Trim2FixedPoint_cpu on a copy of ``x``."""
    dt = x.dtype.type
    step = 2.0 ** -fl
    hi = dt((2.0 ** (bit_width - 1) - 1) * step)
    lo = dt(-(2.0 ** (bit_width - 1)) * step)
    v = _std_max(_std_min(x, hi), lo).astype(x.dtype)
    v = (v.astype(np.float64) / step).astype(x.dtype)
    v = _round(v.astype(np.float64), rounding, rng).astype(x.dtype)
    return (v.astype(np.float64) * step).astype(x.dtype)


def _float_parts(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return bits >> 31, (bits >> 23) & 0xFF, (bits & 0x7FFFFF).astype(np.float64)


def trim_minifloat(x, mant_bits, exp_bits, rounding, rng=None, device=False):
    """Trim2MiniFloat_cpu on a copy of ``x`` (with ``device``, Trim2MiniFloat_device: rint for
    NEAREST and no stop at the first zero / underflow)."""
    flat = x.reshape(-1)
    out = flat.copy()
    bias = int(2 ** (exp_bits - 1) - 1)
    sign, biased, mant = _float_parts(flat)
    exponent = biased.astype(np.int64) - 127 + bias
    zero = (biased == 0) | (exponent < 0)
    stop = len(flat)
    if not device and zero.any():
        stop = int(np.argmax(zero))
        out[stop] = 0
    idx = np.arange(stop)
    live = idx[~zero[:stop]]
    e, m = exponent[live], mant[live]
    sat = e > 2 ** exp_bits - 1
    e = np.where(sat, 2 ** exp_bits - 1, e)
    tmp = m[~sat] / 2.0 ** (23 - mant_bits)
    if rounding == NEAREST:
        tmp = np.rint(tmp) if device else _round_away(tmp)
    elif rounding == STOCHASTIC:
        tmp = np.floor(tmp + rng.random(tmp.shape))
    m = m.copy()
    m[sat] = 2 ** mant_bits - 1
    m[~sat] = tmp
    scale = 2.0 ** mant_bits
    with np.errstate(over="ignore"):
        val = np.where(sign[live] == 1, -1.0, 1.0) * ((m + scale) / scale) * \
            np.power(2.0, (e - bias).astype(np.float64))
        out[live] = val.astype(x.dtype)
    if device:
        out[zero] = 0
    return out.reshape(x.shape)


def trim_power_of_2(x, min_exp, max_exp, rounding, rng=None):
    """Trim2IntegerPowerOf2_cpu on a copy of ``x``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log2(np.abs(x.astype(np.float32)))
    sign = np.where(x >= 0, 1.0, -1.0)
    if rounding == NEAREST:
        e = _round_away(e.astype(np.float64)).astype(np.float32)
    elif rounding == STOCHASTIC:
        e = np.floor((e + rng.random(e.shape)).astype(np.float32))     # floorf(float(e + u))
    e = _std_max(_std_min(e, np.float32(max_exp)), np.float32(min_exp))
    return (sign * np.power(2.0, e.astype(np.float64))).astype(x.dtype)


def _last(values, default):
    return int(values[-1]) if len(values) else default


class _Ristretto(object):
    """The quantization settings of base_ristretto_layer.hpp and its three trims."""

    def _read_quantization(self, only_minifloat=False):
        p = self.layer_param.quantization_param
        self.precision, self.rounding = int(p.precision), int(p.rounding_scheme)
        if self.precision not in (0, 1, 2):
            raise self.error("unknown quantization_param.precision %d" % self.precision)
        if only_minifloat and self.precision != MINIFLOAT:
            raise self.error("%s only supports quantization_param.precision MINIFLOAT, got %s"
                             % (self.layer_param.type, _PRECISIONS[self.precision]))
        self.bw_in, self.bw_out, self.bw_params = p.bw_layer_in, p.bw_layer_out, p.bw_params
        self.fl_in, self.fl_out = _last(p.fl_layer_in, 16), _last(p.fl_layer_out, 16)
        self.fl_params = _last(p.fl_params, 16)
        self.mant, self.exp = p.mant_bits, p.exp_bits
        self.exp_min, self.exp_max = p.exp_min, p.exp_max

    def _trim_activations(self, x, bits, fl):
        if self.precision == DYNAMIC_FIXED_POINT:
            return trim_fixed_point(x, bits, fl, self.rounding, self.rng())
        if self.precision == MINIFLOAT:
            return trim_minifloat(x, self.mant, self.exp, self.rounding, self.rng())
        return x

    def _trimmed_params(self, rounding):
        rng = self.rng()
        out = [b.data.copy() for b in self.blobs]
        bias = getattr(self, "bias_term", False)
        if self.precision == INTEGER_POWER_OF_2_WEIGHTS:
            out[0] = trim_power_of_2(out[0], self.exp_min, self.exp_max, rounding, rng)
            return out
        for i in range(2 if bias else 1):
            if self.precision == MINIFLOAT:
                out[i] = trim_minifloat(out[i], self.mant, self.exp, rounding, rng)
            else:
                out[i] = trim_fixed_point(out[i], self.bw_params, self.fl_params, rounding, rng)
        return out

    def _with_params(self, params, run, *args):
        saved = [b.data.copy() for b in self.blobs]
        for b, q in zip(self.blobs, params):
            b.data[...] = q
        try:
            run(*args)
        finally:
            for b, s in zip(self.blobs, saved):
                b.data[...] = s

    def _is_test(self):
        return self.phase == self._caffe_pb2.TEST

    def _quantized_forward(self, bottom, top, run):
        test = self._is_test()
        if test:
            for b in bottom:
                b.data[...] = self._trim_activations(b.data, self.bw_in, self.fl_in)
        self.trimmed = self._trimmed_params(self.rounding if test else STOCHASTIC)
        self._with_params(self.trimmed, run, bottom, top)
        if test:
            for t in top:
                t.data[...] = self._trim_activations(t.data, self.bw_out, self.fl_out)

    def _quantized_backward(self, top, propagate_down, bottom, run):
        self._with_params(self.trimmed, run, top, propagate_down, bottom)


class _RistrettoWeighted(_Ristretto):
    """The weighted layers' shared steps: the parent layer's setup, then ``quantization_param``;
    forward and backward through the parent's on trimmed values (module docstring). Listed
    before the parent class, so ``super()`` is the parent layer."""

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self._read_quantization()

    def forward_cpu(self, bottom, top):
        self._quantized_forward(bottom, top, super().forward_cpu)

    def backward_cpu(self, top, propagate_down, bottom):
        self._quantized_backward(top, propagate_down, bottom, super().backward_cpu)


@register_layer("ConvolutionRistretto")
class ConvolutionRistrettoLayer(_RistrettoWeighted, ConvolutionLayer):
    """conv_ristretto_layer.cpp: Convolution on trimmed weights / activations (module docstring).
    ``convolution_param`` as Convolution's, plus ``quantization_param``."""


@register_layer("DeconvolutionRistretto")
class DeconvolutionRistrettoLayer(_RistrettoWeighted, DeconvolutionLayer):
    """deconv_ristretto_layer.cpp: Deconvolution on trimmed weights / activations (module
    docstring). ``convolution_param`` as Deconvolution's, plus ``quantization_param``."""


@register_layer("FcRistretto")
class FcRistrettoLayer(_RistrettoWeighted, InnerProductLayer):
    """fc_ristretto_layer.cpp: InnerProduct on trimmed weights / activations (module
    docstring). ``inner_product_param`` as InnerProduct's, plus ``quantization_param``."""


@register_layer("LRNRistretto")
class LRNRistrettoLayer(_Ristretto, LRNLayer):
    """lrn_ristretto_layer.cu: ACROSS_CHANNELS LRN with every intermediate trimmed to minifloat
    (module docstring), in TRAIN and TEST alike. ``lrn_param`` as LRN's, plus
    ``quantization_param { precision: MINIFLOAT mant_bits exp_bits }``."""

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self._read_quantization(only_minifloat=True)
        if not self.across:
            raise self.error("LRNRistretto supports only norm_region ACROSS_CHANNELS (the fork's "
                             "WITHIN_CHANNEL forward is LOG(FATAL))")

    def _fp(self, v):
        return trim_minifloat(np.asarray(v, self.dtype), self.mant, self.exp, NEAREST,
                              device=True)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        dt = x.dtype.type
        fp = self._fp
        c, size = x.shape[1], self.size
        pre = (size - 1) // 2
        post = size - pre - 1
        a_over_n, k = dt(self.alpha) / dt(size), dt(self.k)
        scale = np.empty_like(x)
        acc = np.zeros_like(x[:, 0])

        def sq(ch):
            q = fp(x[:, ch])
            return fp(q * q)

        for head in range(c + post):
            if head < c:
                acc = fp(acc + sq(head))
            if head >= post:
                if head - size >= 0:
                    acc = fp(acc - sq(head - size))
                scale[:, head - post] = fp(k + fp(acc * a_over_n))
        self.scale, self.powed = scale, None
        top[0].data[...] = fp(fp(x) * fp(np.power(scale, dt(-self.beta))))

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x, y, dy = bottom[0].data, top[0].data, top[0].diff
        dt = x.dtype.type
        powed = np.power(self.scale, dt(-self.beta))
        bottom[0].diff[...] = _across_backward(
            x, y, dy, self.scale, powed, self.size, dt(2 * self.alpha * self.beta / self.size))
