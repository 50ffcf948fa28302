"""The fixed-point layers of Xilinx's quantizer Caffe (caffe-xilinx: DECENT / vai_q_caffe, in
Xilinx/Vitis-AI models/AI-Model-Zoo/caffe-xilinx, read at 7ff4060): ``FixedNeuron`` (activations
rounded to ``bit_width``-bit fixed point), ``ConvolutionFixed``, ``ScaleFixed`` and
``NormalizeFixed`` (the float layers run with their parameters rounded the same way).

A value x at decimal position p becomes clamp(round(x 2^p) 2^-p, -2^(b-1) 2^-p, (2^(b-1) - 1)
2^-p) (src/caffe/util/quantize.cpp). The position comes from the data:

* OVER_FLOW: floor(log2(1 / step)), step = max(min(x) / (-2^(b-1) - 0.5), max(x) / (2^(b-1) - 0.5))
  -- the largest position at which nothing overflows;
* DIFF_S: of the positions P0 .. P0 + 4 (P0 the OVER_FLOW one, floored), the first with the
  least sum of squared rounding errors;
* DIFF_S_SIGMOID (FixedNeuron only): the same over P0 .. P0 + 9 on sigmoid(x) against
  sigmoid(rounded x).

An all-zero input gives position SHRT_MAX (32767; its step 2^-32767 is 0 in floating point and
every value rounds to 0), a NaN step SHRT_MIN. The fork's layers read ``fixed_param { enable:
true fixed_method: OVER_FLOW bit_width: 8 follow_data_layer: false }``; ``moving_average_fraction``
and ``fix_info`` are read by none of them (FixedNeuron's reading of the first is commented out).
``Layer::iter()`` is the solver's iteration when the net has a solver, else 0
(include/caffe/layer.hpp); here the solver's ``set_iter`` hook sets it for the training net's
layers, and a test net's layers see 0. ``Layer::pos_converge()`` is always true there (nothing
sets it).
"""
import numpy as np

from ...layers.base import NeuronLayer, register_layer
from ...layers.conv import ConvolutionLayer
from ...layers.normalization import NormalizeLayer
from ...layers.scale import ScaleLayer

SHRT_MAX, SHRT_MIN = 32767, -32768
OVER_FLOW, DIFF_S, DIFF_A, DIFF_S_SIGMOID = 0, 1, 2, 3


def _step(dtype, p):
    with np.errstate(over="ignore", under="ignore"):
        return np.power(dtype.type(2), dtype.type(-p))


def fix(x, bits, p, dpu_rounding=False):
    """caffe_cpu_fix (round half away from zero) or, with ``dpu_rounding``, caffe_cpu_top_fix
    (halves of negative values round up: the DPU's rounding); then clamp to the b-bit range.
    NaNs (a zero step) clamp to the lower bound, as fmin / fmax ignore them."""
    x = np.asarray(x)
    step = _step(x.dtype, p)
    lb = -np.power(x.dtype.type(2), bits - 1) * step
    ub = np.power(x.dtype.type(2), bits - 1) * step - step
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = x / step
        r = np.where(t < 0, -np.floor(-t + 0.5), np.floor(t + 0.5))   # std::round
        if dpu_rounding:
            r = np.where((t < 0) & (t - np.floor(t) == 0.5), np.ceil(t), r)
        return np.fmin(np.fmax(r * step, lb), ub).astype(x.dtype)


