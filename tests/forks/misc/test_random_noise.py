import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.forks.nets import forward, train_step


def test_random_noise_param_parses():
    p = caffe_pb2.RandomNoiseParameter()
    assert (p.mu, p.sigma, p.adaptive_sigma) == (0.0, 1.0, False)
    assert abs(p.adaptive_factor - 0.1) < 1e-7
    lp = proto_io.read_net('layer { name: "rn" type: "RandomNoise" bottom: "x" top: "y" '
                           'random_noise_param { adaptive_sigma: true adaptive_factor: 1 } }'
                           ).layer[0]
    assert lp.random_noise_param.adaptive_sigma and lp.random_noise_param.adaptive_factor == 1


def _noise(text, x, seed=5):
    caffepy.set_random_seed(seed)
    return run_layer(make_layer('type: "RandomNoise" random_noise_param { %s }' % text),
                     make_blobs([x]), make_blobs(1))[0]


def test_fixed_noise_has_mu_and_sigma():
    y = _noise("mu: 2 sigma: 0.5", np.zeros((4, 50, 50)) + 1.0)
    assert abs((y - 1.0).mean() - 2.0) < 0.02 and abs((y - 1.0).std() - 0.5) < 0.02


def test_adaptive_noise_scales_with_each_value():
    x = np.array([0.0] * 5000 + [1.0] * 5000 + [-4.0] * 5000)
    z = _noise("adaptive_sigma: true adaptive_factor: 0.5 mu: 7", x) - x
    # sigma = 0.5 |x|, and 0.5 mean|x| = 0.5 * 5/3 where x = 0; mu is not used
    for part, sigma in ((z[:5000], 0.5 * 5 / 3), (z[5000:10000], 0.5), (z[10000:], 2.0)):
        assert abs(part.mean()) < 4 * sigma / np.sqrt(5000)
        assert abs(part.std() / sigma - 1) < 0.05


def test_the_gradient_passes_straight_through():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))
    check_layer_gradient(make_layer('type: "RandomNoise" random_noise_param { sigma: 0.3 }'),
                         make_blobs([x]), make_blobs(1))
    # adaptive: the fork's backward copies the top diff (sigma's dependence on x is not followed)
    layer = make_layer('type: "RandomNoise" random_noise_param { adaptive_sigma: true }')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = rng.standard_normal(x.shape)
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, top[0].diff)


@pytest.mark.parametrize("text,x,message", [
    ("sigma: 0", np.ones(3), "sigma must be positive"),
    ("adaptive_sigma: true", np.zeros(3), "standard deviation is 0")])
def test_zero_sigma_is_refused(text, x, message):
    with pytest.raises(NetError, match=message):
        _noise(text, x)


NET = """
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 12 dim: 12 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 5 stride: 3
                            weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "rn1" type: "RandomNoise" bottom: "conv1" top: "rn1"
        random_noise_param { adaptive_sigma: true adaptive_factor: 1 } }
layer { name: "output" type: "InnerProduct" bottom: "rn1" top: "output"
        inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "output" bottom: "label" top: "loss" }
"""


def test_random_noise_net_excerpt_runs_and_trains():
    forward(NET, batch=2)
    train_step(NET, batch=2)
