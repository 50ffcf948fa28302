import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

OBJ = 'type: "SoftmaxWithLossObjectness" loss_param { ignore_label: 255 }'
EXP = 'type: "SoftmaxWithLossExpectation" loss_param { ignore_label: 255 }'


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_objectness_values_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 2))
    label = np.full((2, 1, 2, 2), 255.0)
    label[0, 0, 0, 0], label[1, 0, 1, 1] = 2, 0
    obj = rng.integers(0, 256, (2, 1, 2, 2)).astype(float)
    lab = np.concatenate([label, obj], axis=1)
    layer = make_layer(OBJ)
    (loss,) = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    p = _softmax(x.reshape(2, 3, 4))
    ref = 0.0
    for n in range(2):
        for j in range(4):
            lv = label[n, 0].ravel()[j]
            if lv == 255:
                pb = 1 - obj[n, 0].ravel()[j] / 255
                ref -= pb * np.log(p[n, 0, j]) + (1 - pb) * np.log(1 - p[n, 0, j])
            else:
                ref -= np.log(p[n, int(lv), j])
    assert float(loss) == pytest.approx(ref / 8)
    check_layer_gradient(make_layer(OBJ), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])


def test_expectation_values_and_gradient_where_exact():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 2, 3))
    label = np.full((1, 1, 2, 3), 255.0)
    label[0, 0, 0, 1] = 3
    obj = np.full((1, 1, 2, 3), 255.0)          # P = 0: the fork's gradient is exact
    classes = np.zeros((1, 1, 2, 3))
    classes[0, 0, 0, :2] = [1, 3]
    lab = np.concatenate([label, obj, classes], axis=1)
    layer = make_layer(EXP)
    bottom, top = make_blobs([x, lab]), make_blobs(2)
    loss, prob = run_layer(layer, bottom, top)
    p = _softmax(x.reshape(1, 4, 6))[0]
    s = 0.5 * (p[1] + p[3])
    ref = -np.log(s).sum() + np.log(s[1]) - np.log(p[3, 1])
    assert float(loss) == pytest.approx(ref / 6)
    np.testing.assert_allclose(prob.reshape(4, 6), p)
    check_layer_gradient(make_layer(EXP), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])


def test_expectation_background_gradient_is_the_forks():
    x = np.zeros((1, 2, 1, 1))
    lab = np.array([255.0, 0.0, 1.0]).reshape(1, 3, 1, 1)      # P = 1: all background prior
    layer = make_layer(EXP)
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    # class 1 present with a_1 = 0: S_1 (1 - 0); background left at S_0
    np.testing.assert_allclose(bottom[0].diff.ravel(), [0.5, 0.5])


def test_label_count_is_checked():
    from caffepy.errors import NetError
    with pytest.raises(NetError, match="label count"):
        run_layer(make_layer(EXP), make_blobs([np.zeros((1, 2, 2, 2)), np.zeros((1, 2, 2, 2))]),
                  make_blobs(1))


def test_objectness_presence_values_and_gradient():
    rng = np.random.default_rng(24)
    x = rng.standard_normal((1, 4, 2, 3))
    label = np.full((1, 1, 2, 3), 255.0)
    label[0, 0, 0, 0], label[0, 0, 1, 2] = 2, 3          # present: 2, 3 (no background)
    obj = rng.integers(0, 256, (1, 1, 2, 3)).astype(float)
    lab = np.concatenate([label, obj], axis=1)
    text = 'type: "SoftmaxWithLossObjectnessPresence" loss_param { ignore_label: 255 }'
    (loss,) = run_layer(make_layer(text), make_blobs([x, lab]), make_blobs(1))
    p = _softmax(x.reshape(1, 4, 6))[0]
    pb = 1 - obj.ravel() / 255
    q = p[2] + p[3]
    terms = -(pb * np.log(p[0]) + (1 - pb) * np.log(q))
    terms[0], terms[5] = -np.log(p[2, 0]), -np.log(p[3, 5])
    assert float(loss) == pytest.approx(terms.sum() / 6)
    check_layer_gradient(make_layer(text), make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
