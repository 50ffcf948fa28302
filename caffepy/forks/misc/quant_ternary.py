"""Weight and activation compression of GongCheng1919/Quantitative-and-ternary-caffe-for-network-
compression (commit a529f00a): LayerParameter fields that the fork's Layer class reads for every
layer (include/caffe/layer.hpp: CompressLayerWeights, CompressLayerActivations and the Exchange*
swaps; the formulas in src/caffe/blob.cpp and the CPU kernels of src/caffe/util/
math_functions.cpp). Built here for Convolution, Deconvolution and InnerProduct (weights and
activations) and Data (activations); the fields on another layer type are not computed.

prototxt, in ``layer { }``::

    weights_compress: "Ternary_Quantize"     # one per parameter blob: "" (or none) keeps it
    weights_compress: "Quantize"             #   full precision; Ternary, Ternary_Quantize,
    weights_compress_param { maxbits: 8 }    #   Quantize, ULQ
    activations_compress: "Quantize"         # one per top: Ternary, Ternary_Quantize, Quantize, Clip
    activations_compress_param { maxbits: 8 }

``CompressParameter { delta: 0 alpha: 0 fixedpos: 0 maxbits: 8 }``, one per blob / top; a missing
one is added (defaults). A name the fork does not know leaves the blob in full precision, as there.

Per blob x (k = maxbits, 8 when 0; fp = fixedpos; round = half away from zero; u uniform in
[-1/2, 1/2], a new draw per element and call):

* Ternary: delta = clip(0.7 mean |x|, -100, 100); t = [x > delta] - [x < -delta];
  a = sum(t x) / sum(t^2) (0 when t = 0); x' = a t.
* Ternary_Quantize: as Ternary with a quantized as below (one value): fp = floor(log2 |a|) - (k - 1).
* Quantize: fp = floor(log2 max |x|) - (k - 1) (0 when x = 0); q = round(x / 2^fp + u) with
  q >= 2^k giving 2^k - 1 and q <= -2^k giving 1 - 2^k; x' = q 2^fp.
* ULQ (weights): m, s = mean and std of x; alpha = L[k] s (L the fork's table for k <= 8, else
  6.2 s / (2^k - 1)); q = round(clip((x - m) / alpha + 1/2, 1 - 2^(k-1), 2^(k-1)));
  x' = (q - 1/2) alpha + m.
* Clip (activations): c from weights_compress_param[0] (alpha, times 2^fixedpos when fixedpos is
  set; 2^fixedpos when alpha is 0), else 1; y = x / c; x' = c round(y (2^(k-1) - 1) / max |y|)
  (k: the top's activations_compress_param maxbits; an all-zero top stays zero).

TRAIN: every forward computes the above and writes delta, alpha / 2^fp, fp and k back into the
layer's ``*_compress_param`` (saved with the net). TEST: Ternary / Ternary_Quantize read delta,
alpha and fp from the parameter when its delta is non-zero, Quantize reads fp when non-zero; the
compressed *weights* are those of the TRAIN net's last forward when the TEST net shares its
weights (the fork shares the compressed buffer and copies the TRAIN layer's compress
parameters), else computed once by the TEST rules and kept while the weights stay unchanged.

The layer computes its forward and backward with x' in place of each compressed weight; the
weight gradients (those with respect to x') go to the full-precision weights (straight
through). A compressed top's data becomes x' after the forward (its consumers and its own
backward read x'); its gradient passes unchanged.
"""
import weakref

import numpy as np

from ...layers.base import register_variant
from ...layers.conv import ConvolutionLayer
from ...layers.data import DataLayer
from ...layers.deconv import DeconvolutionLayer
from ...layers.inner_product import InnerProductLayer
from ...proto import caffe_pb2

WEIGHT_METHODS = ("Ternary", "Ternary_Quantize", "Quantize", "ULQ")
ACTIVATION_METHODS = ("Ternary", "Ternary_Quantize", "Quantize", "Clip")
ULQ_LAMBDA = (1.5950161625215948, 0.99529008541347519, 0.5872211503939504, 0.3358904980253396,
              0.18944224088629152, 0.10570877041455067, 0.057082736023857356,
              0.030482181036739827)


