import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DICE = 'type: "DiceCoefLoss" dice_coef_loss_param { %s }'


def test_dice_values():
    p = np.array([[[[0.9, 0.2]], [[0.1, 0.8]]]])        # 1 x 2 x 1 x 2
    lab = np.array([[[[0, 1]]]], dtype=float)
    (loss,) = run_layer(make_layer(DICE % ""), make_blobs([p, lab]), make_blobs(1))
    inter = 0.9 + 0.8
    b = 1 + (p ** 2).sum() + 2
    assert float(loss) == pytest.approx(1 - (1 + 2 * inter) / b)
    layer = make_layer(DICE % "generalization: MULTICLASS ignore_label: 0")
    (loss,) = run_layer(layer, make_blobs([p, lab]), make_blobs(1))
    assert float(loss) == pytest.approx(1 - 2 * 0.8 / (0.1 ** 2 + 0.8 ** 2 + 1))


def test_dice_gradient_single_image():
    # at N = 1 (no ignored channel) the fork's gradient is the loss's
    rng = np.random.default_rng(8)
    p = rng.uniform(0.1, 0.9, (1, 3, 2, 3))
    lab = rng.integers(0, 3, (1, 1, 2, 3)).astype(float)
    for text in ("", "generalization: MULTICLASS"):
        check_layer_gradient(make_layer(DICE % text), make_blobs([p, lab]), make_blobs(1),
                             check_bottom=[0])


def test_dice_gradient_is_n_times_the_loss_derivative():
    rng = np.random.default_rng(9)
    p = rng.uniform(0.1, 0.9, (2, 2, 2, 2))
    lab = rng.integers(0, 2, (2, 1, 2, 2)).astype(float)
    layer = make_layer(DICE % "")
    bottom, top = make_blobs([p, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    h, i = 1e-6, (1, 0, 1, 0)

    def loss(q):
        b = make_blobs([q, lab])
        return float(run_layer(make_layer(DICE % ""), b, make_blobs(1))[0])
    up, dn = p.copy(), p.copy()
    up[i] += h
    dn[i] -= h
    assert bottom[0].diff[i] == pytest.approx(2 * (loss(up) - loss(dn)) / (2 * h), rel=1e-5)


def test_dice_refuses_weighted_modes():
    with pytest.raises(NetError, match="generalization"):
        make_layer(DICE % "generalization: MULTICLASS_WEIGHTED").setup(
            make_blobs([np.ones((1, 2, 1, 1)), np.zeros((1, 1, 1, 1))]), make_blobs(1))
