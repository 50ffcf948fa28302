import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.ocr.deeptextspotter import DeepTextSpotterCTCLossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PROTO = 'type: "CTCLoss" bottom: "transpose" bottom: "label" top: "loss"'


def test_two_bottom_ctc_loss_values_and_gradient():
    x = np.random.default_rng(0).standard_normal((2, 2, 1, 3))   # T x N x 1 x C
    label = np.array([[0.0, 1.0, 0.0], [2.0, -1.0, 2.0]])      # -> [1] and [2, 2]
    layer = make_layer(PROTO, dtype=np.float64)
    assert isinstance(layer, DeepTextSpotterCTCLossLayer)
    (loss,) = run_layer(layer, make_blobs([x, label]), make_blobs(1))
    y = np.exp(x[:, 0, 0]) / np.exp(x[:, 0, 0]).sum(axis=1, keepdims=True)
    # paths of "1" over 2 steps with blank 0: 11, 01, 10; "22" needs 3 steps: cost 0
    p = y[0, 1] * y[1, 1] + y[0, 0] * y[1, 1] + y[0, 1] * y[1, 0]
    np.testing.assert_allclose(loss, -np.log(p) / 2, rtol=1e-12)
    check_layer_gradient(make_layer(PROTO, dtype=np.float64), make_blobs([x, label]),
                         make_blobs(1), check_bottom=[0])


def test_two_bottom_ctc_loss_shape_errors():
    with pytest.raises(NetError, match="N x L"):
        run_layer(make_layer(PROTO), make_blobs([np.zeros((2, 2, 1, 3)), np.zeros((3, 2))]),
                  make_blobs(1))
    with pytest.raises(NetError, match="T x N x H x C"):
        run_layer(make_layer(PROTO), make_blobs([np.zeros((2, 3)), np.zeros((3, 2))]),
                  make_blobs(1))
