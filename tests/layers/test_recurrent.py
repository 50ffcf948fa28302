import os

import numpy as np
import pytest

from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.conftest import shared_path


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _cont(T, N):
    c = np.ones((T, N))
    c[0] = 0
    if T > 2:
        c[2, 0] = 0   # a sequence restart mid-batch
    return c


def _lstm_ref(x, cont, W_xc, b_c, W_hc, xs=None, W_s=None, h=None, c=None):
    T, N = cont.shape
    H = W_hc.shape[1]
    h = np.zeros((N, H)) if h is None else h
    c = np.zeros((N, H)) if c is None else c
    out = []
    for t in range(T):
        a = x[t].reshape(N, -1) @ W_xc.T + b_c + (cont[t][:, None] * h) @ W_hc.T
        if xs is not None:
            a = a + xs.reshape(N, -1) @ W_s.T
        i, f, o, g = _sig(a[:, :H]), _sig(a[:, H:2 * H]), _sig(a[:, 2 * H:3 * H]), np.tanh(a[:, 3 * H:])
        c = cont[t][:, None] * f * c + i * g
        h = o * np.tanh(c)
        out.append(h)
    return np.stack(out), h, c


LSTM = 'type: "LSTM" recurrent_param { num_output: %d %s weight_filler { type: "uniform" min: -0.5 max: 0.5 } bias_filler { type: "uniform" min: -0.2 max: 0.2 } }'
RNN = 'type: "RNN" recurrent_param { num_output: %d %s weight_filler { type: "uniform" min: -0.5 max: 0.5 } bias_filler { type: "uniform" min: -0.2 max: 0.2 } }'


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_forward_matches_numpy(dtype):
    rng = np.random.default_rng(0)
    T, N, D, H = 4, 3, 5, 6
    x, cont = rng.standard_normal((T, N, D)), _cont(T, N)
    layer = make_layer(LSTM % (H, ""), dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x, cont], dtype), make_blobs(1, dtype))
    ref, _, _ = _lstm_ref(x, cont, *(b.data.astype(np.float64) for b in layer.blobs))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    assert [b.shape for b in layer.blobs] == [(4 * H, D), (4 * H,), (4 * H, H)]


def test_lstm_static_and_exposed_hidden_forward():
    rng = np.random.default_rng(1)
    T, N, D, Ds, H = 3, 2, 4, 3, 5
    x, cont, xs = rng.standard_normal((T, N, D)), np.ones((T, N)), rng.standard_normal((N, Ds))
    h0, c0 = rng.standard_normal((1, N, H)), rng.standard_normal((1, N, H))
    layer = make_layer(LSTM % (H, "expose_hidden: true"))
    y, hT, cT = run_layer(layer, make_blobs([x, cont, xs, h0, c0]), make_blobs(3))
    W_xc, b_c, W_s, W_hc = (b.data for b in layer.blobs)
    assert W_s.shape == (4 * H, Ds)
    ref, h, c = _lstm_ref(x, cont, W_xc, b_c, W_hc, xs, W_s, h0[0], c0[0])
    np.testing.assert_allclose(y, ref, rtol=1e-10)
    np.testing.assert_allclose(hT[0], h, rtol=1e-10)
    np.testing.assert_allclose(cT[0], c, rtol=1e-10)


def test_lstm_carries_state_between_passes():
    rng = np.random.default_rng(2)
    x, cont = rng.standard_normal((2, 1, 3)), np.ones((2, 1))
    layer = make_layer(LSTM % (4, ""))
    bottom, top = make_blobs([x, cont]), make_blobs(1)
    first = run_layer(layer, bottom, top)[0]
    layer.forward(bottom, top)
    W = [b.data for b in layer.blobs]
    _, h, c = _lstm_ref(x, cont, *W)
    np.testing.assert_allclose(top[0].data, _lstm_ref(x, cont, *W, h=h, c=c)[0], rtol=1e-10)
    assert not np.allclose(top[0].data, first)


@pytest.mark.parametrize("text", [LSTM % (3, ""), RNN % (3, "")])
def test_recurrent_gradient(text):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 4))
    layer = make_layer(text)
    check_layer_gradient(layer, make_blobs([x, _cont(3, 2)]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("text,n_state", [(LSTM % (3, "expose_hidden: true"), 2),
                                          (RNN % (3, "expose_hidden: true"), 1)])
def test_recurrent_gradient_static_exposed(text, n_state):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 2, 4)), np.ones((3, 2)), rng.standard_normal((2, 3))]
    arrays += [rng.standard_normal((1, 2, 3)) for _ in range(n_state)]
    layer = make_layer(text)
    check_layer_gradient(layer, make_blobs(arrays), make_blobs(1 + n_state),
                         check_bottom=[0, 2] + [3 + k for k in range(n_state)])


def test_lstm_unit_forward_and_gradient():
    rng = np.random.default_rng(5)
    N, D = 3, 4
    c_prev, X, cont = rng.standard_normal((1, N, D)), rng.standard_normal((1, N, 4 * D)), np.array([[1., 0, 1]])
    for dtype in (np.float32, np.float64):
        layer = make_layer('type: "LSTMUnit"', dtype=dtype)
        c, h = run_layer(layer, make_blobs([c_prev, X, cont], dtype), make_blobs(2, dtype))
        i, f, o, g = _sig(X[0, :, :D]), _sig(X[0, :, D:2 * D]), _sig(X[0, :, 2 * D:3 * D]), np.tanh(X[0, :, 3 * D:])
        c_ref = cont.T * f * c_prev[0] + i * g
        np.testing.assert_allclose(c[0], c_ref, rtol=1e-5)
        np.testing.assert_allclose(h[0], o * np.tanh(c_ref), rtol=1e-5, atol=1e-6)
    check_layer_gradient(make_layer('type: "LSTMUnit"'), make_blobs([c_prev, X, cont]), make_blobs(2),
                         check_bottom=[0, 1])


@pytest.mark.parametrize("case", ["lstm", "rnn"])
def test_recurrent_matches_caffe(case):
    folder = shared_path("caffe-reference", case)
    data = np.load(os.path.join(folder, "data.npz"))
    weights = caffe_pb2.NetParameter()
    with open(os.path.join(folder, "weights.caffemodel"), "rb") as f:
        weights.ParseFromString(f.read())
    lp = [l for l in weights.layer if l.name == "L"][0]
    text = (LSTM if case == "lstm" else RNN) % (5, "")
    layer = make_layer(text, dtype=np.float32)
    layer.layer_param.blobs.extend(lp.blobs)
    layer = type(layer)(layer.layer_param, dtype=np.float32)
    bottom = make_blobs([data["top:x_s"], data["bottom:cont"]], np.float32)
    top = make_blobs(1, np.float32)
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_allclose(y, data["top:y"], rtol=1e-5, atol=1e-6)
    top[0].diff[...] = data["diff:y"]
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, data["diff:x_s"], rtol=1e-4, atol=1e-6)
    for i, b in enumerate(layer.blobs):
        np.testing.assert_allclose(b.diff, data["paramdiff:L:%d" % i], rtol=1e-4, atol=1e-6)
