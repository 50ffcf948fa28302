import math
import struct

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.misc import ristretto as rs
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step


class _FixedU(object):
    """An rng whose uniforms are a fixed sequence (so the loops below can draw the same)."""

    def __init__(self, seq):
        self.seq, self.i = list(seq), 0

    def random(self, shape):
        n = int(np.prod(shape))
        out = np.array(self.seq[self.i:self.i + n])
        self.i += n
        return out.reshape(shape)


def _cround(v):                      # std::round: halves away from zero
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def _loop_fixed(data, bw, rounding, fl, us):
    data, us = [float(np.float32(v)) for v in data], list(us)
    for i in range(len(data)):
        hi = float(np.float32((2 ** (bw - 1) - 1) * 2.0 ** -fl))
        lo = float(np.float32(-2 ** (bw - 1) * 2.0 ** -fl))
        v = max(min(data[i], hi), lo) / 2.0 ** -fl
        v = _cround(v) if rounding == rs.NEAREST else math.floor(v + us.pop(0))
        data[i] = float(np.float32(v * 2.0 ** -fl))
    return data


def _loop_minifloat(data, mant_bits, exp_bits, rounding, us, device=False):
    data, us = [float(np.float32(v)) for v in data], list(us)
    for i in range(len(data)):
        bias = 2 ** (exp_bits - 1) - 1
        bits = struct.unpack("<I", struct.pack("<f", data[i]))[0]
        sign, e_in, mant = bits >> 31, (bits >> 23) & 0xFF, float(bits & 0x7FFFFF)
        exponent = e_in - 127 + bias
        if e_in == 0 or exponent < 0:
            data[i] = 0.0
            if device:
                continue
            return data
        if exponent > 2 ** exp_bits - 1:
            exponent, mant = 2 ** exp_bits - 1, 2 ** mant_bits - 1
        else:
            tmp = mant / 2.0 ** (23 - mant_bits)
            if rounding == rs.NEAREST:
                mant = float(np.rint(tmp)) if device else _cround(tmp)
            else:
                mant = math.floor(tmp + us.pop(0))
        data[i] = float(np.float32((-1) ** sign * ((mant + 2 ** mant_bits) / 2 ** mant_bits)
                                   * 2.0 ** (exponent - bias)))
    return data


def _loop_pow2(data, min_exp, max_exp, rounding, us):
    data, us = [float(np.float32(v)) for v in data], list(us)
    for i in range(len(data)):
        e = float(np.log2(np.float32(abs(data[i])))) if data[i] != 0 else -math.inf
        sign = 1 if data[i] >= 0 else -1
        if rounding == rs.NEAREST:
            e = _cround(e) if math.isfinite(e) else e
        else:
            e = math.floor(float(np.float32(e + us.pop(0))))
        e = max(min(e, max_exp), min_exp)
        data[i] = float(np.float32(sign * 2.0 ** e))
    return data


X = np.array([0.3, -1.26, 7.9, -9.0, 0.0625, -0.1875, 2.5e-3, 123.0, -0.5, 1e-30],
             dtype=np.float32)
U = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.6, 0.4, 0.8, 0.05, 0.95, 0.15]


@pytest.mark.parametrize("bw,fl", [(8, 3), (4, 1), (16, 10), (8, -2)])
def test_fixed_point_is_the_fork_loop(bw, fl):
    np.testing.assert_array_equal(rs.trim_fixed_point(X, bw, fl, rs.NEAREST),
                                  _loop_fixed(X, bw, rs.NEAREST, fl, []))
    np.testing.assert_array_equal(rs.trim_fixed_point(X, bw, fl, rs.STOCHASTIC, _FixedU(U)),
                                  _loop_fixed(X, bw, rs.STOCHASTIC, fl, U))
    # 8 bits, fl 3: range [-16, 15.875], step 1/8, halves away from zero
    got = rs.trim_fixed_point(np.array([0.0625, -0.0625, 20.0, -20.0]), 8, 3, rs.NEAREST)
    np.testing.assert_array_equal(got, [0.125, -0.125, 15.875, -16.0])


@pytest.mark.parametrize("m,e", [(3, 4), (10, 5), (23, 8), (2, 3)])
def test_minifloat_is_the_fork_loop_with_its_early_return(m, e):
    no_zero = X[:-1]
    for rnd in (rs.NEAREST, rs.STOCHASTIC):
        np.testing.assert_array_equal(rs.trim_minifloat(no_zero, m, e, rnd, _FixedU(U)),
                                      _loop_minifloat(no_zero, m, e, rnd, U))
        np.testing.assert_array_equal(rs.trim_minifloat(X, m, e, rnd, _FixedU(U), device=True),
                                      _loop_minifloat(X, m, e, rnd, U, device=True))
    # the CPU loop stops at a zero (or underflowing) element: the rest is left as it was
    x = np.array([0.3, 0.0, 0.3, 1.7], dtype=np.float32)
    got = rs.trim_minifloat(x, 2, 3, rs.NEAREST)
    np.testing.assert_array_equal(got, _loop_minifloat(x, 2, 3, rs.NEAREST, []))
    assert got[1] == 0 and got[2] == np.float32(0.3) and got[3] == np.float32(1.7)
    assert got[0] != np.float32(0.3)


