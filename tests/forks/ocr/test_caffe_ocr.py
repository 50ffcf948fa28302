"""senlinuc/caffe_ocr's Lstm, Reverse, Transpose, CTCGreedyDecoder forms and a CRNN net."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(11)


def _s(v):
    return 1 / (1 + np.exp(-v))


def test_lstm_hand_computed_two_steps():
    layer = make_layer('type: "Lstm" lstm_param { num_output: 1 weight_filler { type: "constant" '
                       'value: 0.5 } bias_filler { type: "constant" value: 0.1 } }')
    x = np.array([[[1.0]], [[-2.0]]])                     # T = 2, N = 1, I = 1
    (h,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    a0 = 0.5 * 1 + 0.1                                    # every gate: W_i x + b
    c0 = _s(a0) * np.tanh(a0)                             # forget gate 0 at t = 0
    h0 = _s(a0) * np.tanh(c0)
    a1 = 0.5 * -2 + 0.1 + 0.5 * h0                        # + W_h h_0
    c1 = _s(a1) * c0 + _s(a1) * np.tanh(a1)
    np.testing.assert_allclose(h.reshape(-1), [h0, _s(a1) * np.tanh(c1)])


def test_lstm_gradient_and_clipping():
    x = RNG.standard_normal((3, 2, 3))
    text = ('type: "Lstm" lstm_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } '
            'bias_filler { type: "gaussian" std: 0.5 } }')
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    clipped = make_layer(text.replace("num_output: 2", "num_output: 2 clipping_threshold: 0.01"))
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(clipped, bottom, top)
    top[0].diff[...] = 10.0
    clipped.backward(top, [True], bottom)
    bias_grad = clipped.blobs[2].diff                     # the sum of clipped pre-gate gradients
    assert np.all(np.abs(bias_grad) <= 0.01 * 6 + 1e-12)
    with pytest.raises(NetError):
        run_layer(make_layer(text), make_blobs([x, np.ones((3, 2))]), make_blobs(1))


def test_reverse_and_transpose():
    x = RNG.standard_normal((3, 2, 4))
    rev = make_layer('type: "Reverse" reverse_param { axis: 0 }')
    (y,) = run_layer(rev, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x[::-1])
    check_layer_gradient(rev, make_blobs([x]), make_blobs(1))
    tr = make_layer('type: "Transpose" transpose_param { dim: 2 dim: 0 dim: 1 }')
    (y,) = run_layer(tr, make_blobs([x]), make_blobs(1))
    assert y.shape == (4, 3, 2) and y[1, 2, 0] == x[2, 0, 1]
    check_layer_gradient(tr, make_blobs([x]), make_blobs(1))
    with pytest.raises(NetError, match="permutation"):
        run_layer(make_layer('type: "Transpose" transpose_param { dim: 0 dim: 0 dim: 1 }'),
                  make_blobs([x]), make_blobs(1))


def test_caffe_ocr_greedy_decoder_forms():
    best = np.array([[1, 1, 0, 2, 0, 3], [0, 4, 4, 0, 4, 0]])      # N x T, blank 0
    x = np.full((6, 2, 5), -1.0)
    for n in range(2):
        x[np.arange(6), n, best[n]] = 1.0
    one = 'type: "CTCGreedyDecoder" bottom: "fc1x" top: "result"'   # the layer's blob names
    (seq,) = run_layer(make_layer(one), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(seq[:, :, 0, 0], [[1, 2, 3, -1, -1, -1],
                                                     [4, 4, -1, -1, -1, -1]])
    labels = np.array([[1, 2, 3, -1], [4, 0, 0, -1]])       # blank entries are skipped
    two = 'type: "CTCGreedyDecoder" bottom: "fc1x" bottom: "label" top: "acc"'
    (acc,) = run_layer(make_layer(two), make_blobs([x, labels]), make_blobs(1))
    # row 0 exact; row 1: "4 4" against "4", edit distance 1 over length 2
    np.testing.assert_allclose(acc.reshape(-1), [1 - (0 + 0.5) / 2, 0.5])


CRNN = """
name: "caffe_ocr-mini"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: %(n)d dim: 1 dim: 4 dim: 8 } shape { dim: %(n)d dim: 3 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 3 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "pool" type: "Pooling" bottom: "conv1" top: "pool"
  pooling_param { pool: AVE kernel_h: 4 kernel_w: 1 stride_h: 1 stride_w: 1 } }
layer { name: "pool_transpose" type: "Transpose" bottom: "pool" top: "pool_transpose"
  transpose_param { dim: 3 dim: 2 dim: 0 dim: 1 } }
layer { name: "blstm_input" type: "Reshape" bottom: "pool_transpose" top: "blstm_input"
  reshape_param { shape { dim: -1 } axis: 1 num_axes: 2 } }
layer { name: "lstm1" type: "Lstm" bottom: "blstm_input" top: "lstm1"
  lstm_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 }
    bias_filler { type: "constant" value: 0 } } }
layer { name: "lstm1-reverse1" type: "Reverse" bottom: "blstm_input" top: "rlstm1_input"
  reverse_param { axis: 0 } }
layer { name: "rlstm1" type: "Lstm" bottom: "rlstm1_input" top: "rlstm1-output"
  lstm_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 }
    bias_filler { type: "constant" value: 0 } } }
layer { name: "lstm1-reverse2" type: "Reverse" bottom: "rlstm1-output" top: "rlstm1"
  reverse_param { axis: 0 } }
layer { name: "blstm1" type: "Concat" bottom: "lstm1" bottom: "rlstm1" top: "blstm1"
  concat_param { axis: 2 } }
