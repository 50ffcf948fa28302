import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _loop_dtow(x, p):
    n, c, h, w = x.shape
    out = np.zeros((n, c // (p * p), h * p, w * p))
    for tn in range(n):
        for tc in range(c):
            for th in range(h):
                for tw in range(w):
                    rc = tc % (p * p)
                    out[tn, tc // (p * p), th * p + rc // p, tw * p + rc % p] = x[tn, tc, th, tw]
    return out


def test_const_scale():
    x = np.random.default_rng(16).standard_normal((2, 3))
    layer = 'type: "ConstScale" const_scale_param { scale: 2.5 bias: -1 }'
    (y,) = run_layer(make_layer(layer), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, 2.5 * x - 1)
    check_layer_gradient(make_layer(layer), make_blobs([x]), make_blobs(1))


def test_dtow_plain_round_trip_and_gradient():
    x = np.arange(2 * 8 * 2 * 3, dtype=float).reshape(2, 8, 2, 3)
    (y,) = run_layer(make_layer('type: "Dtow" dtow_param { psize: 2 }'), make_blobs([x]),
                     make_blobs(1))
    np.testing.assert_allclose(y, _loop_dtow(x, 2))
    (z,) = run_layer(make_layer('type: "Dtow" dtow_param { psize: 2 method: MWTOD }'),
                     make_blobs([y]), make_blobs(1))
    np.testing.assert_allclose(z, x)
    check_layer_gradient(make_layer('type: "Dtow" dtow_param { psize: 2 }'),
                         make_blobs([np.random.default_rng(0).standard_normal((1, 4, 2, 2))]),
                         make_blobs(1))


def test_dtow_zigzag_round_trip_and_gradient():
    x = np.random.default_rng(17).standard_normal((1, 18, 2, 2))
    text = 'type: "Dtow" dtow_param { psize: 3 method: %s ngroup: 2 }'
    (y,) = run_layer(make_layer(text % "LDTOW"), make_blobs([x]), make_blobs(1))
    assert y.shape == (1, 2, 6, 6)
    assert sorted(y.ravel()) == sorted(x.ravel())
    (z,) = run_layer(make_layer(text % "LWTOD"), make_blobs([y]), make_blobs(1))
    np.testing.assert_allclose(z, x)
    check_layer_gradient(make_layer(text % "LDTOW"), make_blobs([x]), make_blobs(1))
    check_layer_gradient(make_layer(text % "LWTOD"), make_blobs([y]), make_blobs(1))


def test_mtranspose_and_inverse():
    x = np.arange(2 * 4 * 3, dtype=float).reshape(2, 4, 1, 3)
    (y,) = run_layer(make_layer('type: "MTranspose" mtranspose_param { groups: 2 }'),
                     make_blobs([x]), make_blobs(1))
    assert y.shape == (12, 2)
    assert y[0, 0] == x[0, 0, 0, 0] and y[0, 1] == x[0, 1, 0, 0] and y[3, 0] == x[0, 2, 0, 0]
    inv = ('type: "MTranspose" mtranspose_param { groups: 2 inverse: true channel: 4 height: 1 '
           'width: 3 }')
    (z,) = run_layer(make_layer(inv), make_blobs([y]), make_blobs(1))
    np.testing.assert_allclose(z, x)
    check_layer_gradient(make_layer('type: "MTranspose" mtranspose_param { groups: 2 }'),
                         make_blobs([x]), make_blobs(1))
    check_layer_gradient(make_layer(inv), make_blobs([y]), make_blobs(1))


def test_multobin():
    x = np.array([[[[5.0, 0.0]]]])                   # 1 x 1 x 1 x 2
    (y,) = run_layer(make_layer('type: "MulToBin" multobin_param { levels: 3 mod: 1 }'),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y[0, :, 0], [[1, 0], [0, 0], [1, 0]])
    (y,) = run_layer(make_layer('type: "MulToBin" multobin_param { levels: 2 mod: 2 imp: true '
                                'inverse: true }'), make_blobs([x]), make_blobs(1))
    # v = 5 - 1 = 4 = digits (0, 1) base 4, each + 1, reversed
    np.testing.assert_allclose(y[0, :, 0], [[2, 0], [1, 0]])


def test_bcoder_loss_values_and_gradient():
    import pytest
    rng = np.random.default_rng(26)
    x = rng.uniform(0.1, 0.9, (2, 3))
    t = rng.integers(0, 2, (2, 3)).astype(float)
    w = rng.uniform(0.5, 1.5, (2, 3))
    (loss,) = run_layer(make_layer('type: "BcoderLoss"'), make_blobs([x, t]), make_blobs(1))
    e = 1e-6
    d = t * np.log(t + e) - t * np.log(x + e) + (1 - t) * np.log(1 - t + e) - \
        (1 - t) * np.log(1 - x + e)
    assert float(loss) == pytest.approx(np.abs(d).sum() / 6)
    check_layer_gradient(make_layer('type: "BcoderLoss"'), make_blobs([x, t, w]),
                         make_blobs(1), check_bottom=[0])


def test_mlquant_single_levels_and_gradients():
    x = np.array([-1.0, 0.2, 0.45, 0.62, 1.0, 5.0]).reshape(1, 1, 1, 6)
    layer = make_layer('type: "MLQuant" mlquant_param { groups: 4 }')
    bottom, top = make_blobs([x]), make_blobs(2)
    q, k = run_layer(layer, bottom, top)
    # new blobs: levels 1/8 + (0, 1, 2, 3) / 4 = 0.125, 0.375, 0.625, 0.875
    np.testing.assert_allclose(k.ravel(), [0, 0, 1, 2, 3, 3])
    np.testing.assert_allclose(q.ravel(), [0.125, 0.125, 0.375, 0.625, 0.875, 0.875])
    np.testing.assert_allclose(layer.blobs[2].data.ravel(), [2, 1, 1, 2])
    top[0].diff[...] = 1.0
    top[1].diff[...] = 2.0
    layer.blobs[0].diff[...] = 0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff.ravel(), [3] * 6)      # straight through
    err = q.ravel() - x.ravel()
    want = [err.sum(), err[[2, 3, 4, 5]].sum() * 0.25, err[[3, 4, 5]].sum() * 0.25,
            err[[4, 5]].sum() * 0.25]
    np.testing.assert_allclose(layer.blobs[0].diff.ravel(), want)
    assert layer.blobs[1].data.ravel()[2] == 1                       # one forward counted
    (q,) = run_layer(make_layer('type: "MLQuant" mlquant_param { groups: 4 }'),
                     make_blobs([np.full((1, 1, 1, 1), 0.5)]), make_blobs(1))
    assert q.ravel().tolist() == [0.625]                             # a midpoint rounds up


def test_mlquant_respreads_unused_levels_every_period():
    layer = make_layer('type: "MLQuant" mlquant_param { groups: 4 }')
    bottom, top = make_blobs([np.full((1, 1, 1, 2), 0.3)]), make_blobs(1)
    run_layer(layer, bottom, top)                 # level 1 only: counts (0, 2, 0, 0)
    layer.blobs[1].data.ravel()[2:4] = (3, 3)     # the next forward is a check
    b = layer.blobs[0].data.ravel().copy()
    layer.forward(bottom, top)
    got = layer.blobs[0].data.ravel()
    # levels 2, 3 unused: step 1 split in three; level 0 unused: moved up one step, steps 1 and
    # 2 replaced by their mean
    s1 = np.exp(b[1]) / 3
    np.testing.assert_allclose(got[0], b[0] + s1)
    np.testing.assert_allclose(np.exp(got[1:]), [s1, s1, s1])
