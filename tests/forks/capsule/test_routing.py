import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

WFILL = 'weight_filler { type: "gaussian" std: 0.5 }'
FILL = WFILL + ' bias_filler { type: "gaussian" std: 0.5 }'


def _setup(text, *xs):
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs(list(xs)), make_blobs(1))
    return layer, y


def test_capsule_transform_values_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))          # 6 input capsules of 2
    text = ('type: "CapsuleTransform" capsule_transform_param { input_capsule_dim: 2 '
            'output_capsule_dim: 3 output_capsule_num: 2 %s }' % FILL)
    layer, y = _setup(text, x)
    w, b = layer.blobs[0].data, layer.blobs[1].data
    assert w.shape == (6, 2, 6) and b.shape == (36,) and y.shape == (2, 6, 6)
    xc = x.reshape(2, 6, 2)
    for n in range(2):
        for i in range(6):
            np.testing.assert_allclose(y[n, i], xc[n, i] @ w[i] + b[i * 6:(i + 1) * 6])
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_capsule_routing_values_and_gradient():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((2, 5, 2 * 3))
    text = ('type: "CapsuleRouting" capsule_routing_param { input_capsule_num: 5 '
            'output_capsule_dim: 3 output_capsule_num: 2 %s }' % WFILL)
    layer, v = _setup(text, u)
    c = layer.blobs[0].data
    ref = np.zeros((2, 2, 3))
    for n in range(2):
        for j in range(2):
            for i in range(5):
                ref[n, j] += c[j, i] * u[n, i, j * 3:(j + 1) * 3]
    np.testing.assert_allclose(v, ref)
    check_layer_gradient(make_layer(text), make_blobs([u]), make_blobs(1))


def test_dynamic_routing_computes_nothing_as_the_fork():
    u = np.random.default_rng(2).standard_normal((2, 4, 6))
    text = ('type: "DynamicRouting" dr_param { routing_num: 3 input_capsule_num: 4 '
            'output_capsule_dim: 3 output_capsule_num: 2 }')
    layer, v = _setup(text, u)
    assert layer.blobs[0].shape == (100, 2, 4)
    np.testing.assert_array_equal(v, np.zeros((2, 2, 3)))
    check_layer_gradient(make_layer(text), make_blobs([u]), make_blobs(1))


def test_capsule_conv_transform_values_and_gradient():
    rng = np.random.default_rng(3)
    s, h, w, d0, d1, e1, j, k, st = 2, 4, 5, 2, 3, 2, 2, 2, 2
    x = rng.standard_normal((2, s * h * w * d0 * d1))
    text = ('type: "CapsuleConvTransform" capsule_conv_transform_param { stride: %d kh: %d kw: %d '
            'input_capsule_num: %d output_capsule_num: %d input_h: %d input_w: %d '
            'input_capsule_shape { dim: %d dim: %d } output_capsule_shape { dim: %d dim: %d } %s }'
            % (st, k, k, s, j, h, w, d0, d1, d0, e1, FILL))
    layer, y = _setup(text, x)
    oh, ow = (h - k) // st + 1, (w - k) // st + 1
    assert y.shape == (2, oh * ow, k * k * s, j * d0 * e1)
    wt = layer.blobs[0].data.reshape(s, k, k, d1, j * e1)
    b = layer.blobs[1].data.reshape(y.shape[1:])
    X = x.reshape(2, s, h, w, d0, d1)
    for n in range(2):
        for i in range(oh):
            for jj in range(ow):
                for si in range(s):
                    for m in range(k):
                        for q in range(k):
                            got = y[n, i * ow + jj, si * k * k + m * k + q].reshape(d0, j * e1)
                            ref = X[n, si, i * st + m, jj * st + q] @ wt[si, m, q]
                            np.testing.assert_allclose(
                                got, ref + b[i * ow + jj, si * k * k + m * k + q].reshape(d0, -1))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    # overlapping windows: the input gradient sums them
    text1 = text.replace("stride: 2", "stride: 1")
    check_layer_gradient(make_layer(text1), make_blobs([x]), make_blobs(1))


