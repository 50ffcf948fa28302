import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_conadd_pads_smaller_bottoms_in_flat_order():
    a = np.arange(12.0).reshape(1, 3, 2, 2)
    b = np.ones((1, 2, 2, 2))
    (y,) = run_layer(make_layer('type: "Conadd"'), make_blobs([a, b]), make_blobs(1))
    ref = a.ravel().copy()
    ref[:8] += 1
    np.testing.assert_allclose(y.ravel(), ref)
    rng = np.random.default_rng(10)
    x = [rng.standard_normal((2, 3, 2, 2)), rng.standard_normal((2, 2, 2, 2)),
         rng.standard_normal((2, 3, 2, 2))]
    check_layer_gradient(make_layer('type: "Conadd"'), make_blobs(x), make_blobs(1))


def test_conadd_refuses_a_larger_bottom():
    with pytest.raises(NetError, match="larger"):
        run_layer(make_layer('type: "Conadd"'),
                  make_blobs([np.ones((1, 1, 2, 2)), np.ones((1, 2, 2, 2))]), make_blobs(1))
