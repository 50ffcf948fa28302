import numpy as np
import pytest

from caffepy.forks.misc import xilinx_fixed as xf
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step


def test_fix_rounding_and_clamp():
    x = np.array([0.3, -0.3, 0.375, -0.375, 5.0, -5.0, 0.0])
    # p = 3: step 1/8, 4 bits: range [-8/8, 7/8]
    np.testing.assert_array_equal(xf.fix(x, 4, 3), [0.25, -0.25, 0.375, -0.375, 0.875, -1.0, 0])
    halves = np.array([0.0625, -0.0625, -0.1875])          # +-0.5 and -1.5 steps
    np.testing.assert_array_equal(xf.fix(halves, 8, 3), [0.125, -0.125, -0.25])
    np.testing.assert_array_equal(xf.fix(halves, 8, 3, dpu_rounding=True), [0.125, 0.0, -0.125])
    np.testing.assert_array_equal(xf.trunc(np.array([0.3, -0.3]), 3), [0.25, -0.25])
    # an all-zero blob: position SHRT_MAX, its zero step rounds everything to 0
    assert xf.pos_overflow(np.zeros(3), 8) == xf.SHRT_MAX
    np.testing.assert_array_equal(xf.fix(np.array([1.0, -2.0]), 8, xf.SHRT_MAX), [0, 0])


def test_positions():
    x = np.array([-1.0, 0.2, 3.1])
    # step = max(-1 / -128.5, 3.1 / 127.5) = 0.0243..; log2(1 / step) = 5.36 -> 5
    assert xf.pos_overflow(x, 8) == 5
    errs = {p: np.sum((x - xf.fix(x, 8, p)) ** 2) for p in range(5, 10)}
    assert xf.pos_diffs(x, 8) == min(errs, key=lambda p: (errs[p], p))


def test_fixed_neuron_test_and_train():
    x = np.array([[0.3, -1.26, 2.0, -0.0625]])
    layer = make_layer('type: "FixedNeuron" fixed_param { bit_width: 8 }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, xf.fix(x, 8, 0, dpu_rounding=True))   # saved position 0
    layer = make_layer('type: "FixedNeuron" fixed_param { bit_width: 8 follow_data_layer: true }')
    layer.setup(make_blobs([x]), make_blobs(1))
    layer.blobs[0].data[...] = 2
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.forward(bottom, top)
    np.testing.assert_array_equal(top[0].data, xf.trunc(x, 2))
    train = make_layer('type: "FixedNeuron" fixed_param { fixed_method: DIFF_S bit_width: 4 }',
                       phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    train.setup(bottom, top)
    train.forward(bottom, top)
    p = xf.pos_diffs(x, 4)
    assert train.blobs[0].data[0] == p
    np.testing.assert_array_equal(top[0].data, xf.fix(x, 4, p, dpu_rounding=True))
    # later iterations keep the most frequent position
    train.set_iter(5)
    bottom[0].data[...] = x * 100
    train.forward(bottom, top)
    p2 = xf.pos_diffs(x * 100, 4)
    assert p2 != p and train.blobs[0].data[0] == min(p, p2)
    top[0].diff[...] = 3.0
    train.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, 3.0)          # straight through


def _conv(method="OVER_FLOW"):
    return make_layer('type: "ConvolutionFixed" convolution_param { num_output: 2 kernel_size: 2 '
                      'weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" '
                      'std: 0.1 } } fixed_param { fixed_method: %s bit_width: 6 }' % method)


def test_convolution_fixed_quantizes_its_parameters():
    from caffepy.layers.conv import ConvolutionLayer
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3))
    for method in ("OVER_FLOW", "DIFF_S"):
        layer = _conv(method)
        (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
        w, b = layer.blobs[0].data.copy(), layer.blobs[1].data.copy()
        find = xf.pos_overflow if method == "OVER_FLOW" else xf.pos_diffs
        plain = make_layer('type: "Convolution" convolution_param { num_output: 2 kernel_size: 2 }')
        plain.blobs = [plain.new_blob(w.shape), plain.new_blob(b.shape)]
        plain.blobs[0].data[...] = xf.fix(w, 6, find(w, 6))
        plain.blobs[1].data[...] = xf.fix(b, 6, find(b, 6))
        assert isinstance(plain, ConvolutionLayer)
        (ref,) = run_layer(plain, make_blobs([x]), make_blobs(1))
        np.testing.assert_allclose(y, ref, rtol=1e-12)
        np.testing.assert_array_equal(layer.blobs[0].data, w)       # the float weights stay


def test_fixed_gradients_use_the_float_parameters():
    x = np.random.default_rng(1).standard_normal((2, 2, 3, 3))
    # parameters that 6-bit fixed point holds exactly: the quantized forward is the float one
    layer = _conv()
    layer.setup(make_blobs([x]), make_blobs(1))
    layer.blobs[0].data[...] = np.round(layer.blobs[0].data * 32) / 32
    layer.blobs[0].data.flat[0] = 0.96875          # 31/32 pins the position at 5
    layer.blobs[1].data[...] = [0.25, -0.5]
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1), check_params=False)
    scale = make_layer('type: "ScaleFixed" scale_param { bias_term: true filler { type: '
                       '"constant" value: 0.75 } bias_filler { type: "constant" value: -0.5 } } '
                       'fixed_param { bit_width: 8 }')
    check_layer_gradient(scale, make_blobs([x]), make_blobs(1), check_params=False)
    norm = make_layer('type: "NormalizeFixed" norm_param { across_spatial: false '
                      'scale_filler { type: "constant" value: 20 } channel_shared: false } '
                      'fixed_param { fixed_method: DIFF_S bit_width: 8 }')
    (y,) = run_layer(norm, make_blobs([x]), make_blobs(1))
    n = np.sqrt((x ** 2).sum(axis=1, keepdims=True) + 1e-10)
    np.testing.assert_allclose(y, 20 * x / n)
    check_layer_gradient(norm, make_blobs([x]), make_blobs(1), check_params=False)