def test_power_of_two_is_the_fork_loop():
    for rnd in (rs.NEAREST, rs.STOCHASTIC):
        np.testing.assert_array_equal(rs.trim_power_of_2(X, -8, -1, rnd, _FixedU(U)),
                                      _loop_pow2(X, -8, -1, rnd, U))
    np.testing.assert_array_equal(rs.trim_power_of_2(np.array([0.0, -0.3, 5.0]), -4, 1,
                                                     rs.NEAREST), [2 ** -4, -0.25, 2.0])


CONV = ('type: "ConvolutionRistretto" convolution_param { num_output: 3 kernel_size: 3 pad: 1 '
        'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } '
        'quantization_param { %s }')
DFP = 'bw_layer_in: 8 fl_layer_in: 4 bw_layer_out: 8 fl_layer_out: 3 bw_params: 6 fl_params: 4'


def _plain_conv(x, weights):
    plain = make_layer('type: "Convolution" convolution_param { num_output: 3 kernel_size: 3 '
                       'pad: 1 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    plain.setup(bottom, top)
    for b, w in zip(plain.blobs, weights):
        b.data[...] = w
    plain.forward(bottom, top)
    return plain, bottom, top


def test_conv_test_phase_trims_inputs_weights_outputs():
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 4))
    layer = make_layer(CONV % DFP)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    xq = rs.trim_fixed_point(x, 8, 4, rs.NEAREST)
    np.testing.assert_array_equal(bottom[0].data, xq)            # trimmed in place
    wq = [rs.trim_fixed_point(b.data, 6, 4, rs.NEAREST) for b in layer.blobs]
    _, _, ptop = _plain_conv(xq, wq)
    np.testing.assert_array_equal(top[0].data, rs.trim_fixed_point(ptop[0].data, 8, 3,
                                                                   rs.NEAREST))
    # backward: bottom gradient through the trimmed weights, weight gradient into the floats
    top[0].diff[...] = np.random.default_rng(1).standard_normal(top[0].shape)
    for b in layer.blobs:
        b.diff[...] = 0
    float_w = [b.data.copy() for b in layer.blobs]
    layer.backward(top, [True], bottom)
    plain, pb, pt = _plain_conv(xq, wq)
    pt[0].diff[...] = top[0].diff
    plain.backward(pt, [True], pb)
    np.testing.assert_allclose(bottom[0].diff, pb[0].diff, rtol=1e-12)
    for b, p, w in zip(layer.blobs, plain.blobs, float_w):
        np.testing.assert_allclose(b.diff, p.diff, rtol=1e-12)
        np.testing.assert_array_equal(b.data, w)


def test_conv_train_phase_rounds_weights_stochastically_only():
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4))
    layer = make_layer(CONV % DFP, phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    np.testing.assert_array_equal(bottom[0].data, x)             # inputs untouched in TRAIN
    for q, b in zip(layer.trimmed, layer.blobs):
        assert np.all(np.abs(q - b.data) < 2.0 ** -4)               # floor(x 16 + u) / 16
        np.testing.assert_array_equal(q * 16, np.round(q * 16))
    _, _, ptop = _plain_conv(x, layer.trimmed)
    np.testing.assert_allclose(top[0].data, ptop[0].data, rtol=1e-12)   # outputs untrimmed


HIGH = 'bw_layer_in: 32 fl_layer_in: 20 bw_layer_out: 32 fl_layer_out: 20 bw_params: 32 ' \
       'fl_params: 20'


@pytest.mark.parametrize("phase", [caffe_pb2.TEST, caffe_pb2.TRAIN])
@pytest.mark.parametrize("text", [
    CONV % HIGH,
    CONV.replace("ConvolutionRistretto", "DeconvolutionRistretto") % HIGH,
    'type: "FcRistretto" inner_product_param { num_output: 4 weight_filler { type: "gaussian" '
    'std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } quantization_param { %s }' % HIGH,
    CONV % 'precision: MINIFLOAT mant_bits: 23 exp_bits: 8',
])
def test_gradients_at_high_precision(text, phase):
    x = np.random.default_rng(2).uniform(0.2, 1.0, (2, 2, 3, 3))   # no zero for the minifloat
    check_layer_gradient(make_layer(text, phase=phase), make_blobs([x]), make_blobs(1),
                         stepsize=1e-2, threshold=1e-3)


def test_power_of_two_weights_leave_bias_and_activations():
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4))
    layer = make_layer(CONV % 'precision: INTEGER_POWER_OF_2_WEIGHTS exp_min: -3 exp_max: 0')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    np.testing.assert_array_equal(bottom[0].data, x)
    np.testing.assert_array_equal(layer.trimmed[1], layer.blobs[1].data)
    np.testing.assert_array_equal(layer.trimmed[0],
                                  rs.trim_power_of_2(layer.blobs[0].data, -3, 0, rs.NEAREST))
    _, _, ptop = _plain_conv(x, layer.trimmed)
    np.testing.assert_allclose(top[0].data, ptop[0].data, rtol=1e-12)


