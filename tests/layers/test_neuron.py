import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_relu_forward(dtype, slope):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    layer = make_layer('type: "ReLU" relu_param { negative_slope: %g }' % slope, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, np.where(x > 0, x, slope * x).astype(dtype), rtol=1e-6)


@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_relu_gradient(slope):
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    layer = make_layer('type: "ReLU" relu_param { negative_slope: %g }' % slope)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1), kink_range=1e-2)
