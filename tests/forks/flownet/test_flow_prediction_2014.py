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


def test_resize_taps_and_gradient():
    x = np.arange(2 * 3 * 4, dtype=float).reshape(1, 2, 3, 4)
    layer = make_layer('type: "Resize" resize_param { height: 5 width: 2 }')
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 2, 5, 2)
    # rows read 0, 0.6, 1.2, 1.8, 2.4 (the last two rows' lower tap is past the border: dropped);
    # columns read 0 and 2
    r = np.array([0, 0.6, 1.2, 1.8, 2.4])
    for i, f in enumerate(r):
        i0, t = int(f), f - int(f)
        row = (1 - t) * x[0, 0, i0] + (t * x[0, 0, i0 + 1] if i0 + 1 < 3 else 0)
        np.testing.assert_allclose(y[0, 0, i], row[[0, 2]])
    x2 = np.random.default_rng(3).standard_normal((1, 2, 3, 4))
    check_layer_gradient(layer, make_blobs([x2]), make_blobs(1))
    y2, = run_layer(make_layer('type: "Resize" resize_param { is_pyramid_test: true '
                               'out_height_scale: 2 out_width_scale: 0.5 multiple_scale: 3 }'),
                    make_blobs([x]), make_blobs(1))
    assert y2.shape == (1, 2, 6, 2)
    np.testing.assert_allclose(y2[0, 0, 0], 3 * x[0, 0, 0, [0, 2]])
