"""CTPN's sequence layers: Transpose, Reverse, Lstm (forks/ocr/caffe_ocr.py, shared with caffe_ocr)."""
import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_transpose_and_reverse():
    x = np.arange(24.0).reshape(2, 3, 4, 1)
    layer = make_layer('type: "Transpose" transpose_param { dim: 3 dim: 2 dim: 0 dim: 1 }')
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 4, 2, 3)
    assert y[0, 2, 1, 0] == x[1, 0, 2, 0]
    check_layer_gradient(make_layer('type: "Transpose" transpose_param { dim: 3 dim: 2 dim: 0 dim: 1 }'),
                         make_blobs([x]), make_blobs(1))
    y, = run_layer(make_layer('type: "Reverse" reverse_param { axis: 1 }'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x[:, ::-1])
    check_layer_gradient(make_layer('type: "Reverse"'), make_blobs([x]), make_blobs(1))
    with pytest.raises(ShapeError, match="not a permutation"):
        run_layer(make_layer('type: "Transpose" transpose_param { dim: 0 dim: 0 }'),
                  make_blobs([np.zeros((2, 2))]), make_blobs(1))


LSTM = ('type: "Lstm" lstm_param { num_output: 2 weight_filler { type: "uniform" min: -0.5 max: 0.5 } '
        'bias_filler { type: "uniform" min: -0.5 max: 0.5 } %s }')


def test_lstm_numbers_by_hand():
    """H = 1, I = 1, two steps, one sample; the f gate is 0 at t = 0."""
    layer = make_layer('type: "Lstm" lstm_param { num_output: 1 }')
    x = np.array([0.5, -1.0]).reshape(2, 1, 1)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    wx, wh, b = np.array([0.1, 0.2, 0.3, 0.4]), np.array([-0.5, 0.6, 0.7, -0.8]), np.array([0.0, 0.1, -0.1, 0.2])
    for blob, v in zip(layer.blobs, (wx[:, None], wh[:, None], b)):
        blob.data[...] = v
    layer.forward(bottom, top)
    s = lambda v: 1 / (1 + np.exp(-v))   # noqa: E731
    z0 = wx * 0.5 + b
    c0 = s(z0[0]) * np.tanh(z0[3])                           # f * c_{-1} = 0
    h0 = s(z0[2]) * np.tanh(c0)
    z1 = wx * -1.0 + b + wh * h0
    c1 = s(z1[1]) * c0 + s(z1[0]) * np.tanh(z1[3])
    h1 = s(z1[2]) * np.tanh(c1)
    np.testing.assert_allclose(top[0].data.ravel(), [h0, h1], rtol=1e-6)


@pytest.mark.parametrize("extra", ["", "clipping_threshold: 10"])
def test_lstm_gradient(extra):
    x = np.random.default_rng(5).standard_normal((3, 2, 2, 1))
    check_layer_gradient(make_layer(LSTM % extra), make_blobs([x]), make_blobs(1))
