import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _run(text, *xs):
    return run_layer(make_layer(text), make_blobs(list(xs)), make_blobs(1))[0]


def test_squash_values_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))
    text = 'type: "Squash" squash_param { capsule_dim: 4 }'
    y = _run(text, x)
    for n in range(2):
        for j in range(3):
            s = x[n, j]
            r = np.sqrt(s @ s + 2e-7)
            np.testing.assert_allclose(y[n, j], s * (1 - np.exp(-r)) / r, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    # capsules run across the other axes: 12 values = 2 capsules of 6
    y6 = _run('type: "Squash" squash_param { capsule_dim: 6 }', x)
    s = x[0].reshape(-1)[:6]
    r = np.sqrt(s @ s + 2e-7)
    np.testing.assert_allclose(y6[0].reshape(-1)[:6], s * (1 - np.exp(-r)) / r, rtol=1e-12)


def test_squash_refuses_partial_capsules():
    with pytest.raises(NetError, match="capsule_dim 5"):
        _run('type: "Squash" squash_param { capsule_dim: 5 }', np.ones((1, 6)))


def test_capsule_len_values_and_gradient():
    x = np.arange(12.0).reshape(2, 6) - 5
    text = 'type: "CapsuleLen" capsule_len_param { num_class: 3 }'
    y = _run(text, x)
    ref = np.sqrt((x.reshape(2, 3, 2) ** 2).sum(-1) + 1e-7)
    np.testing.assert_allclose(y, ref)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_capsule_mask_keeps_the_last_capsule_as_the_fork_does():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3))
    x[:, 0] *= 10        # the longest capsule is not the one the fork keeps
    text = 'type: "CapsuleMask" capsule_mask_param { class_num: 4 }'
    y = _run(text, x)
    ref = np.zeros_like(x)
    ref[:, 3] = x[:, 3]
    np.testing.assert_array_equal(y, ref)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_capsule_relu_zeroes_long_capsules_in_place_too():
    x = np.array([[3.0, 4.0, 0.1, 0.2, 1.0, 0.0]])
    text = 'type: "CapsuleRelu" capsule_relu_param { dim: 2 thre: 1.5 }'
    np.testing.assert_allclose(_run(text, x), [[0, 0, 0.1, 0.2, 1.0, 0.0]])
    b = make_blobs([x])
    layer = make_layer(text)
    run_layer(layer, b, b)
    np.testing.assert_allclose(b[0].data, [[0, 0, 0.1, 0.2, 1.0, 0.0]])
    x = np.random.default_rng(2).standard_normal((2, 6))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_capsule_reshape_transposes_each_group():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 2, 3))
    text = 'type: "CapsuleReshape" capsule_reshape_param { capsule_dim: 3 }'
    y = _run(text, x)
    assert y.shape == (2, 12, 3)
    for n in range(2):
        for g in range(2):
            for p in range(6):
                for d in range(3):
                    assert y[n, g * 6 + p, d] == x[n, g * 3 + d].reshape(-1)[p]
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_margin_loss_value_and_gradient():
    rng = np.random.default_rng(4)
    v = rng.uniform(-0.6, 0.6, (3, 4, 2))
    label = np.array([0.0, 3.0, 1.0])
    text = ('type: "MarginLoss" margin_param { num_class: 4 m_upper_bound: 0.9 '
            'm_lower_bound: 0.1 lambda: 0.5 }')
    (loss,) = run_layer(make_layer(text), make_blobs([v, label]), make_blobs(1))
    ref = 0.0
    for n in range(3):
        for j in range(4):
            length = np.sqrt(v[n, j] @ v[n, j] + 1e-7)
            if j == label[n]:
                ref += max(0, 0.9 - length) ** 2
            else:
                ref += 0.5 * max(0, length - 0.1) ** 2
    np.testing.assert_allclose(loss, ref / 3)
    check_layer_gradient(make_layer(text), make_blobs([v, label]), make_blobs(1),
                         check_bottom=[0])
