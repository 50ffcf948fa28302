import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.video.scnn import OverlapSoftmaxWithLossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PROTO = 'type: "SoftmaxWithLoss" bottom: "fc8" bottom: "label" bottom: "overlap" top: "loss" '


def test_overlap_softmax_loss_values_and_gradient():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    label = np.array([0.0, 2.0, 3.0])
    o = np.array([0.9, 0.5, 0.7])
    layer = make_layer(PROTO, dtype=np.float64)
    assert isinstance(layer, OverlapSoftmaxWithLossLayer)
    (loss,) = run_layer(layer, make_blobs([x, label, o]), make_blobs(1))
    e = np.exp(x)
    p = e / e.sum(axis=1, keepdims=True)
    py = p[[0, 1, 2], [0, 2, 3]]
    soft = -np.log(py).sum()
    # background (label 0) has no overlap term; lambda = 1; o^(1/8) squared
    over = sum(0.5 * (py[i] / o[i] ** 0.125) ** 2 - 0.5 for i in (1, 2))
    np.testing.assert_allclose(loss, (soft + over) / 3, rtol=1e-12)
    check_layer_gradient(make_layer(PROTO, dtype=np.float64),
                         make_blobs([x, label, o]), make_blobs(1), check_bottom=[0])


def test_overlap_softmax_loss_shape_error():
    with pytest.raises(NetError, match="one value per label"):
        run_layer(make_layer(PROTO), make_blobs([np.zeros((2, 3)), np.zeros(2), np.ones(3)]),
                  make_blobs(1))
