import numpy as np

from caffepy.testing import make_blobs, make_layer


def test_moving_normalize_follows_the_fork_gpu_path():
    rng = np.random.default_rng(0)
    layer = make_layer('type: "MovingNormalize"')
    x0 = rng.standard_normal((3, 4))
    bottom, top = make_blobs([x0]), make_blobs(2)
    layer.setup(bottom, top)
    assert layer.layer_param.param[0].lr_mult == 0
    avg = -1.0
    for step in range(3):
        x = rng.standard_normal((3, 4)) * (step + 1)
        bottom[0].data[...] = x
        layer.forward(bottom, top)
        m = np.sqrt((x * x).sum(1) + 1e-12).mean()
        avg = m if avg < 0 else 0.99 * avg + 0.01 * m
        np.testing.assert_allclose(top[1].data, [avg])
        np.testing.assert_allclose(top[0].data, x / avg)
    top[0].diff[...] = rng.standard_normal((3, 4))
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, top[0].diff / avg)


def test_moving_normalize_reads_the_first_n_norms_of_a_spatial_bottom():
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2))
    layer = make_layer('type: "MovingNormalize"')
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    r = np.sqrt((x * x).sum(1) + 1e-12).reshape(-1)
    np.testing.assert_allclose(layer.blobs[0].data, [r[:2].sum() / 8])
