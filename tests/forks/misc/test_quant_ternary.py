import numpy as np
import pytest

from caffepy.forks.misc import quant_ternary as qt
from caffepy.layers.conv import ConvolutionLayer
from caffepy.layers.registry import create_layer
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

IP = ('type: "InnerProduct" inner_product_param { num_output: 1 '
      'bias_filler { type: "constant" value: 0.25 } } %s')
CONV = ('type: "Convolution" convolution_param { num_output: 3 kernel_size: 3 pad: 1 '
        'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } '
        '%s')


class _Uniform(object):
    """A stand-in for the layer's generator: every uniform draw is ``u``."""

    def __init__(self, u):
        self.u = u

    def uniform(self, low, high, size=None):
        return self.u if size is None else np.full(size, self.u)


def _ip(fields, w, x, phase=caffe_pb2.TRAIN, u=0.0):
    layer = make_layer(IP % fields, phase=phase)
    layer.rng = lambda: _Uniform(u)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = w
    layer.forward(bottom, top)
    return layer, bottom, top


def test_absent_fields_build_the_plain_layer():
    lp = caffe_pb2.LayerParameter()
    proto_io.text_format.Parse(CONV % "", lp)
    assert type(create_layer(lp)) is ConvolutionLayer
    lp.weights_compress.append("Ternary")
    assert type(create_layer(lp)) is qt.CompressedConvolutionLayer


def test_ternary_by_hand():
    # mean |w| = 0.425, delta = 0.2975: t = (1, 0, -1, 0), alpha = (0.5 + 0.9) / 2 = 0.7
    layer, _, top = _ip('weights_compress: "Ternary"', [[0.5, -0.1, -0.9, 0.2]], [[1, 2, 3, 4]])
    np.testing.assert_allclose(top[0].data, [[0.7 - 2.1 + 0.25]])
    p = layer.layer_param.weights_compress_param[0]
    np.testing.assert_allclose([p.delta, p.alpha, p.fixedpos, p.maxbits],
                               [0.2975, 0.7, 0, 8], rtol=1e-6)
    np.testing.assert_array_equal(layer.blobs[0].data, [[0.5, -0.1, -0.9, 0.2]])


def test_ternary_quantize_by_hand():
    # alpha 0.7, k = 2: fp = floor(log2 0.7) - 1 = -2, q = round(2.8 + 0) = 3, alpha = 0.75
    layer, _, top = _ip('weights_compress: "Ternary_Quantize" weights_compress_param { maxbits: 2 }',
                        [[0.5, -0.1, -0.9, 0.2]], [[1, 2, 3, 4]])
    np.testing.assert_allclose(top[0].data, [[0.75 - 2.25 + 0.25]])
    p = layer.layer_param.weights_compress_param[0]
    np.testing.assert_allclose([p.alpha, p.fixedpos, p.maxbits], [3, -2, 2], rtol=1e-6)


@pytest.mark.parametrize("k,u,expected", [
    (3, 0.0, [0.25, -1.5, 0.0, 0.75]),     # fp = -2: q = 1.2, -6, 0.2, 3.2 rounded
    (3, 0.4, [0.5, -1.5, 0.25, 1.0]),      # q = 1.6, -5.6, 0.6, 3.6 rounded
    (1, 0.0, [0.0, -1.0, 0.0, 1.0]),       # fp = 0: q = 0, -2 -> 1 - 2^1, 0, 1
])
def test_quantize_by_hand(k, u, expected):
    w = [[0.3, -1.5, 0.05, 0.8]]
    layer, _, top = _ip('weights_compress: "Quantize" weights_compress_param { maxbits: %d }' % k,
                        w, [[1, 0, 0, 0]], u=u)
    np.testing.assert_allclose(top[0].data, [[expected[0] + 0.25]])
    np.testing.assert_allclose(layer._swap[0], [expected])


def test_ulq_by_hand():
    # mean 0, std 1, k = 2: alpha = 0.99529..., q = round(clip(x / alpha + 0.5, -1, 2)) = -1, 2
    a = qt.ULQ_LAMBDA[1]
    out, mean, alpha = qt.ulq(np.array([-1.0, 1.0, -1.0, 1.0]), 2)
    np.testing.assert_allclose(out, [-1.5 * a, 1.5 * a, -1.5 * a, 1.5 * a])
    assert (mean, alpha) == (0.0, a)


