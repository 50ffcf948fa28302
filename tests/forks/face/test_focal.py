"""happynear's FocalLoss (forks.face.focal) and Accuracy's min_is_better (forks.face.margin)."""
import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(5)


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_focal_loss_hand_computed():
    x = np.array([[1.0, 2.0, 0.0], [0.5, 0.5, 3.0]])
    lab = np.array([1, 0])
    p = _softmax(x)
    pt = p[[0, 1], lab]
    (loss,) = run_layer(make_layer('type: "FocalLoss"'), make_blobs([x, lab]), make_blobs(1))
    assert np.isclose(loss, -np.sum((1 - pt) ** 2 * np.log(pt)) / 2)     # alpha 1, gamma 2, VALID
    text = 'type: "FocalLoss" focal_loss_param { alpha: 0.25 gamma: 3 type: ORIGIN }'
    layer = make_layer(text)
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    q = (0.25 - pt) ** 3                                 # the fork's (alpha - p_t)^gamma
    assert np.isclose(loss, -np.sum(q * np.log(pt)) / 2)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    g = q - 3 * q / (1 - pt) * np.log(pt) * pt           # the fork's gradient, 1 - p_t kept
    want = p.copy()
    want[[0, 1], lab] -= 1
    np.testing.assert_allclose(bottom[0].diff, want * g[:, None] / 2)
    (loss,) = run_layer(make_layer('type: "FocalLoss" focal_loss_param { type: ONEADDP gamma: 1 }'),
                        make_blobs([x, lab]), make_blobs(1))
    assert np.isclose(loss, -np.sum((1 + pt) * np.log(pt)) / 2)


@pytest.mark.parametrize("kind", ["ORIGIN", "ONEADDP"])
def test_focal_loss_gradient(kind):
    x = RNG.standard_normal((4, 3, 2))
    lab = np.array([[0, 2], [1, 1], [2, 0], [0, 1]])
    layer = make_layer('type: "FocalLoss" focal_loss_param { type: %s gamma: 2 } '
                       'loss_param { ignore_label: 1 }' % kind)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])


def test_accuracy_min_is_better():
    d = np.array([[0.2, 0.9, 0.5], [0.7, 0.1, 0.3], [0.4, 0.6, 0.05]])   # distances
    lab = np.array([0, 2, 2])
    (acc,) = run_layer(make_layer('type: "Accuracy" accuracy_param { min_is_better: true }'),
                       make_blobs([d, lab]), make_blobs(1))
    assert np.isclose(acc, 2 / 3)                        # row 1's smallest is class 1
    (acc,) = run_layer(make_layer('type: "Accuracy" accuracy_param { min_is_better: true '
                                  'top_k: 2 }'), make_blobs([d, lab]), make_blobs(1))
    assert acc == 1.0
    (acc,) = run_layer(make_layer('type: "Accuracy"'), make_blobs([d, lab]), make_blobs(1))
    assert acc == 0.0                                    # the largest is never the label here