def test_unknown_weight_method_is_an_error():
    with pytest.raises(Exception, match="fixed_method"):
        run_layer(_conv("DIFF_S_SIGMOID"), make_blobs([np.ones((1, 2, 3, 3))]), make_blobs(1))


NET = '''
layer { name: "input" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } shape { dim: 2 } } }
layer { name: "data_fixed" type: "FixedNeuron" bottom: "data" top: "data"
        param { lr_mult: 0 decay_mult: 0 }
        fixed_param { fixed_method: OVER_FLOW bit_width: 8 follow_data_layer: true } }
layer { name: "data_bn" type: "ScaleFixed" bottom: "data" top: "data_bn"
        scale_param { bias_term: true } fixed_param { fixed_method: DIFF_S bit_width: 8 } }
layer { name: "conv1_h" type: "ConvolutionFixed" bottom: "data_bn" top: "conv1_h"
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "msra" } }
        fixed_param { fixed_method: DIFF_S bit_width: 8 } }
layer { name: "conv1_fixed" type: "FixedNeuron" bottom: "conv1_h" top: "conv1_h"
        param { lr_mult: 0 decay_mult: 0 } fixed_param { fixed_method: DIFF_S bit_width: 8 } }
layer { name: "norm" type: "NormalizeFixed" bottom: "conv1_h" top: "norm"
        norm_param { across_spatial: false scale_filler { type: "constant" value: 20 }
                     channel_shared: false } fixed_param { fixed_method: DIFF_S bit_width: 8 } }
layer { name: "ip" type: "InnerProduct" bottom: "norm" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
'''


def test_small_net():
    forward(NET, labels=3)
    train_step(NET, labels=3)


def test_inference_mode_keeps_the_fixed_point_weights():
    import caffepy
    import caffepy.infer  # noqa: F401  (installs Net.optimize)
    from caffepy.net import Net
    from caffepy.proto import io as proto_io
    text = '''
    layer { name: "input" type: "Input" top: "data"
            input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
    layer { name: "c" type: "ConvolutionFixed" bottom: "data" top: "c"
            convolution_param { num_output: 4 kernel_size: 3
                                weight_filler { type: "gaussian" std: 0.3 } }
            fixed_param { bit_width: 3 } }
    '''
    caffepy.set_random_seed(0)
    net = Net(proto_io.read_net(text), caffe_pb2.TEST)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    net.blobs["data"].data[...] = x
    net.forward()
    exact = net.blobs["c"].data.copy()
    net.optimize(engine="caffepy")       # the compiled steps, which run plain convolutions
    net.blobs["data"].data[...] = x
    net.forward()
    np.testing.assert_allclose(net.blobs["c"].data, exact, rtol=1e-5, atol=1e-6)
