import numpy as np
import pytest

from caffepy import common
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.random.default_rng(0).standard_normal((2, 3, 4, 5))


def sig(x):
    return 1 / (1 + np.exp(-x))


# (prototxt, numpy reference f(x), kink points to skip in the gradient check)
CASES = {
    "relu": ('type: "ReLU"', lambda x: np.maximum(x, 0), 0.0),
    "leaky": ('type: "ReLU" relu_param { negative_slope: 0.1 }',
              lambda x: np.where(x > 0, x, 0.1 * x), 0.0),
    "relu6": ('type: "ReLU6"', lambda x: np.clip(x, 0, 6), None),
    "sigmoid": ('type: "Sigmoid"', sig, None),
    "tanh": ('type: "TanH"', np.tanh, None),
    "absval": ('type: "AbsVal"', np.abs, 0.0),
    "bnll": ('type: "BNLL"', lambda x: np.log1p(np.exp(x)), None),
    "elu": ('type: "ELU" elu_param { alpha: 0.5 }',
            lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), 0.0),
    "swish": ('type: "Swish" swish_param { beta: 0.8 }', lambda x: x * sig(0.8 * x), None),
    "clip": ('type: "Clip" clip_param { min: -0.5 max: 0.7 }', lambda x: np.clip(x, -0.5, 0.7),
             None),
    "threshold": ('type: "Threshold" threshold_param { threshold: 0.3 }',
                  lambda x: (x > 0.3).astype(float), None),
    "dropout_test": ('type: "Dropout" dropout_param { dropout_ratio: 0.3 }', lambda x: x, None),
}
NO_BACKWARD = {"threshold"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward(name, dtype):
    text, ref, _ = CASES[name]
    x = X * 4 if name == "relu6" else X
    (y,) = run_layer(make_layer(text, dtype=dtype), make_blobs([x], dtype), make_blobs(1, dtype))
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref(x), rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_BACKWARD))
def test_gradient(name):
    text, _, kink = CASES[name]
    x = X * 4 if name == "relu6" else X
    kw = {}
    if kink is not None:
        kw = dict(kink=kink, kink_range=1e-2)
    elif name in ("relu6", "clip"):
        x = np.where(np.abs(np.abs(x) - 0.6) < 0.15, x + 0.3, x)
        x = np.where(np.abs(x - 6) < 0.05, 5.5, x)
        x = np.where(np.abs(x) < 0.05, 0.5, x)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1), **kw)


def test_threshold_has_no_backward():
    layer = make_layer(CASES["threshold"][0])
    bottom, top = make_blobs([X]), make_blobs(1)
    run_layer(layer, bottom, top)
    with pytest.raises(CaffeError, match="Threshold"):
        layer.backward(top, [True], bottom)


@pytest.mark.parametrize("name", ["sigmoid", "bnll", "elu", "swish", "absval", "clip"])
def test_in_place_matches_out_of_place(name):
    text = CASES[name][0]
    a, b = make_layer(text), make_layer(text)
    bottom, top = make_blobs([X]), make_blobs(1)
    run_layer(a, bottom, top)
    dy = np.random.default_rng(3).standard_normal(X.shape)
    top[0].diff[...] = dy
    a.backward(top, [True], bottom)
    (blob,) = make_blobs([X])
    run_layer(b, [blob], [blob])
    np.testing.assert_allclose(blob.data, top[0].data)
    blob.diff[...] = dy
    b.backward([blob], [True], [blob])
    np.testing.assert_allclose(blob.diff, bottom[0].diff)


