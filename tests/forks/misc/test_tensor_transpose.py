import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

LAYER = 'type: "TensorTranspose" tensor_transpose_param { %s }'


def _fork_forward(x, order):
    """tensor_transpose_layer.cpp's Forward_cpu: for each top index, its bottom index through
    the two stride tables."""
    shape = [x.shape[o] for o in order]
    xs = [int(np.prod(x.shape[n + 1:])) for n in range(x.ndim)]
    ys = [int(np.prod(shape[n + 1:])) for n in range(x.ndim)]
    flat, out = x.ravel(), np.empty(int(np.prod(shape)))
    for iy in range(out.size):
        rest, ix = iy, 0
        for n in range(x.ndim):
            sub = rest // ys[n]
            rest -= sub * ys[n]
            ix += sub * xs[order[n]]
        out[iy] = flat[ix]
    return out.reshape(shape)


@pytest.mark.parametrize("order", [(2, 0, 3, 1), (1, 0), (0, 1, 2, 3)])
def test_tensor_transpose_is_the_forks_permutation(order):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)[:len(order)])
    (y,) = run_layer(make_layer(LAYER % " ".join("order: %d" % o for o in order)),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, _fork_forward(x, order))


def test_tensor_transpose_gradient():
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    check_layer_gradient(make_layer(LAYER % "order: 2 order: 0 order: 1"), make_blobs([x]),
                         make_blobs(1))


@pytest.mark.parametrize("orders, match", [("order: 1 order: 0", "gives 2 orders"),
                                           ("order: 0 order: 0 order: 1", "not a permutation")])
def test_tensor_transpose_refuses_bad_orders(orders, match):
    with pytest.raises(CaffeError, match=match):
        run_layer(make_layer(LAYER % orders), make_blobs([np.ones((2, 3, 4))]), make_blobs(1))
