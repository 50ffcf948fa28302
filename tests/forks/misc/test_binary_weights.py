import numpy as np
import pytest

from caffepy import common
from caffepy.forks.misc.binary_weights import binarize
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

CONV = ('type: "BinaryConvolution" convolution_param { num_output: 3 kernel_size: 3 pad: 1 '
        'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } '
        'binary_convolution_param { %s }')
IP = ('type: "BinaryInnerProduct" inner_product_param { num_output: 4 %s '
      'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } '
      'binary_inner_product_param { %s }')


def _loop_binarize(w, use_alpha):
    """The fork's Forward_cpu loops over (num_output, weight_dim)."""
    rows = w.reshape(w.shape[0], -1)
    out = np.empty_like(rows)
    for i in range(rows.shape[0]):
        alpha = sum(abs(v) for v in rows[i]) / rows.shape[1] if use_alpha else 1.0
        for j in range(rows.shape[1]):
            out[i, j] = (1 if rows[i, j] >= 0 else -1) * alpha
    return out.reshape(w.shape)


@pytest.mark.parametrize("use_alpha", [False, True])
def test_binarize_is_the_fork_loop(use_alpha):
    w = np.random.default_rng(0).standard_normal((3, 2, 3, 3))
    w[0, 0, 0, 0] = 0.0                               # >= 0: +1
    np.testing.assert_allclose(binarize(w, use_alpha, True), _loop_binarize(w, use_alpha),
                               rtol=1e-14)
    np.testing.assert_array_equal(binarize(w, use_alpha, False), w)


def _plain(text, x, weights):
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    for b, w in zip(layer.blobs, weights):
        b.data[...] = w
    layer.forward(bottom, top)
    return layer, bottom, top


