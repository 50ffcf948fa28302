import numpy as np
import pytest

from caffepy.errors import CaffeError, ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _pair(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 2, 4))
    b = a + rng.choice([-1.0, 1.0], a.shape) * rng.uniform(0.1, 1.0, a.shape)  # no zero diffs
    return a, b


def test_abs_loss_forward_is_the_sum_of_absolute_differences_over_the_batch():
    a, b = _pair()
    (loss,) = run_layer(make_layer('type: "AbsLoss"'), make_blobs([a, b]), make_blobs(1))
    assert loss == pytest.approx(np.abs(a - b).sum() / 3)


def test_abs_loss_backward_is_the_forks_sign_with_zero_at_ties():
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    b = np.array([[0.0, 2.0, 4.0], [1.0, -1.0, 0.0]])
    layer = make_layer('type: "AbsLoss" loss_weight: 3')
    bottom, top = make_blobs([a, b]), make_blobs(1)
    run_layer(layer, bottom, top)
    layer.backward(top, [True, True], bottom)
    want = 3 * np.sign(a - b) / 2
    np.testing.assert_allclose(bottom[0].diff, want)
    np.testing.assert_allclose(bottom[1].diff, -want)


def test_abs_loss_gradient_both_bottoms():
    a, b = _pair(1)
    check_layer_gradient(make_layer('type: "AbsLoss"'), make_blobs([a, b.reshape(3, 8)]),
                         make_blobs(1), check_bottom=[0, 1])


def test_abs_loss_refuses_mismatched_counts_and_the_ignore_label_it_cannot_mask_by():
    with pytest.raises(ShapeError, match="same dimension"):
        run_layer(make_layer('type: "AbsLoss"'), make_blobs([np.ones((2, 3)), np.ones((2, 2))]),
                  make_blobs(1))
    with pytest.raises(CaffeError, match="ignore_mode"):
        run_layer(make_layer('type: "AbsLoss" loss_param { ignore_label: 0 }'),
                  make_blobs([np.ones((2, 3)), np.ones((2, 3))]), make_blobs(1))
