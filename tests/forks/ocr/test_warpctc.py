"""warp-ctc forks' losses (WarpCTCLoss, xmfbit's CtcLoss), their helpers and the beam search."""
import itertools

import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(3)


def _indicators(lengths, T):
    ind = np.ones((T, len(lengths)))
    ind[0] = 0
    for n, ln in enumerate(lengths):
        ind[ln:, n] = 0
    return ind


def _time_major(targets, T):
    lab = -np.ones((T, len(targets)))
    for n, z in enumerate(targets):
        lab[:len(z), n] = z
    return lab


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_warp_ctc_loss_hand_computed_in_each_bottom_form():
    y = np.array([[[0.3, 0.7]], [[0.6, 0.4]]])           # T = 2, N = 1, C = 2, blank 0
    x = np.log(y)
    want = -np.log(0.7 * 0.4 + 0.7 * 0.6 + 0.3 * 0.4)   # paths 11, 1b, b1 collapse to "1"
    text = 'type: "WarpCTCLoss" ctc_loss_param { blank_index: 0 }'
    (two,) = run_layer(make_layer(text), make_blobs([x, np.array([[1, 0, 0]])]), make_blobs(1))
    # 3 bottoms: 0-based labels shifted by +1 when the blank is 0 (caffe_ocr)
    (three,) = run_layer(make_layer(text), make_blobs([x, _indicators([2], 2),
                                                       _time_major([[0]], 2)]), make_blobs(1))
    (four,) = run_layer(make_layer(text), make_blobs([x, np.array([2]), np.array([1]),
                                                      np.array([[1]])]), make_blobs(1))
    np.testing.assert_allclose([two, three, four], want)


def test_warp_ctc_loss_matches_ctc_loss_and_gradient():
    T, N, C = 5, 3, 4
    x = RNG.standard_normal((T, N, C))
    lengths, targets = [5, 4, 5], [[0, 1], [2, 2], [1]]
    ind, lab = _indicators(lengths, T), _time_major(targets, T)
    warp = make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: 0 }')
    (loss,) = run_layer(warp, make_blobs([x, ind, lab]), make_blobs(1))
    # ChWick's CTCLoss with the blank at 0 and the labels it sees (shifted by one)
    chwick = make_layer('type: "CTCLoss" ctc_loss_param { blank_index: 0 }')
    (want,) = run_layer(chwick, make_blobs([x, ind, lab + (lab >= 0)]), make_blobs(1))
    assert np.isclose(loss, want)
    bottom, top = make_blobs([x, ind, lab]), make_blobs(1)
    run_layer(warp, bottom, top)
    top[0].diff[...] = 1.0
    warp.backward(top, [True, False, False], bottom)
    assert np.all(bottom[0].diff[4:, 1] == 0)           # beyond sequence 1's length 4
    np.testing.assert_allclose(bottom[0].diff.sum(axis=2), 0, atol=1e-12)  # y - posterior
    one = make_blobs([x[:, :1], _indicators([5], T), _time_major([[0, 1]], T)])
    check_layer_gradient(warp, one, make_blobs(1), check_bottom=[0])


def test_warp_ctc_loss_infeasible_and_bad_input():
    x = RNG.standard_normal((2, 2, 3))
    layer = make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: 2 }')
    bottom, top = make_blobs([x, np.array([[1, 1], [0, 2]])]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)             # row 0: "1 1" needs 3 steps: cost 0
    y = _softmax(x[:, 1])
    p = y[0, 0] * y[1, 0] + y[0, 0] * y[1, 2] + y[0, 2] * y[1, 0]
    assert np.isclose(loss, -np.log(p) / 2)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    assert np.all(bottom[0].diff[:, 0] == 0)
    with pytest.raises(NetError, match="blank_index -1"):
        run_layer(make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: -1 }'),
                  make_blobs([x, np.array([[1], [0]])]), make_blobs(1))
    # unset: blank 0 (caffe_ocr's default), so label 0 is padding
    (a,) = run_layer(make_layer('type: "WarpCTCLoss"'), make_blobs([x, np.array([[1, 0], [2, 0]])]),
                     make_blobs(1))
    (b,) = run_layer(make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: 0 }'),
                     make_blobs([x, np.array([[1], [2]])]), make_blobs(1))
    assert np.isclose(a, b)
    with pytest.raises(NetError, match="labels for"):
        run_layer(make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: 0 }'),
                  make_blobs([x, _indicators([1, 2], 2), _time_major([[0, 1], [0]], 2)]),
                  make_blobs(1))