def test_clip_and_quantize_activations_by_hand():
    # y = (0.5, -2, 1.2), k = 3. Clip (scale 1): round(y * 3 / 2) = 1, -3, 2. Quantize: fp = -1,
    # round(y / 0.5 + 0.45) = 1, -4, 3
    text = ('type: "InnerProduct" inner_product_param { num_output: 3 bias_term: false } '
            'activations_compress: "%s" activations_compress_param { maxbits: 3 }')
    for method, u, expected in [("Clip", 0.0, [1, -3, 2]), ("Quantize", 0.45, [0.5, -2, 1.5])]:
        layer = make_layer(text % method, phase=caffe_pb2.TRAIN)
        layer.rng = lambda: _Uniform(u)
        bottom, top = make_blobs([[[1.0]]]), make_blobs(1)
        layer.setup(bottom, top)
        layer.blobs[0].data[...] = [[0.5], [-2.0], [1.2]]
        layer.forward(bottom, top)
        np.testing.assert_allclose(top[0].data, [expected])


def test_forward_on_compressed_weights_and_straight_through_backward():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 4, 5))
    layer = make_layer(CONV % 'weights_compress: "Ternary"', phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    w = layer.blobs[0].data.copy()
    t, a = qt.ternary_code(w, 0.7 * np.abs(w).mean())
    plain = make_layer(CONV % "")
    rb, rt = make_blobs([x]), make_blobs(1)
    plain.setup(rb, rt)
    plain.blobs[0].data[...] = a * t
    plain.blobs[1].data[...] = layer.blobs[1].data
    plain.forward(rb, rt)
    np.testing.assert_allclose(top[0].data, rt[0].data, rtol=1e-12)
    top[0].diff[...] = rt[0].diff[...] = rng.standard_normal(top[0].shape)
    for b in layer.blobs + plain.blobs:
        b.diff[...] = 0
    layer.backward(top, [True], bottom)
    plain.backward(rt, [True], rb)
    np.testing.assert_allclose(bottom[0].diff, rb[0].diff, rtol=1e-12)
    for b, r in zip(layer.blobs, plain.blobs):
        np.testing.assert_allclose(b.diff, r.diff, rtol=1e-12)
    np.testing.assert_array_equal(layer.blobs[0].data, w)


@pytest.mark.parametrize("text", [
    CONV % 'weights_compress: "Ternary" weights_compress: "Ternary"',
    IP % 'weights_compress: "ULQ" weights_compress_param { maxbits: 4 }',
])
def test_bottom_gradient(text):
    x = np.random.default_rng(2).standard_normal((2, 2, 3, 3))
    check_layer_gradient(make_layer(text.replace("num_output: 1 ", "num_output: 2 ")),
                         make_blobs([x]), make_blobs(1), check_params=False)


NET = '''name: "q" layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  weights_compress: "Ternary_Quantize" weights_compress: "Quantize"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
  weights_compress: "Quantize" weights_compress_param { maxbits: 8 }
  inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
'''


def test_test_net_reads_the_train_nets_compressed_weights():
    param = proto_io.read_net(NET)
    train, test = Net(param, caffe_pb2.TRAIN), Net(param, caffe_pb2.TEST)
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 6))
    for net in (train, test):
        net.blobs["data"].data[...] = x
        net.blobs["label"].data[...] = [1, 3]
    test.share_trained_layers_with(train)
    train.forward()
    layers = dict(zip(train._layer_names, train.layers))
    used = {name: {i: v.copy() for i, v in layers[name]._swap.items()} for name in ("conv1", "ip1")}
    for p in train.learnable_params:            # an update after the forward, as a solver's
        p.data[...] += 0.01
    test.forward()
    tested = dict(zip(test._layer_names, test.layers))
    for name, values in used.items():
        for i, v in values.items():
            np.testing.assert_array_equal(tested[name]._swap[i], v)
        assert (tested[name].layer_param.weights_compress_param[0]
                == layers[name].layer_param.weights_compress_param[0])


def test_fork_style_excerpt_builds_strict_and_trains(tmp_path):
    from caffepy.cli import main
    from ..nets import train_step
    text = NET.replace('type: "Input"', 'type: "Data" activations_compress: "Quantize" '
                       'activations_compress_param { maxbits: 8 } data_param { source: "x" '
                       'batch_size: 2 }').replace('input_param { shape { dim: 2 dim: 3 dim: 6 '
                                                  'dim: 6 } shape { dim: 2 } }', '')
    path = tmp_path / "q.prototxt"
    path.write_text(text)
    assert main(["summary", "--strict", str(path)]) in (0, None)
    train_step(NET)
