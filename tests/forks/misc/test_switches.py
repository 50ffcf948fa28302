import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

POOL = 'pooling_param { pool: MAX kernel_size: 3 stride: 2 }'


def _max_pool_ref(x, k, s):
    n, c, h, w = x.shape
    oh, ow = -(-(h - k) // s) + 1, -(-(w - k) // s) + 1
    y, sw = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = x[:, :, i * s:min(i * s + k, h), j * s:min(j * s + k, w)]
            flat = win.reshape(n, c, -1)
            a = flat.argmax(axis=2)
            y[:, :, i, j] = flat.max(axis=2)
            ww = win.shape[3]
            sw[:, :, i, j] = (i * s + a // ww) * w + (j * s + a % ww)
    return y, sw


def test_pooling_switches_values_and_gradient():
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6))
    text = 'type: "PoolingSwitches" ' + POOL
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    ref, sw = _max_pool_ref(x, 3, 2)
    assert y.shape == (4, 3, 3, 3)
    np.testing.assert_array_equal(y[:2], ref)
    np.testing.assert_array_equal(y[2:], sw)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_pooling_switches_refuses_ave():
    with pytest.raises(NetError, match="only MAX"):
        run_layer(make_layer('type: "PoolingSwitches" pooling_param { pool: AVE kernel_size: 2 }'),
                  make_blobs([np.zeros((1, 1, 4, 4))]), make_blobs(1))


def test_slice_half_splits_at_half_the_batch():
    x = np.arange(4 * 2 * 3.0).reshape(4, 2, 3)
    text = 'type: "SliceHalf" slice_param { axis: 0 }'
    a, b = run_layer(make_layer(text), make_blobs([x]), make_blobs(2))
    np.testing.assert_array_equal(a, x[:2])
    np.testing.assert_array_equal(b, x[2:])
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(2))
    # along axis 1 (the default) the point is still num / 2
    a, b = run_layer(make_layer('type: "SliceHalf"'), make_blobs([np.zeros((2, 3, 1))]),
                     make_blobs(2))
    assert a.shape == (2, 1, 1) and b.shape == (2, 2, 1)


def test_inv_pooling_puts_values_at_their_switches():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 7, 7))
    ref, sw = _max_pool_ref(x, 3, 2)
    stacked = np.concatenate([sw, ref])
    text = 'type: "InvPooling" ' + POOL
    (y,) = run_layer(make_layer(text), make_blobs([stacked]), make_blobs(1))
    assert y.shape == (2, 3, 7, 7)
    expect = np.zeros_like(x)
    for n in range(2):
        for c in range(3):
            for v, s in zip(ref[n, c].reshape(-1), sw[n, c].reshape(-1)):
                expect[n, c].reshape(-1)[int(s)] = v
    np.testing.assert_array_equal(y, expect)
    # where two windows share a maximum the later one's value stays; out-of-plane switches drop
    sw2 = np.array([[[[0.0, 0.0], [48.0, 99.0]]]])
    v2 = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    (y2,) = run_layer(make_layer(text), make_blobs([np.concatenate([sw2, v2])]), make_blobs(1))
    assert y2.shape == (1, 1, 5, 5) and y2[0, 0, 0, 0] == 2 and y2.sum() == 2
    # switches of x.5 truncate alike under the checker's steps: their gradient is 0
    stacked = np.concatenate([sw + 0.5, ref])
    check_layer_gradient(make_layer(text), make_blobs([stacked]), make_blobs(1))