def test_capsule_conv_routing_values_and_gradient():
    rng = np.random.default_rng(4)
    j, oh, ow, k, s, d = 2, 2, 1, 2, 1, 4          # input 3 x 2 with a 2 x 2 kernel, stride 1
    p = j * oh * ow
    x = rng.standard_normal((2, p * k * k * s * d))
    text = ('type: "CapsuleConvRouting" capsule_conv_routing_param { stride: 1 kh: 2 kw: 2 '
            'input_capsule_num: 1 output_capsule_num: 2 input_h: 3 input_w: 2 '
            'output_capsule_shape { dim: 2 dim: 2 } %s }' % WFILL)
    layer, y = _setup(text, x)
    c = layer.blobs[0].data
    u = x.reshape(2, p, k * k * s, d)
    np.testing.assert_allclose(y, np.einsum("pk,npkd->npd", c, u))
    np.testing.assert_allclose(y[1, 3], sum(c[3, kk] * u[1, 3, kk] for kk in range(4)))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_tensor_values_and_gradient():
    rng = np.random.default_rng(5)
    s, j, h, w, k, st = 2, 2, 4, 4, 2, 2
    d0, d1, d2, e2 = 1, 2, 3, 2
    x = rng.standard_normal((2, s * h * w * d0 * d1 * d2))
    text = ('type: "Tensor" capsule_conv_param { stride: %d kh: %d kw: %d input_capsule_num: %d '
            'output_capsule_num: %d input_h: %d input_w: %d input_capsule_shape { dim: %d dim: %d '
            'dim: %d } output_capsule_shape { dim: %d dim: %d dim: %d } %s }'
            % (st, k, k, s, j, h, w, d0, d1, d2, d0, d1, e2, FILL))
    layer, y = _setup(text, x)
    assert layer.blobs[0].shape == (s, j, k, k, d0, d2 * e2)
    oh = (h - k) // st + 1
    assert y.shape == (2, j, oh, oh, d0, d1, e2)
    wt = layer.blobs[0].data.reshape(j, s, k, k, d0, d2, e2)
    b = layer.blobs[1].data.reshape(y.shape[1:])
    X = x.reshape(2, s, h, w, d0, d1, d2)
    ref = np.zeros_like(y)
    for n in range(2):
        for p in range(j):
            for i in range(oh):
                for jj in range(oh):
                    for c in range(d0):
                        acc = b[p, i, jj, c].copy()
                        for si in range(s):
                            for m in range(k):
                                for q in range(k):
                                    acc += X[n, si, i * st + m, jj * st + q, c] @ wt[p, si, m, q, c]
                        ref[n, p, i, jj, c] = acc
    np.testing.assert_allclose(y, ref)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    check_layer_gradient(make_layer(text.replace("stride: 2", "stride: 1")),
                         make_blobs([x]), make_blobs(1))


def test_a_larger_bottom_is_read_as_the_fork_reads_it(caplog):
    rng = np.random.default_rng(6)
    u = rng.standard_normal((2, 7 * 4))             # 28 values a sample, the layer reads 24
    text = ('type: "CapsuleConvRouting" capsule_conv_routing_param { stride: 1 kh: 2 kw: 1 '
            'input_capsule_num: 1 output_capsule_num: 3 input_h: 2 input_w: 1 '
            'output_capsule_shape { dim: 2 dim: 2 } %s }' % WFILL)
    layer, y = _setup(text, u)
    assert "as the fork" in caplog.text
    flat = u.reshape(-1)[:2 * 24].reshape(2, 3, 2, 4)
    np.testing.assert_allclose(y, np.einsum("pk,npkd->npd", layer.blobs[0].data, flat))
    bottom, top = make_blobs([u]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    bottom[0].diff[...] = 5
    layer.backward(top, [True], bottom)
    assert np.all(bottom[0].diff.reshape(-1)[48:] == 0)
    check_layer_gradient(make_layer(text), make_blobs([u]), make_blobs(1))
