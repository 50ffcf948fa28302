"""Arroosh/optical_flow_prediction's 2014 MultiSoftmax and MultiSoftmaxWithLoss
(forks/flownet/flow_prediction_2014.py)."""
import numpy as np

from caffepy.proto import io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_multi_softmax_value_and_gradient():
    x = np.random.default_rng(0).standard_normal((2, 4, 2, 3))
    y, = run_layer(make_layer('type: "MultiSoftmax" mult_softmax_param { max_multiple: 3 }'),
                   make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, 3 * _softmax(x))
    check_layer_gradient(make_layer('type: "MultiSoftmax"'), make_blobs([x]), make_blobs(1))


def test_multi_softmax_loss_one_based_labels_and_gradient():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 2, 2))
    lab = rng.integers(1, 5, (2, 1, 2, 2)).astype(float)
    layer = make_layer('type: "MultiSoftmaxWithLoss"')
    loss, = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    p = _softmax(x)
    want = -sum(np.log(p[n, int(lab[n, 0, h, w]) - 1, h, w])
                for n in range(2) for h in range(2) for w in range(2)) / 2
    np.testing.assert_allclose(float(loss), want)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
    # learning_multiple scales the gradient only
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    g1 = bottom[0].diff.copy()
    l2 = make_layer('type: "MultiSoftmaxWithLoss" mult_softmax_loss_param { learning_multiple: 4 }')
    loss2, = run_layer(l2, bottom, top)
    assert np.isclose(float(loss2), want)
    top[0].diff[...] = 1.0
    l2.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, 4 * g1)


def test_v1_file_reads():
    net = io.read_net('layers { name: "s" type: MULTI_SOFTMAX bottom: "a" top: "b" '
                      'mult_softmax_param { max_multiple: 2 } } layers { name: "l" '
                      'type: MULTI_SOFTMAX_LOSS bottom: "a" bottom: "lab" top: "loss" '
                      'mult_softmax_loss_param { learning_multiple: 3 } }')
    assert [l.type for l in net.layer] == ["MultiSoftmax", "MultiSoftmaxWithLoss"]
    assert net.layer[1].mult_softmax_loss_param.learning_multiple == 3
