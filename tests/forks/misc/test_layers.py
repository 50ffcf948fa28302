import numpy as np
import pytest

from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_selu(dtype):
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    layer = make_layer('type: "SeLu"', dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    a, l = 1.6732632423543772, 1.0507009873554805
    np.testing.assert_allclose(y, np.where(x > 0, l * x, l * a * np.expm1(x)), rtol=1e-5)
    if dtype == np.float64:
        check_layer_gradient(make_layer('type: "SeLu"'), make_blobs([x]), make_blobs(1), kink_range=1e-2)


def test_selu_dropout_train_and_test():
    x = np.random.default_rng(1).standard_normal((4, 50))
    (y,) = run_layer(make_layer('type: "SeLuDropout"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    layer = make_layer('type: "SeLuDropout" selu_dropout_param { dropout_ratio: 0.2 }', phase=caffe_pb2.TRAIN)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    q, al = 0.8, -1.7580993408473766
    a = (q + al ** 2 * q * (1 - q)) ** -0.5
    np.testing.assert_allclose(y, a * np.where(layer.mask, x, al) - a * (1 - q) * al, rtol=1e-6)
    check_layer_gradient(layer, make_blobs([x[:2, :5]]), make_blobs(1))


def test_seg_accuracy():
    score = np.zeros((1, 3, 2, 2))
    score[0, [0, 1, 1, 2], [0, 0, 1, 1], [0, 1, 0, 1]] = 1          # predictions 0 1 / 1 2
    label = np.array([0, 1, 2, 255], float).reshape(1, 1, 2, 2)
    layer = make_layer('type: "SegAccuracy" seg_accuracy_param { ignore_label: 255 }')
    (y,) = run_layer(layer, make_blobs([score, label]), make_blobs(1))
    np.testing.assert_allclose(y.ravel(), [2 / 3, 2 / 3, (1 + 0.5 + 0) / 3])
