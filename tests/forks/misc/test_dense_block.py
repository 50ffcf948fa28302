import numpy as np
import pytest
from scipy.signal import convolve2d

from caffepy.errors import NetError
from caffepy.forks.misc.dense_block import DenseBlockLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker

RNG = np.random.default_rng(11)


def _layer(params="", phase=caffe_pb2.TEST, extra=""):
    return make_layer('type: "DenseBlock" %s denseblock_param { numTransition: 2 growthRate: 2 '
                      'Filter_Filler { type: "gaussian" std: 0.3 } BN_Scaler_Filler { type: '
                      '"constant" value: 1 } %s }' % (extra, params), phase=phase)


def _randomize(layer, positive_stats=True):
    for b in layer.blobs[:-1]:
        b.data[...] = RNG.standard_normal(b.shape)
    t = layer.T
    for g in (4, 9) if layer.bc else (4,):
        for b in layer.blobs[g * t:(g + 1) * t]:
            b.data[...] = RNG.uniform(0.5, 2.0, b.shape)


def _bn(z, scale, bias, mean, var):
    c = (slice(None), None, None)
    return scale[c] * (z - mean[c]) / np.sqrt(var[c] + 1e-5) + bias[c]


def _true_conv(x, w):
    """A 'same' true convolution, image by image (scipy's convolve2d turns the kernel)."""
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:])
    for n in range(x.shape[0]):
        for g in range(w.shape[0]):
            out[n, g] = sum(convolve2d(x[n, c], w[g, c], mode="same") for c in range(x.shape[1]))
    return out


def _reference(layer, x):
    """The TEST forward written out transition by transition (module doc)."""
    T, blobs = layer.T, [b.data for b in layer.blobs]
    flat = [b.reshape(-1) for b in blobs]
    X = x.copy()
    for i in range(T):
        r = np.maximum(_bn(X, flat[T + i], flat[2 * T + i], flat[3 * T + i], flat[4 * T + i]), 0)
        if layer.bc:
            u = np.einsum("gc,nchw->nghw", blobs[5 * T + i][:, :, 0, 0], r)
            r = np.maximum(_bn(u, flat[6 * T + i], flat[7 * T + i], flat[8 * T + i],
                               flat[9 * T + i]), 0)
        X = np.concatenate([X, _true_conv(r, blobs[i])], axis=1)
    return X


@pytest.mark.parametrize("bc", [False, True])
def test_test_forward_is_bn_relu_true_convolution_concatenated(bc):
    layer = _layer("use_BC: %s" % str(bc).lower())
    x = RNG.standard_normal((2, 3, 5, 4))
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    _randomize(layer)
    (y,) = run_layer(layer, bottom, top)
    assert y.shape == (2, 3 + 2 * 2, 5, 4)
    np.testing.assert_allclose(y, _reference(layer, x), rtol=1e-10, atol=1e-10)
    if not bc:
        assert not np.allclose(y[:, 3:5], _reference_cross_correlation(layer, x))


def _reference_cross_correlation(layer, x):
    """The first transition (no bottleneck) with Caffe's cross-correlation instead: differs
    (the kernels are not symmetric), so the test above tells the two apart."""
    flipped = layer.blobs[0].data[:, :, ::-1, ::-1]
    T = layer.T
    flat = [b.data.reshape(-1) for b in layer.blobs]
    r = np.maximum(_bn(x, flat[T], flat[2 * T], flat[3 * T], flat[4 * T]), 0)
    return _true_conv(r, flipped)


def test_blobs_in_the_forks_order_and_its_param_specs():
    layer = _layer("use_BC: true")
    layer.setup(make_blobs([np.zeros((1, 3, 4, 4))]), make_blobs(1))
    shapes = [b.shape for b in layer.blobs]
    assert len(shapes) == 10 * 2 + 1
    assert shapes[:2] == [(2, 8, 3, 3)] * 2                      # 3 x 3 on the 4 G bottleneck
    assert shapes[2:4] == [(1, 3, 1, 1), (1, 5, 1, 1)]           # BN scale of C0, C0 + G
    assert shapes[10:12] == [(8, 3, 1, 1), (8, 5, 1, 1)]         # the 1 x 1 bottleneck filters
    assert shapes[12:20] == [(1, 8, 1, 1)] * 8 and shapes[20] == (1,)
    lr = [p.lr_mult for p in layer.layer_param.param]
    assert lr == [1] * 6 + [0] * 4 + [1] * 6 + [0] * 4 + [0]
    np.testing.assert_array_equal(layer.blobs[8].data, 1.0)      # stored variance starts at 1
    np.testing.assert_array_equal(layer.blobs[2].data, 1.0)      # BN_Scaler_Filler
    plain = _layer()
    plain.setup(make_blobs([np.zeros((1, 3, 4, 4))]), make_blobs(1))
    assert len(plain.blobs) == 5 * 2 + 1 and plain.blobs[1].shape == (2, 5, 3, 3)


