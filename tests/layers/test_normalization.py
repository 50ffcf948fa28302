import numpy as np
import pytest

from caffepy import common
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

FIELDS = caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name
needs_bn_param = pytest.mark.skipif("bn_param" not in FIELDS, reason="schema lacks bn_param")
needs_norm_param = pytest.mark.skipif("norm_param" not in FIELDS, reason="schema lacks norm_param")


@pytest.fixture(autouse=True)
def seeded():
    common.set_random_seed(1701)


def channel_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return x.mean(axis=axes).reshape(shape), x.var(axis=axes).reshape(shape), axes


# -- BatchNorm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batchnorm_train_forward_and_moving_averages(dtype):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 3, 2, 5)) * 2 + 1 for _ in range(2)]
    layer = make_layer('type: "BatchNorm" batch_norm_param { moving_average_fraction: 0.9 eps: 1e-3 }',
                       dtype=dtype, phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([xs[0]], dtype), make_blobs(1, dtype)
    layer.setup(bottom, top)
    assert [b.shape for b in layer.blobs] == [(3,), (3,), (1,)]
    sums = [np.zeros(3), np.zeros(3), 0.0]
    m = xs[0].size / 3
    for x in xs:
        bottom[0].data[...] = x
        layer.forward(bottom, top)
        mu, var, _ = channel_stats(x)
        np.testing.assert_allclose(top[0].data, (x - mu) / np.sqrt(var + 1e-3), rtol=2e-4, atol=1e-5)
        sums = [0.9 * sums[0] + mu.ravel(), 0.9 * sums[1] + m / (m - 1) * var.ravel(), 0.9 * sums[2] + 1]
    for blob, ref in zip(layer.blobs, sums):
        np.testing.assert_allclose(blob.data.ravel(), np.ravel(ref), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batchnorm_test_uses_stored_statistics(dtype):
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    layer = make_layer('type: "BatchNorm"', dtype=dtype)          # TEST: use_global_stats
    bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
    layer.setup(bottom, top)
    mean_sum, var_sum = np.array([1.0, -2.0, 0.5]), np.array([4.0, 1.0, 9.0])
    for blob, value in zip(layer.blobs, (mean_sum, var_sum, [2.0])):
        blob.data[...] = value
    layer.forward(bottom, top)
    ref = (x - mean_sum[:, None] / 2) / np.sqrt(var_sum[:, None] / 2 + 1e-5)
    np.testing.assert_allclose(top[0].data, ref, rtol=1e-5)
    layer.blobs[2].data[...] = 0                                   # scale factor 0 means 0
    layer.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, x / np.sqrt(1e-5), rtol=1e-5)


def test_batchnorm_use_global_stats_default_follows_phase():
    x = np.random.default_rng(2).standard_normal((3, 2))
    train = make_layer('type: "BatchNorm"', phase=caffe_pb2.TRAIN)
    run_layer(train, make_blobs([x]), make_blobs(1))
    assert not train.use_global_stats and train.blobs[2].data[0] == 1
    forced = make_layer('type: "BatchNorm" batch_norm_param { use_global_stats: true }',
                        phase=caffe_pb2.TRAIN)
    run_layer(forced, make_blobs([x]), make_blobs(1))
    assert forced.use_global_stats and forced.blobs[2].data[0] == 0


@pytest.mark.parametrize("phase, shape", [(caffe_pb2.TRAIN, (3, 2, 4)), (caffe_pb2.TRAIN, (5, 3)),
                                          (caffe_pb2.TEST, (2, 3, 2, 2))])
def test_batchnorm_gradient(phase, shape):
    x = np.random.default_rng(3).standard_normal(shape)
    layer = make_layer('type: "BatchNorm"', phase=phase)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = 0.3
    layer.blobs[1].data[...] = 2.0
    layer.blobs[2].data[...] = 1.5
    check_layer_gradient(layer, bottom, top)
    assert layer.param_propagate_down == [False, False, False]


def test_batchnorm_in_place_survives_clobbered_top():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    grads = []
    for in_place in (False, True):
        layer = make_layer('type: "BatchNorm"', phase=caffe_pb2.TRAIN)
        bottom = make_blobs([x])
        top = bottom if in_place else make_blobs(1)
        layer.setup(bottom, top)
        layer.forward(bottom, top)
        top[0].data[...] = 7.0                                       # a later in-place layer
        top[0].diff[...] = dy
        layer.backward(top, [True], bottom)
        grads.append(bottom[0].diff.copy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_batchnorm_param_specs_are_frozen():
    layer = make_layer('type: "BatchNorm"')
    run_layer(layer, make_blobs([np.ones((2, 3))]), make_blobs(1))
    assert [s.lr_mult for s in layer.layer_param.param] == [0, 0, 0]
    legacy = make_layer('type: "BatchNorm" param { lr_mult: 1 } param { lr_mult: 1 } '
                        'param { lr_mult: 1 decay_mult: 1 }')
    run_layer(legacy, make_blobs([np.ones((2, 3))]), make_blobs(1))
    assert [(s.lr_mult, s.decay_mult) for s in legacy.layer_param.param] == [(0, 0)] * 3
    with pytest.raises(CaffeError, match="batch normalization statistics"):
        run_layer(make_layer('type: "BatchNorm" param { lr_mult: 1 }'),
                  make_blobs([np.ones((2, 3))]), make_blobs(1))


# -- BN (PSPNet) --------------------------------------------------------------------------------
BN_TEXT = ('type: "BN" bn_param { slope_filler { type: "uniform" min: 0.5 max: 2 } '
           'bias_filler { type: "uniform" min: -1 max: 1 } momentum: 0.8 eps: 1e-4 %s }')


@needs_bn_param
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bn_train_forward_and_moving_averages(dtype):
    x = np.random.default_rng(5).standard_normal((3, 2, 4, 3)) + 2
    layer = make_layer(BN_TEXT % "", dtype=dtype, phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
    layer.setup(bottom, top)
    assert [b.shape for b in layer.blobs] == [(1, 2, 1, 1)] * 4
    slope, bias = layer.blobs[0].data.copy(), layer.blobs[1].data.copy()
    layer.forward(bottom, top)
    mu, var, _ = channel_stats(x)
    np.testing.assert_allclose(top[0].data, slope * (x - mu) / np.sqrt(var + 1e-4) + bias,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.blobs[2].data, 0.2 * mu, rtol=1e-5)
    np.testing.assert_allclose(layer.blobs[3].data, 0.2 * var, rtol=1e-5)
    assert [(s.lr_mult, s.decay_mult) for s in layer.layer_param.param][2:] == [(0, 0)] * 2


@needs_bn_param
@pytest.mark.parametrize("frozen", [False, True])
def test_bn_test_and_frozen_use_moving_averages(frozen):
    x = np.random.default_rng(6).standard_normal((2, 3, 2, 2))
    phase = caffe_pb2.TRAIN if frozen else caffe_pb2.TEST
    layer = make_layer(BN_TEXT % ("frozen: %s" % str(frozen).lower()), phase=phase)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    assert np.all(layer.blobs[3].data == (1.0 if frozen else 0.0))
    layer.blobs[2].data[...] = np.array([0.5, -1, 2]).reshape(1, 3, 1, 1)
    layer.blobs[3].data[...] = np.array([1, 4, 0.25]).reshape(1, 3, 1, 1)
    stats = [b.data.copy() for b in layer.blobs]
    layer.forward(bottom, top)
    slope, bias, mean, var = stats
    np.testing.assert_allclose(top[0].data, slope * (x - mean) / np.sqrt(var + 1e-4) + bias,
                               rtol=1e-10)
    for blob, before in zip(layer.blobs, stats):
        np.testing.assert_array_equal(blob.data, before)
    if frozen:
        assert [s.lr_mult for s in layer.layer_param.param] == [0] * 4
        check_layer_gradient(layer, bottom, top)


@needs_bn_param
def test_bn_train_gradient():
    x = np.random.default_rng(7).standard_normal((3, 2, 2, 3))
    layer = make_layer(BN_TEXT % "", phase=caffe_pb2.TRAIN)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    assert layer.param_propagate_down == [True, True, False, False]


def test_bn_defaults_without_bn_param():
    layer = make_layer('type: "BN"', phase=caffe_pb2.TRAIN)
    run_layer(layer, make_blobs([np.ones((2, 3, 2, 2))]), make_blobs(1))
    assert (layer.momentum, layer.frozen) == (pytest.approx(0.9), False)
    assert all(np.all(b.data == 0) for b in (layer.blobs[0], layer.blobs[1]))


# -- MVN ----------------------------------------------------------------------------------------
def mvn_ref(x, normalize_variance, across_channels, eps=1e-9):
    rows = x.reshape(x.shape[0] if across_channels else x.shape[0] * x.shape[1], -1)
    y = rows - rows.mean(axis=1, keepdims=True)
    if normalize_variance:
        y = y / (np.sqrt((y ** 2).mean(axis=1, keepdims=True)) + eps)
    return y.reshape(x.shape)


MVN_CASES = [(True, False), (True, True), (False, False), (False, True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalize_variance, across_channels", MVN_CASES)
def test_mvn_forward(dtype, normalize_variance, across_channels):
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 5)) * 3 + 1
    text = ('type: "MVN" mvn_param { normalize_variance: %s across_channels: %s }'
            % (str(normalize_variance).lower(), str(across_channels).lower()))
    (y,) = run_layer(make_layer(text, dtype=dtype), make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, mvn_ref(x, normalize_variance, across_channels), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("normalize_variance, across_channels", MVN_CASES)
def test_mvn_gradient(normalize_variance, across_channels):
    x = np.random.default_rng(9).standard_normal((2, 3, 2, 3))
    text = ('type: "MVN" mvn_param { normalize_variance: %s across_channels: %s }'
            % (str(normalize_variance).lower(), str(across_channels).lower()))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


# -- Normalize (SSD) ----------------------------------------------------------------------------
def normalize_ref(x, scale, across_spatial, channel_shared, eps=1e-10):
    axes = (1, 2, 3) if across_spatial else (1,)
    y = x / np.sqrt((x ** 2).sum(axis=axes, keepdims=True) + eps)
    return y * (scale if channel_shared else np.reshape(scale, (1, -1, 1, 1)))


NORM_CASES = [(True, True), (True, False), (False, True), (False, False)]


@needs_norm_param
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("across_spatial, channel_shared", NORM_CASES)
def test_normalize_forward(dtype, across_spatial, channel_shared):
    x = np.random.default_rng(10).standard_normal((2, 3, 4, 2))
    text = ('type: "Normalize" norm_param { across_spatial: %s channel_shared: %s '
            'scale_filler { type: "uniform" min: 1 max: 20 } }'
            % (str(across_spatial).lower(), str(channel_shared).lower()))
    layer = make_layer(text, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    assert layer.blobs[0].shape == (() if channel_shared else (3,))
    scale = layer.blobs[0].data.astype(np.float64)
    np.testing.assert_allclose(y, normalize_ref(x, scale, across_spatial, channel_shared), rtol=1e-5)


@needs_norm_param
@pytest.mark.parametrize("across_spatial, channel_shared", NORM_CASES)
def test_normalize_gradient(across_spatial, channel_shared):
    # SSD's bottom gradient is exact when every channel has the same scale (see the docstring),
    # so the check uses a constant per-channel scale; the param gradient is checked as well.
    x = np.random.default_rng(11).standard_normal((2, 3, 2, 3))
    text = ('type: "Normalize" norm_param { across_spatial: %s channel_shared: %s '
            'scale_filler { type: "constant" value: 2.5 } }'
            % (str(across_spatial).lower(), str(channel_shared).lower()))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


@needs_norm_param
@pytest.mark.parametrize("across_spatial", [True, False])
def test_normalize_per_channel_backward_matches_ssd(across_spatial):
    rng = np.random.default_rng(13)
    x, dy = rng.standard_normal((2, 3, 2, 2)), rng.standard_normal((2, 3, 2, 2))
    text = ('type: "Normalize" norm_param { across_spatial: %s channel_shared: false '
            'scale_filler { type: "uniform" min: 1 max: 20 } }' % str(across_spatial).lower())
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    s = layer.blobs[0].data.reshape(1, 3, 1, 1)
    axes = (1, 2, 3) if across_spatial else (1,)
    n = np.sqrt((x ** 2).sum(axis=axes, keepdims=True) + 1e-10)
    ssd = s * (dy - x * (x * dy).sum(axis=axes, keepdims=True) / n ** 2) / n
    np.testing.assert_allclose(bottom[0].diff, ssd, rtol=1e-10)
    np.testing.assert_allclose(layer.blobs[0].diff.ravel(), (dy * x / n).sum(axis=(0, 2, 3)),
                               rtol=1e-10)


def test_normalize_defaults():
    x = np.random.default_rng(12).standard_normal((2, 3, 2, 2))
    layer = make_layer('type: "Normalize" norm_param { }')  # bare Normalize: happynear's (forks.face.losses)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert layer.blobs[0].shape == () and layer.blobs[0].data == 1.0
    np.testing.assert_allclose(y, normalize_ref(x, 1.0, True, True), rtol=1e-10)
