import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)
A, B, C = (RNG.standard_normal((2, 3, 4)) for _ in range(3))


def run(text, arrays, dtype=np.float64):
    layer = make_layer(text, dtype=dtype)
    bottom, top = make_blobs(arrays, dtype), make_blobs(1, dtype)
    return layer, bottom, top, run_layer(layer, bottom, top)[0]


ELTWISE = [
    ("operation: SUM", lambda a, b, c: a + b + c),
    ("operation: SUM coeff: 2 coeff: -0.5 coeff: 1", lambda a, b, c: 2 * a - 0.5 * b + c),
    ("operation: PROD", lambda a, b, c: a * b * c),
    ("operation: PROD stable_prod_grad: false", lambda a, b, c: a * b * c),
    ("operation: MAX", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("param,ref", ELTWISE)
def test_eltwise(param, ref, dtype):
    layer, bottom, top, y = run('type: "Eltwise" eltwise_param { %s }' % param, [A, B, C], dtype)
    np.testing.assert_allclose(y, ref(A, B, C), rtol=1e-5, atol=1e-6)
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top)


def test_eltwise_max_ties_follow_caffe():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 0.0, 3.0])
    c = np.array([1.0, 2.0, 3.0])
    layer, bottom, top, _ = run('type: "Eltwise" eltwise_param { operation: MAX }', [a, b, c])
    top[0].diff[...] = 1
    layer.backward(top, [True] * 3, bottom)
    # x0 vs x1: a tie goes to x1; later bottoms must be strictly larger
    np.testing.assert_array_equal([b_.diff for b_ in bottom], [[0, 1, 0], [1, 0, 1], [0, 0, 0]])


@pytest.mark.parametrize("param,match", [("operation: SUM coeff: 1", "one coeff per bottom"),
                                         ("operation: PROD coeff: 1 coeff: 2 coeff: 3", "SUM")])
def test_eltwise_param_errors(param, match):
    with pytest.raises(CaffeError, match=match):
        run('type: "Eltwise" eltwise_param { %s }' % param, [A, B, C])


def test_eltwise_shape_mismatch():
    with pytest.raises(CaffeError, match=r"bottom\[1\] has shape \(3,\)"):
        run('type: "Eltwise"', [np.zeros(2), np.zeros(3)])


REDUCTION = [
    ("SUM", 0, lambda x: x.sum()),
    ("ASUM", 1, lambda x: np.abs(x).sum(axis=(1, 2))),
    ("SUMSQ", 2, lambda x: (x * x).sum(axis=2)),
    ("MEAN", -1, lambda x: x.mean(axis=2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op,axis,ref", REDUCTION)
def test_reduction(op, axis, ref, dtype):
    text = 'type: "Reduction" reduction_param { operation: %s axis: %d coeff: 0.5 }' % (op, axis)
    layer, bottom, top, y = run(text, [A], dtype)
    np.testing.assert_allclose(y, 0.5 * ref(A), rtol=1e-6)
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top, kink_range=1e-2 if op == "ASUM" else -1)


X = np.array([[0.5, 2.0, -1.0, 2.0, 0.1], [3.0, 1.0, 1.0, 0.0, -2.0]])


def test_argmax_default():
    _, _, _, y = run('type: "ArgMax"', [X])
    assert y.shape == (2, 1, 1)
    np.testing.assert_array_equal(y.ravel(), [3, 0])   # equal values: larger index first


def test_argmax_top_k_with_values():
    _, _, _, y = run('type: "ArgMax" argmax_param { top_k: 3 out_max_val: true }', [X])
    assert y.shape == (2, 2, 3)
    np.testing.assert_array_equal(y[:, 0], [[3, 1, 0], [0, 2, 1]])
    np.testing.assert_array_equal(y[:, 1], [[2, 2, 0.5], [3, 1, 1]])


@pytest.mark.parametrize("out_max_val", ["false", "true"])
def test_argmax_axis(out_max_val):
    x = RNG.standard_normal((2, 5, 3))
    text = 'type: "ArgMax" argmax_param { axis: 1 top_k: 2 out_max_val: %s }' % out_max_val
    _, _, _, y = run(text, [x])
    assert y.shape == (2, 2, 3)
    order = np.argsort(-x, axis=1)[:, :2]
    want = np.take_along_axis(x, order, 1) if out_max_val == "true" else order
    np.testing.assert_array_equal(y, want)


def test_argmax_top_k_too_large():
    with pytest.raises(CaffeError, match="top_k 6"):
        run('type: "ArgMax" argmax_param { top_k: 6 }', [X])