def trunc(x, p):
    """caffe_cpu_trunc: (int)(x / 2^-p) 2^-p (towards zero; no clamp)."""
    step = _step(x.dtype, p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (np.trunc(x / step) * step).astype(x.dtype)


def _max_step(x, bits):
    lo, hi = -2.0 ** (bits - 1) - 0.5, 2.0 ** (bits - 1) - 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        return max(x.min() / x.dtype.type(lo), x.max() / x.dtype.type(hi))


def pos_overflow(x, bits):
    """caffe_cpu_fix_pos_overflow, floored as every caller does."""
    step = _max_step(x, bits)
    if step == 0:
        return SHRT_MAX
    if np.isnan(step):
        return SHRT_MIN
    with np.errstate(divide="ignore"):
        return int(np.floor(np.log2(x.dtype.type(1) / step)))


def pos_diffs(x, bits, search=5, sigmoid=False):
    """caffe_cpu_fix_pos_diffs (``sigmoid``: caffe_cpu_fix_pos_diffs_sigmoid, whose zero step
    starts the search at 0 instead of returning SHRT_MAX)."""
    step = _max_step(x, bits)
    if step == 0:
        if not sigmoid:
            return SHRT_MAX
        start = 0
    elif np.isnan(step) and not sigmoid:
        return SHRT_MIN
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            start = int(np.floor(np.log2(x.dtype.type(1) / step)))
    ref = 1.0 / (1.0 + np.exp(-x)) if sigmoid else x
    best, best_err = start, np.float32(np.finfo(np.float32).max)
    for p in range(start, start + search):
        q = fix(x, bits, p)
        err = np.sum(np.abs(np.square(ref - (1.0 / (1.0 + np.exp(-q)) if sigmoid else q))))
        if err < best_err:
            best, best_err = p, err
    return best


def _param_pos(layer, data):
    if layer.method == OVER_FLOW:
        return pos_overflow(data, layer.bits)
    if layer.method == DIFF_S:
        return pos_diffs(data, layer.bits)
    raise layer.error("fixed_method %d is not one the fork's %s takes (OVER_FLOW, DIFF_S)"
                      % (layer.method, layer.layer_param.type))


def _read_fixed(layer):
    p = layer.layer_param.fixed_param
    layer.enable, layer.method, layer.bits = bool(p.enable), int(p.fixed_method), int(p.bit_width)
    layer.follow_data = bool(p.follow_data_layer)
    if layer.bits <= 0:
        raise layer.error("fixed_param.bit_width must be positive")
    layer.iteration = 0


class _FixedParams(object):
    """Runs the float layer's forward with its parameter blobs replaced by their fixed-point
    values (computed by :meth:`quantized`), then puts the float values back: the backward of
    the float layer then uses the float parameters, as the fork's Backward_cpu does."""

    def set_iter(self, iteration, stop_iter=None):
        self.iteration = int(iteration)

    def _run_fixed(self, fixed, bottom, top, run):
        saved = [b.data.copy() for b in self.blobs[:len(fixed)]]
        for b, q in zip(self.blobs, fixed):
            b.data[...] = q
        try:
            run(bottom, top)
        finally:
            for b, s in zip(self.blobs, saved):
                b.data[...] = s

    def quantized(self):
        self.positions = [_param_pos(self, b.data) for b in self.blobs[:self.n_fixed]]
        return [fix(b.data, self.bits, p) for b, p in zip(self.blobs, self.positions)]


@register_layer("FixedNeuron")
class FixedNeuronLayer(NeuronLayer):
    """src/caffe/layers/fixed_neuron_layer.cpp: y = the input in ``bit_width``-bit fixed point;
    dL/dx = dL/dy (straight through). Param: the decimal position (1,), saved with the model
    (the ``param { lr_mult: 0 }`` of the fork's nets), never learned.

    TEST: p = floor(saved position); y = DPU-rounded fix(x, p), or with ``follow_data_layer``
    trunc(x, p) (no clamp). TRAIN: the position of this batch (OVER_FLOW; DIFF_S and DIFF_A both
    the DIFF_S search; DIFF_S_SIGMOID); the saved position becomes it at iteration
    0 and, later, the most frequent one seen so far (the smallest on a tie). OVER_FLOW rounds with
    this batch's position, the DIFF methods with the saved one; DPU rounding, or with
    ``follow_data_layer`` the plain fix. ``enable: false`` copies the input.
    """

    def layer_setup(self, bottom, top):
        _read_fixed(self)
        if not self.blobs:
            self.blobs = [self.new_blob((1,))]
        self.param_propagate_down = [False]
        self.histogram = {}

    def set_iter(self, iteration, stop_iter=None):
        self.iteration = int(iteration)

    def _batch_position(self, x):
        if self.method == OVER_FLOW:
            return pos_overflow(x, self.bits)
        if self.method in (DIFF_S, DIFF_A):
            return pos_diffs(x, self.bits)
        if self.method == DIFF_S_SIGMOID:
            return pos_diffs(x, self.bits, search=10, sigmoid=True)
        raise self.error("unknown fixed_method %d" % self.method)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if not self.enable:
            top[0].data[...] = x
            return
        if self.phase == self._caffe_pb2.TRAIN:
            pos = self._batch_position(x)
            self.histogram[pos] = self.histogram.get(pos, 0) + 1
            saved = pos
            if self.iteration != 0:         # the mode so far; the smallest position on a tie
                top_count = max(self.histogram.values())
                saved = min(k for k, v in self.histogram.items() if v == top_count)
            self.blobs[0].data[...] = saved
            use = pos if self.method == OVER_FLOW else saved
            top[0].data[...] = fix(x, self.bits, use, dpu_rounding=not self.follow_data)
            return
        p = int(np.floor(self.blobs[0].data.reshape(-1)[0]))
        if self.follow_data:
            top[0].data[...] = trunc(x, p)
        else:
            top[0].data[...] = fix(x, self.bits, p, dpu_rounding=True)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0] and top[0] is not bottom[0]:
            bottom[0].diff[...] = top[0].diff