@pytest.mark.parametrize("shared", [False, True])
def test_prelu(shared):
    text = 'type: "PReLU" prelu_param { channel_shared: %s }' % ("true" if shared else "false")
    layer = make_layer(text)
    bottom, top = make_blobs([X]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert layer.blobs[0].shape == (() if shared else (3,))
    np.testing.assert_allclose(layer.blobs[0].data, 0.25)
    np.testing.assert_allclose(y, np.where(X > 0, X, 0.25 * X))
    layer.blobs[0].data[...] = 0.1 if shared else [0.1, -0.2, 0.3]
    check_layer_gradient(layer, bottom, top, kink_range=1e-2)


def test_prelu_in_place_gradient():
    layer = make_layer('type: "PReLU" prelu_param { filler { type: "constant" value: 0.3 } }')
    (blob,) = make_blobs([X])
    run_layer(layer, [blob], [blob])
    blob.diff[...] = 1.0
    layer.blobs[0].diff[...] = 0
    layer.backward([blob], [True], [blob])
    np.testing.assert_allclose(blob.diff, np.where(X > 0, 1.0, 0.3))
    np.testing.assert_allclose(layer.blobs[0].diff, np.where(X > 0, 0, X).sum(axis=(0, 2, 3)))


@pytest.mark.parametrize("in_place", [False, True])
def test_prelu_writes_caffes_bytes(in_place):
    """prelu_layer.cpp's forward max(x, 0) + a_c * min(x, 0) and bottom diff
    dy * ((x > 0) + a_c * (x <= 0)), byte for byte in float32, a zero slope among the channels
    (a negative x then gives +0, not x * 0 = -0), signed zeros and infinities in x."""
    x = np.random.default_rng(4).standard_normal((2, 3, 4, 5)).astype(np.float32)
    x[0, :, 0, :3] = [-0.0, 0.0, -np.inf]
    a = np.array([0.0, 0.25, -0.5], np.float32)
    layer = make_layer('type: "PReLU"', dtype=np.float32)
    (b,) = make_blobs([x], dtype=np.float32)
    top = [b] if in_place else make_blobs(1, dtype=np.float32)
    layer.setup([b], top)
    layer.blobs[0].data[...] = a
    layer.reshape([b], top)
    with np.errstate(all="ignore"):
        layer.forward([b], top)
        ac = a.reshape(1, 3, 1, 1)
        want = np.where(x < 0, np.float32(0), x) + ac * np.where(0 < x, np.float32(0), x)
        assert top[0].data.tobytes() == want.astype(np.float32).tobytes()
        dy = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
        top[0].diff[...] = dy
        layer.backward(top, [True], [b])
        mult = (x > 0).astype(np.float32) + ac * (x <= 0).astype(np.float32)
        assert b.diff.tobytes() == (dy * mult).astype(np.float32).tobytes()


def test_prelu_needs_two_axes():
    with pytest.raises(CaffeError, match="at least 2 axes"):
        run_layer(make_layer('type: "PReLU"'), make_blobs([np.ones(4)]), make_blobs(1))


@pytest.mark.parametrize("scale_train", [True, False])
def test_dropout_train(scale_train):
    text = 'type: "Dropout" dropout_param { dropout_ratio: 0.25 }'
    if not scale_train:
        text = text[:-1] + "scale_train: false }"
    layer = make_layer(text, phase=caffe_pb2.TRAIN)
    x = np.ones((50, 40))
    common.set_random_seed(5)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    scale = 1 / 0.75 if scale_train else 1.0
    assert set(np.unique(y)) <= {0.0, scale}
    assert abs((y == 0).mean() - 0.25) < 0.03
    check_layer_gradient(layer, make_blobs([X]), make_blobs(1))
    test = make_layer(text, phase=caffe_pb2.TEST)
    (y,) = run_layer(test, make_blobs([X]), make_blobs(1))
    np.testing.assert_allclose(y, X * (1.0 if scale_train else 0.75))


def test_dropout_ratio_one_only_in_a_test_net():
    """Caffe checks the ratio with DCHECK only: its release build runs a TEST net with ratio 1
    (no dropping there), and would train a TRAIN one on NaN, which caffepy refuses."""
    text = 'type: "Dropout" dropout_param { dropout_ratio: 1 %s}'
    with pytest.raises(CaffeError, match=r"dropout_ratio must be in \[0, 1\), got 1"):
        run_layer(make_layer(text % "", phase=caffe_pb2.TRAIN), make_blobs([X]), make_blobs(1))
    (y,) = run_layer(make_layer(text % "", phase=caffe_pb2.TEST), make_blobs([X]), make_blobs(1))
    np.testing.assert_array_equal(y, X)
    (y,) = run_layer(make_layer(text % "scale_train: false ", phase=caffe_pb2.TEST),
                     make_blobs([X]), make_blobs(1))
    np.testing.assert_array_equal(y, 0 * X)
    with pytest.raises(CaffeError, match=r"\(1 in a TEST net\), got 1.5"):
        run_layer(make_layer(text.replace("1 ", "1.5 ") % "", phase=caffe_pb2.TEST),
                  make_blobs([X]), make_blobs(1))


def test_clip_needs_min_and_max():
    with pytest.raises(CaffeError, match="clip_param"):
        run_layer(make_layer('type: "Clip" clip_param { min: 0 }'), make_blobs([X]),
                  make_blobs(1))
