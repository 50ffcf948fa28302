import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _run(text, *xs, tops=1):
    return run_layer(make_layer(text), make_blobs(list(xs)), make_blobs(tops))


def test_maximum_with_two_bottoms_broadcasts():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 1))
    (y,) = _run('type: "Maximum" bottom: "a" bottom: "b"', a, b)
    np.testing.assert_array_equal(y, np.maximum(a, b))
    (y,) = _run('type: "Maximum" bottom: "a" bottom: "b"', a, np.array(0.25))
    np.testing.assert_array_equal(y, np.maximum(a, 0.25))
    with pytest.raises(NetError, match="broadcast"):
        _run('type: "Maximum" bottom: "a" bottom: "b"', a, np.zeros((2, 2)))



def test_one_hot_of_both_forks():
    x = np.array([[0, 2.0, 3.0], [1.0, -1.0, 2.9]])
    (y,) = _run('type: "OneHot" one_hot_param { depth: 3 on_value: 5 off_value: -1 }', x)
    assert y.shape == (2, 3, 3)
    ref = np.full((2, 3, 3), -1.0)
    for (i, j), v in np.ndenumerate(x):
        if 0 <= v < 3:
            ref[i, j, int(v)] = 5
    np.testing.assert_array_equal(y, ref)
    (y,) = _run('type: "OneHot" one_hot_param { depth: 3 axis: 0 }', x)
    np.testing.assert_array_equal(y, np.moveaxis(np.where(ref > 0, 1.0, 0.0), 2, 0))
    idx = np.array([[[0.0, 2.5]], [[1.4, 3.0]]])     # N x 1 x 2; round half away: 3
    (y,) = _run('type: "OneHot" one_hot_param { input_dim: 4 to_log: true }', idx)
    assert y.shape == (2, 4, 2)
    hot = np.zeros((2, 4, 2), bool)
    hot[0, 0, 0] = hot[0, 3, 1] = hot[1, 1, 0] = hot[1, 3, 1] = True
    np.testing.assert_array_equal(y, np.where(hot, 0.0, -np.inf))
    with pytest.raises(NetError, match="outside"):
        _run('type: "OneHot" one_hot_param { input_dim: 3 }', idx)


def test_sum_loss_of_both_forks():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 2, 3))
    (loss,) = _run('type: "SumLoss"', x)
    np.testing.assert_allclose(loss, x.sum() / 4)
    check_layer_gradient(make_layer('type: "SumLoss"'), make_blobs([x]), make_blobs(1))
    v = rng.standard_normal((4, 1))
    (loss,) = _run('type: "SumLoss" sum_loss_param { }', v)
    np.testing.assert_allclose(loss, -v.sum() / 4)
    check_layer_gradient(make_layer('type: "SumLoss" sum_loss_param { }'), make_blobs([v]),
                         make_blobs(1))
    lab = np.array([-1.0, 2.0, -1.0, 0.0])
    text = 'type: "SumLoss" sum_loss_param { use_labeled_data: false }'
    layer, b, t = make_layer(text), make_blobs([v, lab]), make_blobs(1)
    (loss,) = run_layer(layer, b, t)
    np.testing.assert_allclose(loss, -(v[0, 0] + v[2, 0]) / 2)
    t[0].diff[...] = 2.0
    layer.backward(t, [True, False], b)
    np.testing.assert_allclose(b[0].diff.reshape(-1), [-0.5, 0, -0.5, 0])   # 2 / N, not 2 / U


def test_matmul_synopsys_forms():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 5, 6))
    (y,) = _run('type: "MatMul" matmul_param { }', a, b)
    np.testing.assert_allclose(y, a @ b)
    bt = np.swapaxes(b, 2, 3).copy()
    at = np.swapaxes(a, 2, 3).copy()
    (y,) = _run('type: "MatMul" matmul_param { transpose_a: true transpose_b: true }', at, bt)
    np.testing.assert_allclose(y, a @ b)
    w = rng.standard_normal((5, 6))
    (y,) = _run('type: "MatMul"', a, w)             # fewer axes in b: a's rows times b
    np.testing.assert_allclose(y, a @ w)
    layer = make_layer('type: "MatMul" matmul_param { blob_shape: 5 blob_shape: 6 }')
    bottom, top = make_blobs([a]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = w
    layer.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, a @ w)
    with pytest.raises(NetError, match="incompatible"):
        _run('type: "MatMul" matmul_param { }', a, a)


def test_matmul_video_prop_networks_form_and_gradient():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5))             # N x F x D x L
    k1, k2 = rng.standard_normal((2, 1, 5, 2)), rng.standard_normal((2, 1, 5, 2))
    (y,) = _run('type: "MatMul"', x, k1, k2)
    assert y.shape == (2, 6, 4, 2)
    kk = np.concatenate([k1, k2], axis=3)[:, 0]
    ref = np.einsum("nrl,nlk->nrk", x.reshape(2, 12, 5), kk).reshape(2, 6, 4, 2)
    np.testing.assert_allclose(y, ref)
    check_layer_gradient(make_layer('type: "MatMul"'), make_blobs([x, k1, k2]), make_blobs(1))
    (y,) = _run('type: "MatMul"', x, k1)
    np.testing.assert_allclose(y, np.einsum("nfdl,nlk->nfdk", x, k1[:, 0]))
