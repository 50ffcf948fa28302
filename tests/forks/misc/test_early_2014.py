"""2014 forks' InvertGradient, LabelToOnehot and NaN2Zero (forks/misc/early_2014.py)."""
import math

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_invert_gradient_reverses_with_its_schedule():
    layer = make_layer('type: "InvertGradient" coeff_schedule_param { gamma: 0.5 '
                       'initial_coeff: 0.2 final_coeff: 1 }')
    x = np.arange(6.0).reshape(2, 3)
    bottom, top = make_blobs([x]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    np.testing.assert_array_equal(y, x)
    for i in range(1, 3):
        coeff = layer.coeff
        top[0].diff[...] = 1.0
        layer.backward(top, [True], bottom)
        np.testing.assert_allclose(bottom[0].diff, -coeff * np.ones((2, 3)))
        np.testing.assert_allclose(layer.coeff,
                                   0.2 + 0.8 * (2 / (1 + math.exp(-0.5 * i)) - 1))


def test_label_to_onehot():
    layer = make_layer('type: "LabelToOnehot" inner_product_param { num_output: 4 }')
    y, = run_layer(layer, make_blobs([np.array([2.0, 0.0, 3.0]).reshape(3, 1, 1, 1)]),
                   make_blobs(1))
    np.testing.assert_array_equal(y.reshape(3, 4), np.eye(4)[[2, 0, 3]])
    with pytest.raises(NetError, match="outside"):
        run_layer(layer, make_blobs([np.array([4.0]).reshape(1, 1, 1, 1)]), make_blobs(1))


def test_nan2zero_value_and_gradient():
    x = np.array([[1.0, np.nan, -2.0, 3.0]])
    y, = run_layer(make_layer('type: "NaN2Zero"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, [[1.0, 0.0, -2.0, 3.0]])
    check_layer_gradient(make_layer('type: "NaN2Zero"'),
                         make_blobs([np.random.default_rng(0).standard_normal((2, 3))]),
                         make_blobs(1))


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax_kl_loss_value_and_gradient():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4, 1, 1)), rng.standard_normal((3, 4, 1, 1))
    layer = make_layer('type: "SoftmaxKLLoss" loss_param { coeff: 2 }')
    loss, = run_layer(layer, make_blobs([a, b]), make_blobs(1))
    p, q = _softmax(a.reshape(3, 4)), _softmax(b.reshape(3, 4))
    np.testing.assert_allclose(float(loss), 2 * np.sum(p * np.log(p / q)) / 3)
    check_layer_gradient(layer, make_blobs([a, b]), make_blobs(1))


@pytest.mark.parametrize("coeff", [1.0, -0.5])
def test_softmax_entropy_loss_value_and_gradient(coeff):
    x = np.random.default_rng(4).standard_normal((2, 5))
    layer = make_layer('type: "SoftmaxEntropyLoss" loss_param { coeff: %g }' % coeff)
    loss, = run_layer(layer, make_blobs([x]), make_blobs(1))
    p = _softmax(x)
    m = np.log(5) * coeff if coeff < 0 else 0.0
    np.testing.assert_allclose(float(loss), -m - coeff * np.sum(p * np.log(p)) / 2)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_multi_label_loss_value_and_gradient():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 1, 1)) * 3
    t = rng.choice([-1.0, 0.0, 1.0], (3, 4, 1, 1))
    layer = make_layer('type: "MultiLabelLoss"')
    loss, sig = run_layer(layer, make_blobs([x, t]), make_blobs(2))
    p = 1 / (1 + np.exp(-x))
    want = -(np.log(p[t > 0]).sum() + np.log(1 - p[t < 0]).sum()) / 3
    np.testing.assert_allclose(float(loss), want)
    np.testing.assert_allclose(sig, p)
    check_layer_gradient(layer, make_blobs([x, t]), make_blobs(1), check_bottom=[0])


def test_multi_label_accuracy_per_label():
    x = np.array([[1.0, -1.0, 0.0], [-2.0, 3.0, 1.0]]).reshape(2, 3, 1, 1)
    t = np.array([[1.0, -1.0, 1.0], [1.0, 0.0, -1.0]]).reshape(2, 3, 1, 1)
    acc, = run_layer(make_layer('type: "MultiLabelAccuracy"'), make_blobs([x, t]),
                     make_blobs(1))
    # label 0: right, wrong; label 1: right, (0: nothing); label 2: 0 > 0 is not, wrong
    np.testing.assert_allclose(acc.ravel(), [0.5, 0.5, 0.0])


def test_onehot_and_invert_coding():
    idx = make_blobs([np.array([1.0, 0.0]).reshape(2, 1, 1, 1)])
    y, = run_layer(make_layer('type: "Onehot" onehot_param { dim: 3 }'), idx, make_blobs(1))
    np.testing.assert_array_equal(y.reshape(2, 3), [[0, 1, 0], [1, 0, 0]])
    y, = run_layer(make_layer('type: "Onehot" onehot_param { dim: 3 invert_coding: true }'),
                   idx, make_blobs(1))
    np.testing.assert_array_equal(y.reshape(2, 3), [[1, 0, 1], [0, 1, 1]])


def test_semi_accuracy():
    x = np.array([0.5, -1.0, 2.0, 0.1]).reshape(4, 1, 1, 1)
    lab = np.array([-1.0, -2.0, -2.0, 3.0]).reshape(4, 1, 1, 1)
    acc, = run_layer(make_layer('type: "SemiAccuracy"'), make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_allclose(acc.ravel(), [0.5])


def test_label_transform(tmp_path):
    (tmp_path / "t.txt").write_text("2 -1\n0 1\n")
    layer = make_layer('type: "LabelTransform" label_transform_param { label_transform_file: '
                       '"%s" }' % (tmp_path / "t.txt"))
    y, = run_layer(layer, make_blobs([np.array([3.0, 0.0, 1.0]).reshape(3, 1, 1, 1)]),
                   make_blobs(1))
    np.testing.assert_array_equal(y.ravel(), [1, 2, -1])
    with pytest.raises(NetError, match="no entry"):
        run_layer(layer, make_blobs([np.array([4.0]).reshape(1, 1, 1, 1)]), make_blobs(1))
