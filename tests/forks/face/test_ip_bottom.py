import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

IP = 'type: "InnerProduct" bottom: "x" bottom: "w" inner_product_param { bias_term: false %s }'


def test_weights_from_the_second_bottom():
    x = np.arange(12.0).reshape(2, 3, 2, 1)
    w = np.random.default_rng(0).standard_normal((4, 6))
    y = run_layer(make_layer(IP % "num_output: 99"), make_blobs([x, w]), make_blobs(1))[0]
    np.testing.assert_allclose(y, x.reshape(2, 6) @ w.T)       # N from the weights, not num_output
    # transposed: N is still the bottom's first axis, its values are read as K x N
    yt = run_layer(make_layer(IP % "transpose: true"), make_blobs([x, w.T.copy().reshape(4, 6)]),
                   make_blobs(1))[0]
    np.testing.assert_allclose(yt, x.reshape(2, 6) @ w.T)


@pytest.mark.parametrize("extra", ["", "transpose: true"])
def test_gradient_to_both_bottoms(extra):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    check_layer_gradient(make_layer(IP % extra), make_blobs([x, w]), make_blobs(1))


def test_refusals():
    with pytest.raises(NetError, match="bias_term"):
        run_layer(make_layer('type: "InnerProduct" bottom: "x" bottom: "w"'),
                  make_blobs([np.zeros((2, 3)), np.zeros((4, 3))]), make_blobs(1))
    with pytest.raises(NetError, match="N x K"):
        run_layer(make_layer(IP % ""), make_blobs([np.zeros((2, 3)), np.zeros((4, 2))]),
                  make_blobs(1))
