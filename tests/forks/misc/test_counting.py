import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import make_blobs, make_layer, run_layer


def test_mae_loss_forward_and_fork_backward():
    x = np.array([[1.0, -2.0], [0.5, 0.5]])
    t = np.array([[1.0, 1.0], [1.0, 0.0]])
    layer = make_layer('type: "MAELoss" loss_weight: 2')
    bottom, top = make_blobs([x, t]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    assert loss == pytest.approx(abs(4.0 - 3.0))
    layer.backward(top, [True, True], bottom)
    np.testing.assert_allclose(bottom[0].diff, 2 * (x - t) / 2)
    np.testing.assert_allclose(bottom[1].diff, -2 * (x - t) / 2)


def test_mae_loss_count_mismatch():
    with pytest.raises(ShapeError, match="same dimension"):
        run_layer(make_layer('type: "MAELoss"'), make_blobs([np.ones((2, 3)), np.ones((2, 2))]),
                  make_blobs(1))