@register_layer("ConvolutionFixed")
class ConvolutionFixedLayer(_FixedParams, ConvolutionLayer):
    """src/caffe/layers/conv_fixed_layer.cpp: Convolution with its weight and bias each in
    fixed point at its own position (OVER_FLOW or DIFF_S over 5 positions, from the float
    values), recomputed after every backward and at iteration 0. A weight position above 12
    runs the convolution on weights and bias scaled by 2^p and the output scaled back by 2^-p
    (2^-32767 = 0: all-zero weights give a zero output, bias included). The backward is
    Convolution's, with the float weights. ``convolution_param`` as Convolution's."""
    n_fixed = 2

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        _read_fixed(self)
        self.fixed = None

    def forward_cpu(self, bottom, top):
        if not self.enable:
            return super().forward_cpu(bottom, top)
        if self.fixed is None or self.iteration == 0:
            self.fixed = self.quantized()
        fixed = [q.copy() for q in self.fixed]
        wpos = self.positions[0]
        if wpos > 12:
            scale = self.dtype.type(1) if wpos == SHRT_MAX else _step(self.dtype, -wpos)
            fixed = [q * scale for q in fixed]
        self._run_fixed(fixed, bottom, top, super().forward_cpu)
        if wpos > 12:
            for t in top:
                t.data[...] = t.data * _step(self.dtype, wpos)

    def backward_cpu(self, top, propagate_down, bottom):
        self.fixed = None
        super().backward_cpu(top, propagate_down, bottom)


class _RecomputedEachTrainForward(_FixedParams):
    def _forward_fixed(self, bottom, top, run):
        if not self.blobs or not self.enable:
            return run(bottom, top)
        if self.phase == self._caffe_pb2.TRAIN or self.iteration == 0 or self.fixed is None:
            self.fixed = self.quantized()
        self._run_fixed(self.fixed, bottom, top, run)


@register_layer("ScaleFixed")
class ScaleFixedLayer(_RecomputedEachTrainForward, ScaleLayer):
    """src/caffe/layers/scale_fixed_layer.cpp: Scale with its scale and bias in fixed point
    (each at its own OVER_FLOW / DIFF_S position), recomputed every TRAIN forward and at
    iteration 0; a scale from a second bottom is not quantized. Backward: Scale's, with the
    float parameters. ``scale_param`` as Scale's."""
    n_fixed = 2

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        _read_fixed(self)
        self.fixed = None

    def forward_cpu(self, bottom, top):
        self._forward_fixed(bottom, top, super().forward_cpu)


@register_layer("NormalizeFixed")
class NormalizeFixedLayer(_RecomputedEachTrainForward, NormalizeLayer):
    """src/caffe/layers/normalize_fixed_layer.cpp: SSD's Normalize with its scale in fixed
    point (OVER_FLOW / DIFF_S position), recomputed every TRAIN forward and at iteration 0.
    Backward: Normalize's, with the float scale. ``norm_param`` as Normalize's."""
    n_fixed = 1

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        _read_fixed(self)
        self.fixed = None

    def forward_cpu(self, bottom, top):
        self._forward_fixed(bottom, top, super().forward_cpu)
