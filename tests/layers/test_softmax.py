import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [1, 2, -1, 0])
def test_softmax_forward(dtype, axis):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 2)) * 3
    layer = make_layer('type: "Softmax" softmax_param { axis: %d }' % axis, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    assert y.dtype == dtype
    np.testing.assert_allclose(y, softmax_ref(x, axis), rtol=1e-5, atol=1e-7)


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]])
    (y,) = run_layer(make_layer('type: "Softmax"', dtype=np.float32), make_blobs([x], np.float32),
                     make_blobs(1, np.float32))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, softmax_ref(x, 1), rtol=1e-6)


@pytest.mark.parametrize("axis", [1, 2])
def test_softmax_gradient(axis):
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    layer = make_layer('type: "Softmax" softmax_param { axis: %d }' % axis)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_softmax_in_place_backward_matches_out_of_place():
    rng = np.random.default_rng(2)
    x, dy = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    results = []
    for in_place in (False, True):
        layer = make_layer('type: "Softmax"')
        bottom = make_blobs([x])
        top = bottom if in_place else make_blobs(1)
        layer.setup(bottom, top)
        layer.forward(bottom, top)
        top[0].diff[...] = dy
        layer.backward(top, [True], bottom)
        results.append(bottom[0].diff.copy())
    np.testing.assert_allclose(results[0], results[1])
