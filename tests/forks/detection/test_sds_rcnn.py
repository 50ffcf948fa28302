import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.detection.sds_rcnn import WeightedSoftmaxWithLossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PROTO = 'type: "SoftmaxWithLoss" bottom: "s" bottom: "l" bottom: "w" top: "loss" '


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_weighted_softmax_loss_values_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    label = np.array([0.0, 2.0, 255.0, 1.0])
    w = np.array([0.5, 2.0, 7.0, 1.5])
    layer = make_layer(PROTO + 'loss_param { ignore_label: 255 normalization: NONE }', dtype=np.float64)
    assert isinstance(layer, WeightedSoftmaxWithLossLayer)
    (loss,) = run_layer(layer, make_blobs([x, label, w]), make_blobs(1))
    p = _softmax(x)
    # sum_i w_i (-log p[i, y_i]) / sum_i w_i over the non-ignored labels; normalization unused
    expected = -(0.5 * np.log(p[0, 0]) + 2.0 * np.log(p[1, 2]) + 1.5 * np.log(p[3, 1])) / 4.0
    np.testing.assert_allclose(loss, expected, rtol=1e-12)
    check_layer_gradient(make_layer(PROTO + 'loss_param { ignore_label: 255 }', dtype=np.float64),
                         make_blobs([x, label, w]), make_blobs(1), check_bottom=[0])


def test_weighted_softmax_loss_zero_weights_and_shape_error():
    x = np.zeros((2, 3))
    (loss,) = run_layer(make_layer(PROTO, dtype=np.float64),
                        make_blobs([x, np.array([0.0, 1.0]), np.zeros(2)]), make_blobs(1))
    assert loss == 0
    with pytest.raises(NetError, match="shape of the labels"):
        run_layer(make_layer(PROTO), make_blobs([x, np.zeros(2), np.zeros(3)]), make_blobs(1))