def test_xmfbit_ctc_loss_continuation_and_accuracy():
    T, N, C = 6, 2, 4
    x = RNG.standard_normal((T, N, C))
    lab = np.array([[1, 2, 0], [3, 0, 0]])              # blank_label 0 pads
    text = 'type: "CtcLoss" ctc_loss_param { alphabet_size: 4 time_step: 5 blank_label: 0 }'
    layer = make_layer(text)
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    warp = make_layer('type: "WarpCTCLoss" ctc_loss_param { blank_index: 0 }')
    (want,) = run_layer(warp, make_blobs([x[:5], lab]), make_blobs(1))  # time_step 5 of T = 6
    assert np.isclose(loss, want)
    top[0].diff[...] = 0.5                                   # xmfbit scales by the top diff
    layer.backward(top, [True, False], bottom)
    assert np.all(bottom[0].diff[5] == 0)
    check_layer_gradient(make_layer(text), make_blobs([x[:, :1], lab[:1]]), make_blobs(1),
                         check_bottom=[0])
    with pytest.raises(NetError, match="alphabet_size"):
        run_layer(make_layer(text.replace("alphabet_size: 4", "alphabet_size: 5")),
                  make_blobs([x, lab]), make_blobs(1))
    (ind,) = run_layer(make_layer('type: "ContinuationIndicator" continuation_indicator_param '
                                  '{ time_step: 3 batch_size: 2 }'), [], make_blobs(1))
    np.testing.assert_array_equal(ind, [[0, 0], [1, 1], [1, 1]])
    best = np.array([[1, 1, 0, 2, 2, 0], [3, 0, 3, 3, 0, 0]])   # N x T best classes
    scores = np.full((2, 6, 4), -1.0)
    for n, t in itertools.product(range(2), range(6)):
        scores[n, t, best[n, t]] = 1.0
    acc_layer = make_layer('type: "LabelsequenceAccuracy"')
    (acc,) = run_layer(acc_layer, make_blobs([scores, np.array([[1, 2, 0], [3, 0, 0]])]),
                       make_blobs(1))
    assert acc == 0.5                                      # "1 2" matches, "3 3" is not "3"
    (acc,) = run_layer(acc_layer, make_blobs([scores, np.array([[1, 2, 0], [3, 3, 0]])]),
                       make_blobs(1))
    assert acc == 1.0


def _best_labelling(y, blank):
    """The most probable labelling, by summing every path of length T."""
    total = {}
    T, C = y.shape
    for path in itertools.product(range(C), repeat=T):
        lab = tuple(c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1]))
        total[lab] = total.get(lab, 0.0) + np.prod([y[t, c] for t, c in enumerate(path)])
    return max(total.items(), key=lambda kv: kv[1])


def test_beam_search_beats_greedy_where_they_differ():
    y = np.array([[[0.4, 0.6]], [[0.4, 0.6]]])          # label 0, blank 1
    x = np.log(y)
    bottom = make_blobs([x, _indicators([2], 2)])
    (greedy, gscore) = run_layer(make_layer('type: "CTCGreedyDecoder"'), bottom, make_blobs(2))
    seq, score = run_layer(make_layer('type: "CTCBeamSearchDecoder" ctc_decoder_param '
                                      '{ beam_width: 4 top_paths: 2 }'), bottom, make_blobs(2))
    assert greedy[0, 0, 0, 0] == -1                      # best path "b b": the empty labelling
    # beam: p("0") = 0.4 * 0.4 + 0.4 * 0.6 + 0.6 * 0.4 = 0.64 > p("") = 0.36
    np.testing.assert_array_equal(seq[0, :, :, 0], [[0, -1], [-1, -1]])
    np.testing.assert_allclose(score.reshape(-1), [-np.log(0.64), -np.log(0.36)])