LRN = ('type: "LRNRistretto" lrn_param { local_size: %d alpha: 0.7 beta: 0.75 k: 2 } '
       'quantization_param { precision: MINIFLOAT mant_bits: %d exp_bits: %d }')


def _loop_lrn(x, size, alpha, beta, k, m, e):
    """LRNFillScaleQ and LRNComputeOutputQ, one pixel at a time."""
    def fp(v):
        return _loop_minifloat([v], m, e, rs.NEAREST, [], device=True)[0]
    n, c, h, w = x.shape
    out = np.empty_like(x)
    pre = (size - 1) // 2
    post = size - pre - 1
    for i in range(n):
        for yy in range(h):
            for xx in range(w):
                col, scale, acc, head = x[i, :, yy, xx], [0.0] * c, 0.0, 0
                while head < post and head < c:
                    q = fp(col[head])
                    acc = fp(acc + fp(q * q))
                    head += 1
                while head < c + post:
                    if head < c:
                        q = fp(col[head])
                        acc = fp(acc + fp(q * q))
                    if head - size >= 0:
                        q = fp(col[head - size])
                        acc = fp(acc - fp(q * q))
                    scale[head - post] = fp(k + fp(acc * alpha / size))
                    head += 1
                for ch in range(c):
                    out[i, ch, yy, xx] = fp(fp(col[ch]) * fp(scale[ch] ** -beta))
    return out


@pytest.mark.parametrize("size,m,e", [(3, 4, 5), (5, 7, 4)])
def test_lrn_is_the_fork_kernel(size, m, e):
    x = np.random.default_rng(3).standard_normal((2, 6, 2, 3)).astype(np.float32)
    (y,) = run_layer(make_layer(LRN % (size, m, e), dtype=np.float32),
                     make_blobs([x], np.float32), make_blobs(1, np.float32))
    np.testing.assert_allclose(y, _loop_lrn(x, size, 0.7, 0.75, 2.0, m, e), rtol=1e-6)


def test_lrn_gradient_at_full_float_precision():
    x = np.random.default_rng(4).standard_normal((2, 5, 2, 2))
    check_layer_gradient(make_layer(LRN % (3, 23, 8)), make_blobs([x]), make_blobs(1),
                         stepsize=1e-2, threshold=1e-3)


def test_lrn_rejects_what_the_fork_rejects():
    with pytest.raises(CaffeError, match="MINIFLOAT"):
        make_layer('type: "LRNRistretto" lrn_param { local_size: 3 }').setup(
            make_blobs([np.ones((1, 3, 2, 2))]), make_blobs(1))
    with pytest.raises(CaffeError, match="ACROSS_CHANNELS"):
        make_layer('type: "LRNRistretto" lrn_param { local_size: 3 norm_region: WITHIN_CHANNEL }'
                   ' quantization_param { precision: MINIFLOAT }').setup(
            make_blobs([np.ones((1, 3, 2, 2))]), make_blobs(1))


NET = '''name: "r" layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 } } }
layer { name: "c1" type: "ConvolutionRistretto" bottom: "data" top: "c1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } }
  quantization_param { bw_layer_in: 8 bw_layer_out: 8 bw_params: 8 fl_layer_in: 5
    fl_layer_out: 4 fl_params: 7 rounding_scheme: STOCHASTIC } }
layer { name: "n1" type: "LRNRistretto" bottom: "c1" top: "n1" lrn_param { local_size: 3 }
  quantization_param { precision: MINIFLOAT mant_bits: 10 exp_bits: 5 } }
layer { name: "d1" type: "DeconvolutionRistretto" bottom: "n1" top: "d1"
  convolution_param { num_output: 2 kernel_size: 2 stride: 2 weight_filler { type: "xavier" } }
  quantization_param { precision: INTEGER_POWER_OF_2_WEIGHTS exp_min: -6 exp_max: 0 } }
layer { name: "fc" type: "FcRistretto" bottom: "d1" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } }
  quantization_param { precision: MINIFLOAT mant_bits: 4 exp_bits: 5 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
'''


def test_a_ristretto_net_runs_and_trains():
    net = forward(NET)
    assert net.blobs["fc"].shape == (1, 10)
    train_step(NET)


def test_summary_strict_builds_the_net(tmp_path):
    from caffepy.cli import main
    path = tmp_path / "r.prototxt"
    path.write_text(NET)
    assert main(["summary", "--strict", str(path)]) in (0, None)


def test_other_forks_quantization_fields_stay_refused():
    from caffepy.errors import ProtoError
    from caffepy.proto import io as proto_io
    proto_io.read_net(NET)
    with pytest.raises(ProtoError, match="FLOOR.*IVS-Caffe"):
        proto_io.read_net(NET.replace("rounding_scheme: STOCHASTIC", "rounding_scheme: FLOOR"))
    with pytest.raises(ProtoError, match="bw_add"):
        proto_io.read_net(NET.replace("exp_min: -6", "exp_min: -6 bw_add: 8"))
