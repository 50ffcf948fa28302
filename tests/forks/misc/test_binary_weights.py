import numpy as np
import pytest

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
    ref, rb, rt = _plain(plain, x, [wb, layer.blobs[1].data])
    np.testing.assert_allclose(top[0].data, rt[0].data, rtol=1e-12)
    dy = rng.standard_normal(top[0].shape)
    top[0].diff[...] = rt[0].diff[...] = dy
    for b in layer.blobs + ref.blobs:
        b.diff[...] = 0
    w_float = layer.blobs[0].data.copy()
    layer.backward(top, [True], bottom)
    ref.backward(rt, [True], rb)
    np.testing.assert_allclose(bottom[0].diff, rb[0].diff, rtol=1e-12)     # through B
    for b, r in zip(layer.blobs, ref.blobs):                                # dL/dB into W
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
layer { name: "fc" type: "BinaryInnerProduct" bottom: "s1" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } }
  binary_inner_product_param { use_alpha: true } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
'''


def test_a_binary_net_runs_and_trains(tmp_path):
    net = forward(NET)
    assert net.blobs["fc"].shape == (1, 10)
    train_step(NET)
    from caffepy.cli import main
    path = tmp_path / "b.prototxt"
    path.write_text(NET)
    assert main(["summary", "--strict", str(path)]) in (0, None)