def test_beam_search_finds_the_best_labelling():
    T, N, C = 4, 3, 3
    x = RNG.standard_normal((T, N, C)) * 2
    lengths = [4, 3, 4]
    layer = make_layer('type: "CTCBeamSearchDecoder" ctc_decoder_param { beam_width: 64 }')
    targets = _time_major([[0], [1, 0], [0, 1]], T)
    seq, score, acc = run_layer(layer, make_blobs([x, _indicators(lengths, T), targets]),
                                make_blobs(3))
    hits = 0
    for n in range(N):
        lab, p = _best_labelling(_softmax(x[:lengths[n], n]), C - 1)
        got = [int(v) for v in seq[n, :, 0, 0] if v >= 0]
        assert got == list(lab)
        assert np.isclose(score[n, 0, 0, 0], -np.log(p))
        hits += got[:len([v for v in targets[:, n] if v >= 0])] == [
            int(v) for v in targets[:, n] if v >= 0]
    assert acc.reshape(-1)[0] == hits / N
    with pytest.raises(NetError, match="merge_repeated"):
        make_layer('type: "CTCBeamSearchDecoder" ctc_decoder_param { ctc_merge_repeated: false }'
                   ).setup(make_blobs([x, _indicators(lengths, T)]), make_blobs(1))


# xmfbit/warpctc-caffe's examples/warpctc_captcha/lstm_ctc.prototxt facts (data N x 1 x H x W
# permuted to W x N x 1 x H, ContinuationIndicator, two LSTMs, InnerProduct on axis 2 to 10 digits
# + blank 10, CtcLoss, batch-first scores for LabelsequenceAccuracy), shrunk.
CAPTCHA = """
name: "lstm_ctc_net"
layer { name: "data" type: "Input" top: "data" top: "label"
  input_param { shape { dim: %(n)d dim: 1 dim: 4 dim: 8 } shape { dim: %(n)d dim: 3 } } }
layer { name: "indicator" type: "ContinuationIndicator" top: "indicator"
  continuation_indicator_param { time_step: 8 batch_size: %(n)d } }
layer { name: "permuted_data" type: "Permute" bottom: "data" top: "permuted_data"
  permute_param { order: 3 order: 0 order: 1 order: 2 } }
layer { name: "lstm1" type: "LSTM" bottom: "permuted_data" bottom: "indicator" top: "lstm1"
  recurrent_param { num_output: 6 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0 } } }
layer { name: "fc1" type: "InnerProduct" bottom: "lstm1" top: "fc1"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 11 axis: 2 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0 } } }
layer { name: "ctc_loss" type: "CtcLoss" bottom: "fc1" bottom: "label" top: "ctc_loss"
  loss_weight: 1.0 ctc_loss_param { blank_label: 10 alphabet_size: 11 time_step: 8 } }
layer { name: "permute_fc" type: "Permute" bottom: "fc1" top: "premuted_fc"
  include { phase: TEST } permute_param { order: 1 order: 0 order: 2 } }
layer { name: "accuracy" type: "LabelsequenceAccuracy" bottom: "premuted_fc" bottom: "label"
  top: "accuracy" include { phase: TEST } labelsequence_accuracy_param { blank_label: 10 } }
"""


def _feed(net, n):
    net.blobs["data"].data[...] = RNG.standard_normal((n, 1, 4, 8))
    net.blobs["label"].data[...] = np.array([[3, 1, 10], [7, 7, 2]])[:n]


def test_captcha_net_forward_and_train_step():
    net = Net(CAPTCHA % {"n": 1}, caffe_pb2.TEST)
    _feed(net, 1)
    net.forward()
    assert np.isfinite(float(net.blobs["ctc_loss"].data))
    assert 0 <= float(net.blobs["accuracy"].data) <= 1
    param = caffe_pb2.NetParameter()
    text_format.Parse(CAPTCHA % {"n": 2}, param)
    solver = get_solver('net_param { %s } base_lr: 0.1 lr_policy: "fixed" random_seed: 1'
                        % text_format.MessageToString(param), dtype=np.float64)
    _feed(solver.net, 2)
    before = solver.net.params["fc1"][0].data.copy()
    solver.step(1)
    assert np.isfinite(float(solver.net.blobs["ctc_loss"].data))
    assert np.abs(solver.net.params["fc1"][0].data - before).max() > 0