layer { name: "fc1x" type: "InnerProduct" bottom: "blstm1" top: "fc1x"
  inner_product_param { axis: 2 num_output: 6 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0 } } }
layer { name: "ctcloss" type: "WarpCTCLoss" bottom: "fc1x" bottom: "label" top: "ctcloss"
  loss_weight: 1 }
layer { name: "acc" type: "CTCGreedyDecoder" bottom: "fc1x" bottom: "label" top: "acc"
  include { phase: TEST } }
"""


def test_caffe_ocr_crnn_forward_and_train_step():
    from google.protobuf import text_format
    from caffepy.net import Net
    from caffepy.solvers import get_solver
    net = Net(CRNN % {"n": 1}, caffe_pb2.TEST)
    net.blobs["data"].data[...] = RNG.standard_normal((1, 1, 4, 8))
    net.blobs["label"].data[...] = [[2, 5, 0]]
    net.forward()
    assert net.blobs["fc1x"].shape == (8, 1, 6)
    assert np.isfinite(float(net.blobs["ctcloss"].data)) and net.blobs["acc"].shape == (1, 2, 1, 1)
    param = caffe_pb2.NetParameter()
    text_format.Parse(CRNN % {"n": 2}, param)
    solver = get_solver('net_param { %s } base_lr: 0.1 lr_policy: "fixed" random_seed: 1'
                        % text_format.MessageToString(param), dtype=np.float64)
    solver.net.blobs["data"].data[...] = RNG.standard_normal((2, 1, 4, 8))
    solver.net.blobs["label"].data[...] = [[2, 5, 0], [1, 1, 3]]
    before = solver.net.params["lstm1"][1].data.copy()
    solver.step(1)
    assert np.isfinite(float(solver.net.blobs["ctcloss"].data))
    assert np.abs(solver.net.params["lstm1"][1].data - before).max() > 0


def test_greedy_decoder_with_chwick_indicators_stays_chwick():
    x = RNG.standard_normal((5, 2, 4))
    ind = np.ones((5, 2))
    ind[0] = 0
    ind[3:, 1] = 0                                          # sequence 1 lasts 3 steps
    named = make_layer('type: "CTCGreedyDecoder" bottom: "x" bottom: "ind" top: "seq"')
    (seq,) = run_layer(named, make_blobs([x, ind]), make_blobs(1))
    (want,) = run_layer(make_layer('type: "CTCGreedyDecoder"'), make_blobs([x, ind]),
                        make_blobs(1))
    np.testing.assert_array_equal(seq, want)
    assert seq.shape == (2, 5, 1, 1)


CLIP_LSTM = ('type: "Lstm" bottom: "x" bottom: "clip" lstm_param { num_output: 3 batch_size: 2 '
             'weight_filler { type: "uniform" min: -0.5 max: 0.5 } '
             'bias_filler { type: "uniform" min: -0.5 max: 0.5 } }')


def _clip_lstm_ref(x, clip, wi, wh, b, h0, c0):
    """Per-stream loop of junhyukoh/caffe-lstm's Lstm: rows t * N + n."""
    sig = lambda v: 1 / (1 + np.exp(-v))      # noqa: E731
    H, N = wh.shape[1], h0.shape[0]
    T = x.shape[0] // N
    out, h, c = np.zeros((T * N, H)), h0.copy(), c0.copy()
    for t in range(T):
        for n in range(N):
            r = t * N + n
            cont = clip[r] != 0
            a = wi @ x[r].reshape(-1) + b + (wh @ h[n] if cont else 0)
            i, f, o, g = sig(a[:H]), sig(a[H:2 * H]) if cont else 0, sig(a[2 * H:3 * H]), \
                np.tanh(a[3 * H:])
            c[n] = f * c[n] + i * g
            h[n] = o * np.tanh(c[n])
            out[r] = h[n]
    return out, h, c


def test_clip_lstm_values_state_and_gradient():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4 * 2, 2, 2))               # T = 4 steps of N = 2 streams, I = 4
    clip = np.array([0, 0, 1, 1, 0, 1, 1, 1], dtype=float)
    layer = make_layer(CLIP_LSTM)
    bottom, top = make_blobs([x, clip]), make_blobs(1)
    run_layer(layer, bottom, top)
    wi, wh, b = (blob.data for blob in layer.blobs)
    ref, h, c = _clip_lstm_ref(x, clip, wi, wh, b, np.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_allclose(top[0].data, ref, atol=1e-12)
    # the next batch continues from the last state where its first flags are 1
    x2 = rng.standard_normal(x.shape)
    clip2 = np.array([1, 0, 1, 1, 1, 1, 0, 1], dtype=float)
    bottom2 = make_blobs([x2, clip2])
    layer.forward(bottom2, top)
    ref2, _, _ = _clip_lstm_ref(x2, clip2, wi, wh, b, h, c)
    np.testing.assert_allclose(top[0].data, ref2, atol=1e-12)
    # gradient: every sequence starts in this batch (the carried state is not read)
    check_layer_gradient(make_layer(CLIP_LSTM), make_blobs([x, clip]), make_blobs(1),
                         check_bottom=[0])


def test_one_bottom_lstm_is_still_caffe_ocr_form():
    layer = make_layer('type: "Lstm" lstm_param { num_output: 2 }')
    (y,) = run_layer(layer, make_blobs([np.zeros((3, 2, 4))]), make_blobs(1))
    assert type(layer).__name__ == "LstmLayer" and y.shape == (3, 2, 2)