def test_train_normalises_with_the_batch_and_moves_the_stored_statistics():
    layer = _layer("moving_average_fraction: 0.25", phase=caffe_pb2.TRAIN)
    x = RNG.standard_normal((3, 3, 4, 4)) * 2 + 1
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    _randomize(layer)
    mean0, var0 = layer.blobs[6].data.copy(), layer.blobs[8].data.copy()
    run_layer(layer, bottom, top)
    mu, v = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    m = 3 * 4 * 4
    np.testing.assert_allclose(layer.blobs[6].data.reshape(-1),
                               0.25 * mu + 0.75 * mean0.reshape(-1))
    np.testing.assert_allclose(layer.blobs[8].data.reshape(-1),
                               0.25 * v * m / (m - 1) + 0.75 * var0.reshape(-1))
    # with the batch's own statistics stored and fraction 1, TEST would give TRAIN's output
    y_train = top[0].data.copy()
    test = _layer("moving_average_fraction: 1", phase=caffe_pb2.TEST)
    test.setup(make_blobs([x]), make_blobs(1))
    for a, b in zip(test.blobs, layer.blobs):
        a.data[...] = b.data
    test.blobs[6].data.reshape(-1)[...] = mu
    test.blobs[8].data.reshape(-1)[...] = v
    y_test = run_layer(test, make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_allclose(y_test[:, :5], y_train[:, :5], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("phase", [caffe_pb2.TRAIN, caffe_pb2.TEST])
@pytest.mark.parametrize("params", ["", "use_BC: true", "use_dropout: true dropout_amount: 0.3"])
def test_gradient(phase, params):
    # float64 with a small step: a step of 1e-3 moves some BN outputs across ReLU's kink
    layer = _layer(params, phase=phase)
    bottom, top = make_blobs([RNG.standard_normal((2, 3, 4, 3))]), make_blobs(1)
    layer.setup(bottom, top)
    _randomize(layer)
    GradientChecker(stepsize=1e-6, threshold=1e-4).check(layer, bottom, top, first_setup=False)


def test_refusals():
    x = make_blobs([np.zeros((1, 3, 4, 4))])
    with pytest.raises(NetError, match="writes its own param specs"):
        _layer(extra="param { lr_mult: 1 }").setup(x, make_blobs(1))
    with pytest.raises(NetError, match="must keep the size"):
        _layer("pad_h: 0").setup(x, make_blobs(1))
    with pytest.raises(NetError, match="dropout_amount"):
        _layer("use_dropout: true dropout_amount: 1").setup(x, make_blobs(1))
    with pytest.raises(NetError, match="over Caffe's blob limit"):
        make_layer('type: "DenseBlock" denseblock_param { numTransition: 1000000 growthRate: 4 }'
                   ).setup(x, make_blobs(1))
    assert isinstance(_layer(), DenseBlockLayer)
    layer = _layer("use_BC: true")
    layer.setup(x, make_blobs(1))
    assert layer._param_count() == sum(b.count for b in layer.blobs)
    plain = _layer()
    plain.setup(x, make_blobs(1))
    assert plain._param_count() == sum(b.count for b in plain.blobs)


NET = """name: "ocr"
input: "data" input_shape { dim: 1 dim: 1 dim: 8 dim: 12 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "db" type: "DenseBlock" bottom: "conv1" top: "db"
  denseblock_param { numTransition: 3 initChannel: 4 growthRate: 2 use_dropout: false
    Filter_Filler { type: "msra" } BN_Scaler_Filler { type: "constant" value: 1 }
    BN_Bias_Filler { type: "constant" value: 0 } } }
"""


def test_strict_summary_builds_and_counts_the_convolutions(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    assert main(["summary", "--strict", str(path)]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("db ")][0]
    assert "1x10x8x12" in row
    flops = 2 * 2 * 3 * 3 * (4 + 6 + 8) + 2 * (4 + 6 + 8)      # per position
    assert "%.2fK" % (flops * 96 / 1e3) in row
