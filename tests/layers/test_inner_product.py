import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.oracle import STRICT, check_layer
from tests.conftest import shared_path

IP = ('type: "InnerProduct" inner_product_param { num_output: 4 %s '
      'weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }')


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fields", ["", "transpose: true", "axis: 2", "bias_term: false"])
def test_inner_product_forward(dtype, fields):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    layer = make_layer(IP % fields, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    axis = 2 if "axis" in fields else 1
    w = layer.blobs[0].data.astype(np.float64)
    w = w.T if "transpose" in fields else w
    ref = x.reshape(int(np.prod(x.shape[:axis])), -1) @ w.T
    if len(layer.blobs) > 1:
        ref += layer.blobs[1].data
    assert y.shape == x.shape[:axis] + (4,)
    np.testing.assert_allclose(y.reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fields", ["", "transpose: true", "axis: 2", "bias_term: false"])
def test_inner_product_gradient(fields):
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 3))
    check_layer_gradient(make_layer(IP % fields), make_blobs([x]), make_blobs(1))


def test_inner_product_rejects_changed_input_size():
    layer = make_layer(IP % "")
    bottom, top = make_blobs([np.zeros((2, 6))]), make_blobs(1)
    layer.setup(bottom, top)
    bottom[0].reshape((2, 7))
    with pytest.raises(ShapeError, match="expected 6"):
        layer.forward(bottom, top)


@pytest.mark.parametrize("case", ["ip", "ip_axis2", "ip_transpose"])
def test_inner_product_matches_caffe(case):
    check_layer(shared_path("caffe-reference", case), STRICT)