@pytest.mark.parametrize("text,plain,shape", [
    (CONV % "use_alpha: true", 'type: "Convolution" convolution_param { num_output: 3 '
     'kernel_size: 3 pad: 1 }', (2, 2, 4, 5)),
    (IP % ("transpose: true", "use_alpha: true"), 'type: "InnerProduct" inner_product_param { '
     'num_output: 4 }', (3, 2, 2, 2)),
])
def test_forward_on_binary_weights_and_straight_through_backward(text, plain, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    assert layer.blobs[0].shape[0] == layer.num_output      # transpose is not read
    wb = _loop_binarize(layer.blobs[0].data, True)
    assert_straight_through(layer, bottom, top, plain, x, wb, rng)


def assert_straight_through(layer, bottom, top, plain, x, wq, rng):
    """``layer`` (run on ``bottom``) gives what the float layer ``plain`` gives with the
    quantized weights ``wq``; its backward is that layer's (the bottom's gradient through wq,
    dL/dwq into the float weights, which stay as they were)."""
    ref, rb, rt = _plain(plain, x, [wq, layer.blobs[1].data])
    np.testing.assert_allclose(top[0].data, rt[0].data, rtol=1e-12)
    dy = rng.standard_normal(top[0].shape)
    top[0].diff[...] = rt[0].diff[...] = dy
    for b in layer.blobs + ref.blobs:
        b.diff[...] = 0
    w_float = layer.blobs[0].data.copy()
    layer.backward(top, [True], bottom)
    ref.backward(rt, [True], rb)
    np.testing.assert_allclose(bottom[0].diff, rb[0].diff, rtol=1e-12)
    for b, r in zip(layer.blobs, ref.blobs):
        np.testing.assert_allclose(b.diff, r.diff, rtol=1e-12)
    np.testing.assert_array_equal(layer.blobs[0].data, w_float)


@pytest.mark.parametrize("text", [CONV % "use_binarization: false",
                                  IP % ("", "use_binarization: false")])
def test_gradient_without_binarization(text):
    x = np.random.default_rng(2).standard_normal((2, 2, 3, 3))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


NET = '''name: "b" layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 } } }
layer { name: "c1" type: "BinaryConvolution" bottom: "data" top: "c1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } }
  binary_convolution_param { use_alpha: true } }
layer { name: "t1" type: "Truncation" bottom: "c1" top: "c1"
  truncation_param { lower_bound: -1 upper_bound: 2 } }
layer { name: "s1" type: "SoftTruncation" bottom: "c1" top: "s1" soft_truncation_param { c: 3 } }
layer { name: "c2" type: "BinaryConvolution" bottom: "s1" top: "c2"
  convolution_param { num_output: 4 kernel_size: 3 sq: true ratio: 50
    weight_filler { type: "xavier" } } }
layer { name: "fc" type: "BinaryInnerProduct" bottom: "c2" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } }
  binary_inner_product_param { use_alpha: true } }
layer { name: "fc2" type: "BinaryInnerProduct" bottom: "fc" top: "fc2"
  inner_product_param { num_output: 10 sq: true ratio: 60 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc2" bottom: "label" top: "loss" }
'''


def test_a_binary_net_runs_and_trains(tmp_path):
    net = forward(NET)
    assert net.blobs["fc"].shape == (1, 10)
    train_step(NET)
    from caffepy.cli import main
    path = tmp_path / "b.prototxt"
    path.write_text(NET)
    assert main(["summary", "--strict", str(path)]) in (0, None)


class _FixedU(object):
    def __init__(self, seq):
        self.seq = list(seq)

    def random(self, shape=None):
        return self.seq.pop(0)


def _loop_roulette(norm, real_num, us):
    """The fork's Roulette() loop."""
    is_quant, total = [1] * len(norm), sum(norm)
    for _ in range(real_num):
        p, cur = us.pop(0) * total, 0.0
        for n in range(len(norm)):
            if is_quant[n] == 1:
                if cur <= p < cur + norm[n]:
                    is_quant[n] = 0
                    total -= norm[n]
                    break
                cur += norm[n]
    return is_quant


def test_roulette_is_the_fork_loop():
    from caffepy.forks.misc.binary_weights import roulette
    err = np.array([0.3, 0.0, 0.5, 0.2, 0.4])
    for us in ([0.1, 0.9, 0.5], [0.99, 0.0, 0.3], [0.5, 0.5, 0.5]):
        np.testing.assert_array_equal(roulette(err, 3, _FixedU(us)),
                                      np.array(_loop_roulette(list(err), 3, list(us))) == 1)


SQ_CONV = ('type: "BinaryConvolution" convolution_param { num_output: 6 kernel_size: 2 '
           'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } '
           '%s }')


def test_stochastic_quantization_variant():
    from caffepy.forks.misc.binary_weights import StochasticBinaryConvolutionLayer
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 4))
    # sq unset and ratio 100: every row binarized with its alpha (alpha always, unlike AR-Ped's)
    layer = make_layer(SQ_CONV % "sq: false")
    assert isinstance(layer, StochasticBinaryConvolutionLayer)
    run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(layer.binary, _loop_binarize(layer.blobs[0].data, True),
                               rtol=1e-14)
    # sq with ratio 50: int(0.5 * 6) = 3 rows stay real, picked by the roulette on the errors
    layer = make_layer(SQ_CONV % "sq: true ratio: 50")
    bottom, top = make_blobs([x]), make_blobs(1)
    w, mask = forward_with_roulette(layer, bottom, top, lambda v: _loop_binarize(v, True), 3)
    rows, full = w.reshape(6, -1), _loop_binarize(w, True).reshape(6, -1)
    want = np.where(mask[:, None], full, rows).reshape(w.shape)
    np.testing.assert_allclose(layer.binary, want, rtol=1e-14)
    assert_straight_through(layer, bottom, top, 'type: "Convolution" convolution_param { '
                            'num_output: 6 kernel_size: 2 }', x, want, np.random.default_rng(6))


def forward_with_roulette(layer, bottom, top, quantize, real):
    """Set ``layer`` up and run it forward from random seed 3; return its float weights and the
    rows the fork's Roulette() loop keeps quantized when ``real`` rows go back to full precision,
    drawn from the same stream on the errors of ``quantize`` (each exactly ``real`` false)."""
    layer.setup(bottom, top)
    common.set_random_seed(3)
    layer.forward(bottom, top)
    w = layer.blobs[0].data
    rows, q = w.reshape(w.shape[0], -1), quantize(w).reshape(w.shape[0], -1)
    err = np.abs(rows - q).sum(axis=1) / np.abs(rows).sum(axis=1)
    common.set_random_seed(3)
    us = [common.rng().random() for _ in range(real)]
    mask = np.array(_loop_roulette(list(err), real, us)) == 1
    assert (~mask).sum() == real
    return w, mask


def test_stochastic_inner_product_reads_rows_in_memory_order():
    x = np.random.default_rng(7).standard_normal((3, 8))
    layer = make_layer('type: "BinaryInnerProduct" inner_product_param { num_output: 4 '
                       'transpose: true ratio: 100 weight_filler { type: "gaussian" std: 1 } }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w = layer.blobs[0].data                                   # (K, N) = (8, 4)
    b = _loop_binarize(w.reshape(4, 8), True).reshape(8, 4)   # N rows of K, memory order
    np.testing.assert_allclose(y, x @ b, rtol=1e-12)
