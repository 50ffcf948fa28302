import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_l2_norm_normalises_each_sample_without_epsilon():
    x = np.random.default_rng(0).standard_normal((3, 2, 2, 2))
    y, = run_layer(make_layer('type: "L2Norm"'), make_blobs([x]), make_blobs(1))
    flat = x.reshape(3, -1)
    np.testing.assert_allclose(y.reshape(3, -1), flat / np.linalg.norm(flat, axis=1)[:, None])
    check_layer_gradient(make_layer('type: "L2Norm"'), make_blobs([x]), make_blobs(1))


def test_l2_norm_with_l2norm_param_divides_each_pixel_by_its_channel_norm():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 2, 4))
    x[1, :, 0, 0] = 0
    text = 'type: "L2Norm" l2norm_param { l2_length: 2 }'
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    r = np.sqrt((x ** 2 / 2).sum(axis=1, keepdims=True))
    r[r == 0] = 1
    np.testing.assert_allclose(y, x / r)
    top[0].diff[...] = rng.standard_normal(x.shape)
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, top[0].diff / r)
