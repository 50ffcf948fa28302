import numpy as np
import pytest

from caffepy import common
from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X_SHAPE = (2, 3, 4, 2)


@pytest.fixture(autouse=True)
def seeded():
    common.set_random_seed(1701)


def operand_view(s, x_shape, axis):
    """Broadcast an operand of shape s over x_shape starting at ``axis``."""
    s = np.asarray(s)
    return s.reshape((1,) * axis + s.shape + (1,) * (len(x_shape) - axis - s.ndim))


# (prototxt, operand shape, axis the operand starts at)
SCALE_CASES = [
    ('scale_param { filler { type: "uniform" min: -2 max: 2 } }', (3,), 1),
    ('scale_param { axis: 1 num_axes: 2 filler { type: "uniform" } bias_term: true '
     'bias_filler { type: "uniform" min: -1 max: 1 } }', (3, 4), 1),
    ('scale_param { num_axes: 0 filler { type: "constant" value: 1.7 } }', (), 0),
    ('scale_param { axis: 2 num_axes: -1 filler { type: "gaussian" } }', (4, 2), 2),
    ('scale_param { axis: -1 filler { type: "gaussian" } bias_term: true }', (2,), 3),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("text, shape, axis", SCALE_CASES)
def test_scale_learned_forward(dtype, text, shape, axis):
    x = np.random.default_rng(0).standard_normal(X_SHAPE)
    layer = make_layer('type: "Scale" ' + text, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    assert layer.blobs[0].shape == shape
    ref = x * operand_view(layer.blobs[0].data, X_SHAPE, axis)
    if len(layer.blobs) == 2:
        assert layer.blobs[1].shape == shape
        ref = ref + operand_view(layer.blobs[1].data, X_SHAPE, axis)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("text, shape, axis", SCALE_CASES)
def test_scale_learned_gradient(text, shape, axis):
    x = np.random.default_rng(1).standard_normal(X_SHAPE)
    check_layer_gradient(make_layer('type: "Scale" ' + text), make_blobs([x]), make_blobs(1))


def test_scale_default_fillers_are_identity():
    x = np.random.default_rng(2).standard_normal(X_SHAPE)
    layer = make_layer('type: "Scale" scale_param { bias_term: true }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    assert layer.param_propagate_down == [True, True]


@pytest.mark.parametrize("bias_term", [False, True])
def test_scale_from_bottom(bias_term):
    rng = np.random.default_rng(3)
    x, s = rng.standard_normal(X_SHAPE), rng.standard_normal((2, 3))
    text = ('type: "Scale" scale_param { axis: 0 bias_term: %s bias_filler { type: "uniform" } }'
            % str(bias_term).lower())
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x, s]), make_blobs(1))
    ref = x * s[:, :, None, None]
    if bias_term:
        assert len(layer.blobs) == 1 and layer.blobs[0].shape == (2, 3)
        ref = ref + layer.blobs[0].data[:, :, None, None]
    else:
        assert layer.blobs == []
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x, s]), make_blobs(1))


def test_scale_in_place_matches_out_of_place_and_accumulates():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal(X_SHAPE), rng.standard_normal(X_SHAPE)
    results = []
    for in_place in (False, True):
        layer = make_layer('type: "Scale" scale_param { filler { type: "uniform" } bias_term: true }')
        bottom = make_blobs([x])
        top = bottom if in_place else make_blobs(1)
        layer.setup(bottom, top)
        layer.blobs[0].data[...] = [0.5, -1.0, 2.0]
        layer.forward(bottom, top)
        for _ in range(2):                                  # param diffs accumulate
            top[0].diff[...] = dy
            layer.backward(top, [True], bottom)
        results.append((bottom[0].diff.copy(), layer.blobs[0].diff.copy(), layer.blobs[1].diff.copy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(results[0][1], 2 * (dy * x).sum(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(results[0][2], 2 * dy.sum(axis=(0, 2, 3)), rtol=1e-12)


def test_scale_leaves_caffes_scratch_product_in_an_unpropagated_bottom_diff():
    rng = np.random.default_rng(7)
    x, dy = rng.standard_normal(X_SHAPE), rng.standard_normal(X_SHAPE)
    layer = make_layer('type: "Scale"')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = dy
    layer.backward(top, [False], bottom)
    np.testing.assert_allclose(bottom[0].diff, dy * x)


def test_scale_shape_errors():
    x = np.zeros(X_SHAPE)
    with pytest.raises(CaffeError, match="does not match"):
        run_layer(make_layer('type: "Scale"'), make_blobs([x, np.zeros((3, 5))]), make_blobs(1))
    with pytest.raises(CaffeError, match="extends past"):
        run_layer(make_layer('type: "Scale" scale_param { axis: 3 num_axes: 2 }'), make_blobs([x]),
                  make_blobs(1))
    with pytest.raises(CaffeError, match="num_axes"):
        run_layer(make_layer('type: "Scale" scale_param { num_axes: -2 }'), make_blobs([x]),
                  make_blobs(1))


# -- Bias ---------------------------------------------------------------------------------------
BIAS_CASES = [
    ('bias_param { filler { type: "uniform" min: -1 max: 1 } }', (3,), 1),
    ('bias_param { axis: 0 num_axes: -1 filler { type: "gaussian" } }', X_SHAPE, 0),
    ('bias_param { num_axes: 0 filler { type: "constant" value: 0.5 } }', (), 0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("text, shape, axis", BIAS_CASES)
def test_bias_learned(dtype, text, shape, axis):
    x = np.random.default_rng(5).standard_normal(X_SHAPE)
    layer = make_layer('type: "Bias" ' + text, dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    assert layer.blobs[0].shape == shape
    np.testing.assert_allclose(y, x + operand_view(layer.blobs[0].data, X_SHAPE, axis), rtol=1e-5,
                               atol=1e-6)
    if dtype == np.float64:
        check_layer_gradient(make_layer('type: "Bias" ' + text), make_blobs([x]), make_blobs(1))


def test_bias_from_bottom_and_in_place():
    rng = np.random.default_rng(6)
    x, b, dy = rng.standard_normal(X_SHAPE), rng.standard_normal((4, 2)), rng.standard_normal(X_SHAPE)
    text = 'type: "Bias" bias_param { axis: 2 }'
    (y,) = run_layer(make_layer(text), make_blobs([x, b]), make_blobs(1))
    np.testing.assert_allclose(y, x + b, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x, b]), make_blobs(1))
    layer = make_layer(text)
    bottom = make_blobs([x, b])
    layer.setup(bottom, bottom[:1])
    layer.forward(bottom, bottom[:1])
    np.testing.assert_allclose(bottom[0].data, x + b, rtol=1e-12)
    bottom[0].diff[...] = dy
    layer.backward(bottom[:1], [True, True], bottom)
    np.testing.assert_allclose(bottom[0].diff, dy)
    np.testing.assert_allclose(bottom[1].diff, dy.sum(axis=(0, 1)), rtol=1e-12)
