import itertools

import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def brute_force_p(y, z, blank, merge=True):
    """p(z | x) by summing every path of length T whose collapse is z."""
    T, C = y.shape
    total = 0.0
    for path in itertools.product(range(C), repeat=T):
        seq = [c for i, c in enumerate(path) if not (merge and i and c == path[i - 1])]
        if [c for c in seq if c != blank] == list(z):
            total += np.prod([y[t, c] for t, c in enumerate(path)])
    return total


def _blobs(x, lengths, targets):
    T, N, _ = x.shape
    ind = np.ones((T, N))
    ind[0] = 0
    lab = -np.ones((T, N))
    for n, (ln, z) in enumerate(zip(lengths, targets)):
        if ln < T:
            ind[ln:, n] = 0
        lab[:len(z), n] = z
    return make_blobs([x, ind, lab])


def test_ctc_loss_hand_computed():
    x = np.log(np.array([[[0.7, 0.3]], [[0.4, 0.6]]]))  # T = 2, N = 1, C = 2 (blank = 1)
    (loss,) = run_layer(make_layer('type: "CTCLoss"'), _blobs(x, [2], [[0]]), make_blobs(1))
    p = 0.7 * 0.4 + 0.7 * 0.6 + 0.3 * 0.4   # paths 00, 0b, b0
    assert np.isclose(loss, -np.log(p))


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_loss_matches_path_enumeration(merge):
    T, N, C = 5, 3, 3
    x = RNG.standard_normal((T, N, C))
    lengths, targets = [5, 4, 5], [[0, 1], [1, 1], [0]]
    text = 'type: "CTCLoss" ctc_loss_param { ctc_merge_repeated: %s }' % str(merge).lower()
    (loss,) = run_layer(make_layer(text), _blobs(x, lengths, targets), make_blobs(1))
    y = _softmax(x)
    want = -sum(np.log(brute_force_p(y[:ln, n], z, C - 1, merge))
                for n, (ln, z) in enumerate(zip(lengths, targets))) / N
    assert np.isclose(loss, want)


def test_ctc_loss_gradient_and_fork_scaling():
    x = RNG.standard_normal((5, 1, 4))
    layer = make_layer('type: "CTCLoss" ctc_loss_param { blank_index: 0 }')
    check_layer_gradient(layer, _blobs(x, [4], [[2, 3]]), make_blobs(1), check_bottom=[0])
    # N = 2: the loss is divided by N, the fork's gradient is not
    x2 = RNG.standard_normal((4, 2, 3))
    bottom, top = _blobs(x2, [4, 3], [[0], [1, 0]]), make_blobs(1)
    layer = make_layer('type: "CTCLoss"')
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False, False], bottom)
    eps, n, t, c = 1e-6, 1, 1, 2
    bottom[0].data[t, n, c] += eps
    layer.forward(bottom, top)
    up = float(top[0].data)
    bottom[0].data[t, n, c] -= 2 * eps
    layer.forward(bottom, top)
    numeric = (up - float(top[0].data)) / (2 * eps)
    assert np.isclose(bottom[0].diff[t, n, c], 2 * numeric, rtol=1e-5)
    assert np.all(bottom[0].diff[3:, 1] == 0)  # beyond sequence 1's length 3


def test_ctc_loss_rejects_bad_labels():
    with pytest.raises(NetError, match="blank"):
        run_layer(make_layer('type: "CTCLoss"'), _blobs(np.zeros((3, 1, 3)), [3], [[2]]),
                  make_blobs(1))


def test_ctc_greedy_decoder():
    b = 3
    path = [[0, 0, b, 1, 1, b], [2, b, 2, 2, b, b]]
    x = np.full((6, 2, 4), -1.0)
    for n, p in enumerate(path):
        for t, c in enumerate(p):
            x[t, n, c] = 2.0
    bottom = _blobs(x, [6, 4], [[0, 1], [2, 2]])
    seq, score, acc = run_layer(make_layer('type: "CTCGreedyDecoder"'), bottom, make_blobs(3))
    np.testing.assert_array_equal(seq[:, :, 0, 0], [[0, 1, -1, -1, -1, -1],
                                                     [2, 2, -1, -1, -1, -1]])
    np.testing.assert_allclose(score.reshape(-1), [-12, -8])
    assert acc.reshape(-1)[0] == 1.0
    (raw,) = run_layer(make_layer('type: "CTCGreedyDecoder" ctc_decoder_param { '
                                  'ctc_merge_repeated: false }'), bottom[:2], make_blobs(1))
    np.testing.assert_array_equal(raw[0, :4, 0, 0], [0, 0, 1, 1])


# ChWick's examples/ctc dummy net facts (LSTM over T x N x D data with sequence indicators,
# InnerProduct on axis 2 to classes + blank, CTCLoss), with the greedy decoder for testing.
CRNN = """
name: "ctc-mini"
layer { name: "data" type: "Input" top: "data" top: "seq_ind" top: "labels"
  input_param { shape { dim: 6 dim: 2 dim: 5 } shape { dim: 6 dim: 2 } shape { dim: 6 dim: 2 } } }
layer { name: "lstm1" type: "LSTM" bottom: "data" bottom: "seq_ind" top: "lstm1"
  recurrent_param { num_output: 8 weight_filler { type: "gaussian" std: 0.1 }
                    bias_filler { type: "constant" } } }
layer { name: "ip1" type: "InnerProduct" bottom: "lstm1" top: "ip1"
  inner_product_param { num_output: 4 axis: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "CTCLoss" bottom: "ip1" bottom: "seq_ind" bottom: "labels"
  top: "ctc_loss" include { phase: TRAIN } }
layer { name: "decoder" type: "CTCGreedyDecoder" bottom: "ip1" bottom: "seq_ind"
  bottom: "labels" top: "decoded" top: "accuracy" include { phase: TEST } }
"""


def _feed(net):
    blobs = _blobs(RNG.standard_normal((6, 2, 5)), [6, 5], [[0, 2], [1]])
    for name, b in zip(("data", "seq_ind", "labels"), blobs):
        net.blobs[name].data[...] = b.data


def test_crnn_forward_and_train_step():
    net = Net(CRNN, caffe_pb2.TEST)
    _feed(net)
    net.forward()
    assert net.blobs["decoded"].shape == (2, 6, 1, 1)
    param = caffe_pb2.NetParameter()
    text_format.Parse(CRNN, param)
    solver = get_solver('net_param { %s } base_lr: 0.1 lr_policy: "fixed" random_seed: 1'
                        % text_format.MessageToString(param), dtype=np.float64)
    _feed(solver.net)
    before = solver.net.params["ip1"][0].data.copy()
    solver.step(1)
    assert np.isfinite(float(solver.net.blobs["ctc_loss"].data))
    assert np.abs(solver.net.params["ip1"][0].data - before).max() > 0