def round_away(x):
    return np.where(x > 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def ternary_code(x, delta):
    """(t, a): t in {-1, 0, 1} with threshold delta, a = sum(t x) / sum(t^2), 0 when t is 0."""
    delta = np.asarray(delta, dtype=np.result_type(x, np.float32))
    t = (x > delta).astype(np.float64) - (x < -delta)
    n = float(np.sum(t * t))
    return t, (float(np.sum(t * x)) / n if n else 0.0)


def fixed_point(x, maxbits):
    """floor(log2 max |x|) - (maxbits - 1), or 0 for an all-zero x."""
    m = float(np.max(np.abs(x))) if np.size(x) else 0.0
    return 0 if m == 0 else int(np.floor(np.log2(m))) - (maxbits - 1)


def quantize_code(x, fixedpos, maxbits, noise):
    """The integers q of caffe_cpu_quantizea: round(x / 2^fp + noise), kept within +-(2^k - 1)."""
    top = 2.0 ** maxbits
    q = round_away(np.asarray(x, np.float64) / 2.0 ** fixedpos + noise)
    return np.where(q >= top, top - 1, np.where(q <= -top, 1 - top, q))


def ulq(x, maxbits):
    """(x', mean, alpha) of Blob::ulq_weights and caffe_cpu_ulq."""
    x = np.asarray(x, np.float64)
    mean = float(np.mean(x))
    std = float(np.sqrt(max(np.mean(x * x) - mean * mean, 0.0)))
    lam = 2 * 3.1 * std / (2.0 ** maxbits - 1) if maxbits > 8 else ULQ_LAMBDA[maxbits - 1]
    alpha = np.float64(lam * std)
    lo, hi = 1 - 2.0 ** (maxbits - 1), 2.0 ** (maxbits - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = round_away(np.clip((x - mean) * (1.0 / alpha) + 0.5, lo, hi))
        return (q - 0.5) / (1.0 / alpha) + mean, mean, alpha


def clip_activations(x, scale, maxbits):
    """Blob::clip_activations: round(x / c * (2^(k-1) - 1) / max |x / c|) * c."""
    y = np.asarray(x, np.float64) / scale
    m = float(np.max(np.abs(y)))
    if m == 0:
        return y * scale
    return round_away(y * ((2.0 ** (maxbits - 1) - 1) / m)) * scale


class CompressState(object):
    """A blob's delta_, alpha_, fixedpos_ and maxbits_ in the fork (kept between forwards)."""

    def __init__(self):
        self.delta, self.alpha, self.fixedpos, self.maxbits = 0.0, 0.0, 0, 0

    def write(self, p):
        p.delta = self.delta
        p.alpha = self.alpha / 2.0 ** self.fixedpos
        p.fixedpos = self.fixedpos
        p.maxbits = self.maxbits


def _maxbits(p, layer):
    k = p.maxbits if p.maxbits != 0 else 8
    if k < 0:
        raise layer.error("CompressParameter maxbits must not be negative, got %d" % k)
    return k


def ternarize(x, p, st, train, quantize_alpha, rng, layer):
    """Blob::ternarize_data: x' = alpha t, updating the state ``st``."""
    calc = True
    if not train and p.delta != 0:
        st.delta = float(p.delta)
        if p.alpha != 0:
            st.alpha = float(p.alpha)
        if p.fixedpos != 0:
            st.fixedpos, calc = int(p.fixedpos), False
            st.alpha *= 2.0 ** st.fixedpos
    else:
        st.delta = min(max(0.7 * float(np.sum(np.abs(x), dtype=np.float64)) / x.size, -100), 100)
    st.maxbits = _maxbits(p, layer)
    t, a = ternary_code(x, st.delta)
    if quantize_alpha:
        if calc:
            st.fixedpos = fixed_point(a, st.maxbits)
        a = float(quantize_code(a, st.fixedpos, st.maxbits, rng.uniform(-0.5, 0.5))) \
            * 2.0 ** st.fixedpos
    if train or st.alpha == 0:
        st.alpha = a
    return st.alpha * t


def quantize(x, p, st, train, rng, layer):
    """Blob::quantize_data: x' = q 2^fp with stochastic rounding, updating ``st``."""
    calc = True
    if not train and p.fixedpos != 0:
        st.fixedpos, calc = int(p.fixedpos), False
    st.maxbits = _maxbits(p, layer)
    if calc:
        st.fixedpos = fixed_point(x, st.maxbits)
    noise = rng.uniform(-0.5, 0.5, size=x.shape)
    return quantize_code(x, st.fixedpos, st.maxbits, noise) * 2.0 ** st.fixedpos


def compress(method, x, p, st, train, rng, layer):
    if method in ("Ternary", "Ternary_Quantize"):
        return ternarize(x, p, st, train, method == "Ternary_Quantize", rng, layer)
    if method == "Quantize":
        return quantize(x, p, st, train, rng, layer)
    st.maxbits = _maxbits(p, layer)                     # ULQ
    out, st.delta, st.alpha = ulq(x, st.maxbits)
    return out


def _param(repeated, i):
    """The i-th CompressParameter, adding defaults up to it; and whether it was there."""
    had = i < len(repeated)
    while len(repeated) <= i:
        repeated.add()
    return repeated[i], had


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


#: id(root of a weight array) -> (weak reference to that root, x' of the last TRAIN forward,
#: the TRAIN layer's LayerParameter): what a TEST net sharing the weights reads.
_TRAINED = {}


def _remember(blob, values, layer_param):
    root = _root(blob.data)
    key = id(root)
    _TRAINED[key] = (weakref.ref(root, lambda _r, k=key: _TRAINED.pop(k, None)), values,
                     layer_param)


def _trained(blob):
    root = _root(blob.data)
    entry = _TRAINED.get(id(root))
    if entry is None or entry[0]() is not root or entry[1].size != blob.count:
        return None
    return entry


class _Compressed(object):
    """Forward / backward of the base layer with the fork's compressed weights and tops."""

    def _weight_methods(self):
        names = list(self.layer_param.weights_compress)
        return [names[i] if i < len(names) else "" for i in range(len(self.blobs))]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._weight_states, self._top_states, self._test_weights = {}, {}, {}
        self._swap = {}

    def _compressed_weights(self):
        train = self.phase == caffe_pb2.TRAIN
        lp, states, out = self.layer_param, self._weight_states, {}
        for i, (method, blob) in enumerate(zip(self._weight_methods(), self.blobs)):
            if method not in WEIGHT_METHODS:
                continue
            entry = None if train else _trained(blob)
            if entry is not None:
                self._copy_params(entry[2])
                out[i] = entry[1].reshape(blob.shape)
                continue
            kept = self._test_weights.get(i)
            if not train and kept is not None and np.array_equal(kept[0], blob.data):
                out[i] = kept[1]
                continue
            p, had = _param(lp.weights_compress_param, i)
            st = states.setdefault(i, CompressState())
            values = compress(method, blob.data, p, st, train, self.rng(), self).astype(
                blob.dtype)
            if train or not had:
                st.write(p)
            if train:
                _remember(blob, values, lp)
            else:
                self._test_weights[i] = (blob.data.copy(), values)
            out[i] = values
        return out

    def _copy_params(self, src):
        """Net::ShareTrainedLayersWith of the fork: the TRAIN layer's compress parameters."""
        lp = self.layer_param
        for name, count in (("weights_compress_param", len(lp.weights_compress)),
                            ("activations_compress_param", len(lp.activations_compress))):
            theirs, mine = getattr(src, name), getattr(lp, name)
            for i in range(min(len(theirs), count)):
                _param(mine, i)[0].CopyFrom(theirs[i])

    def _swapped(self, run, *args):
        saved = {i: self.blobs[i].data.copy() for i in self._swap}
        for i, values in self._swap.items():
            self.blobs[i].data[...] = values
        try:
            return run(*args)
        finally:
            for i, values in saved.items():
                self.blobs[i].data[...] = values

    def forward(self, bottom, top):
        self._swap = self._compressed_weights() if self.blobs else {}
        loss = self._swapped(super().forward, bottom, top)
        self._compress_tops(top)
        return loss

    def backward(self, top, propagate_down, bottom):
        self._swapped(super().backward, top, propagate_down, bottom)

    def _compress_tops(self, top):
        train = self.phase == caffe_pb2.TRAIN
        lp, states = self.layer_param, self._top_states
        for i, (method, blob) in enumerate(zip(lp.activations_compress, top)):
            if method not in ACTIVATION_METHODS:
                continue
            p, had = _param(self.layer_param.activations_compress_param, i)
            if method == "Clip":
                blob.data[...] = clip_activations(blob.data, self._clip_scale(), p.maxbits)
                continue
            st = states.setdefault(i, CompressState())
            blob.data[...] = compress(method, blob.data, p, st, train, self.rng(), self)
            if train or not had:
                st.write(p)

    def _clip_scale(self):
        wp = self.layer_param.weights_compress_param
        if not len(wp):
            return 1.0
        scale = float(wp[0].alpha)
        if wp[0].fixedpos != 0:
            s = 2.0 ** wp[0].fixedpos
            scale = s if scale == 0 else scale * s
        return scale


def _compresses(lp):
    return len(lp.weights_compress) > 0 or len(lp.activations_compress) > 0


@register_variant("Convolution", _compresses)
class CompressedConvolutionLayer(_Compressed, ConvolutionLayer):
    """Convolution with the fork's ``weights_compress`` / ``activations_compress`` (module doc)."""


@register_variant("Deconvolution", _compresses)
class CompressedDeconvolutionLayer(_Compressed, DeconvolutionLayer):
    """Deconvolution with ``weights_compress`` / ``activations_compress`` (module doc)."""


@register_variant("InnerProduct", _compresses)
class CompressedInnerProductLayer(_Compressed, InnerProductLayer):
    """InnerProduct with ``weights_compress`` / ``activations_compress`` (module doc)."""


@register_variant("Data", _compresses)
class CompressedDataLayer(_Compressed, DataLayer):
    """Data with ``activations_compress`` on its tops (module doc)."""
