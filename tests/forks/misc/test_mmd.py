"""DAN's MMDLoss: the sampled linear-time MMD with the same draws as the layer."""
import numpy as np

from caffepy import common
from caffepy.forks.misc.mmd import draw_quads
from caffepy.testing import make_blobs, make_layer, run_layer

TEXT = 'type: "MMDLoss" mmd_param { kernel_num: 3 kernel_mul: 2 }'


def _kernel(a, b, gammas):
    return sum(np.exp(-g * np.sum((a - b) ** 2)) for g in gammas)


def _gammas(x, y):
    z = np.concatenate([x, y])
    n = len(z)
    band = sum(np.sum((z[i] - z[j]) ** 2) for i in range(n) for j in range(n))
    gamma = (n * n - n) / band
    return [gamma / 2 ** 1 * 2 ** i for i in range(3)]


def _sampled(x, y, quads, gammas):
    loss = 0.0
    for s1, s2, t1, t2 in quads:
        loss += (_kernel(x[s1], x[s2], gammas) + _kernel(y[t1], y[t2], gammas)
                 - _kernel(x[s1], y[t2], gammas) - _kernel(x[s2], y[t1], gammas))
    return loss


def test_mmd_loss_and_gradient_with_the_layers_draws():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 3)) + 0.5
    gammas = _gammas(x, y)
    layer, bottom, top = make_layer(TEXT), make_blobs([x, y]), make_blobs(1)
    layer.setup(bottom, top)
    common.set_random_seed(5)
    layer.forward(bottom, top)
    common.set_random_seed(5)
    quads = draw_quads(common.rng(), 4, 3, 4)
    np.testing.assert_allclose(top[0].data, _sampled(x, y, quads, gammas), rtol=1e-12)
    # backward: fresh draws; the gradient of those draws' terms / their count (gamma fixed)
    common.set_random_seed(9)
    top[0].diff[...] = 0.5
    layer.backward(top, [True, True], bottom)
    common.set_random_seed(9)
    quads = draw_quads(common.rng(), 4, 3, 4)
    h = 1e-6
    for blob, arr in ((bottom[0], x), (bottom[1], y)):
        for idx in np.ndindex(arr.shape):
            arr[idx] += h
            up = _sampled(x, y, quads, gammas)
            arr[idx] -= 2 * h
            down = _sampled(x, y, quads, gammas)
            arr[idx] += h
            num = (up - down) / (2 * h) * 0.5 / 4
            np.testing.assert_allclose(blob.diff[idx], num, rtol=1e-5, atol=1e-9)


def test_mmd_fix_gamma_keeps_the_first_bandwidth():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    layer = make_layer('type: "MMDLoss" mmd_param { fix_gamma: true }')
    bottom, top = make_blobs([x, y]), make_blobs(1)
    run_layer(layer, bottom, top)
    first = layer.gamma
    bottom[0].data[...] *= 3
    layer.forward(bottom, top)
    assert layer.gamma == first
