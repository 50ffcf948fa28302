import numpy as np
import pytest

from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step


def test_boost_uniform_int_follows_the_default_seeded_mt19937():
    from caffepy.forks.misc.perturb import BoostUniformInt
    draws = BoostUniformInt(0, 10000)
    # std/boost mt19937 with its default seed 5489 starts 3499211612, 581869302, 3890346734;
    # boost's bucket for 10001 values is 2**32 // 10001 = 429453 (no reject among these)
    assert draws.bucket == 429453
    assert list(draws.draw(3)) == [3499211612 // 429453, 581869302 // 429453,
                                   3890346734 // 429453]


def test_random_gain_and_pass_through_backward():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    layer = make_layer('type: "Random" random_param { scale: 2 }')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    from caffepy.forks.misc.perturb import BoostUniformInt
    k = BoostUniformInt(0, 10000).draw(6).reshape(2, 3)
    np.testing.assert_allclose(y, x * (k + 1000) / 10000 * 2)
    # a second instance draws the same sequence (a default-seeded engine per layer)
    (y2,) = run_layer(make_layer('type: "Random" random_param { scale: 2 }'), make_blobs([x]),
                      make_blobs(1))
    np.testing.assert_array_equal(y, y2)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = np.arange(6.0).reshape(2, 3)
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, top[0].diff)     # the fork copies the diff


def test_gradient_scaler_schedule_and_gradient():
    text = ('type: "GradientScaler" gradient_scaler_param { lower_bound: 0.3 upper_bound: 1 '
            'alpha: 10 max_iter: 100 }')
    x = np.random.default_rng(0).standard_normal((2, 3))
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    assert layer.coeff == 1.0
    layer.set_iter(50)
    h = 0.7
    assert layer.coeff == pytest.approx(2 * h / (1 + np.exp(-10 * 0.5)) - h + 0.3, rel=1e-6)
    layer.set_iter(1000)                                  # progress capped at 1
    assert layer.coeff == pytest.approx(2 * h / (1 + np.exp(-10)) - h + 0.3, rel=1e-6)
    # with coefficient c the layer is y = x whose gradient is -c dy: check against -c * identity
    layer = make_layer('type: "GradientScaler" gradient_scaler_param { upper_bound: 1 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.5
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, -1.5)
    with pytest.raises(Exception, match="scale_factor"):
        run_layer(make_layer('type: "GradientScaler" gradient_scaler_param { scale_factor: 2 }'),
                  make_blobs([x]), make_blobs(1))


def test_gradient_scaler_v1_file_parses():
    net = proto_io.read_net('''name: "t" input: "a"
      input_dim: 1 input_dim: 2 input_dim: 1 input_dim: 1
      layers { name: "grl" type: GRADIENT_SCALER bottom: "a" top: "b"
               gradient_scaler_param { lower_bound: 0.3 max_iter: 10000 } }''')
    assert net.layer[-1].type == "GradientScaler"
    assert net.layer[-1].gradient_scaler_param.lower_bound == pytest.approx(0.3)


def test_gradient_scaler_gradient_check():
    # lower = upper = -1 makes the schedule's c = -1 once the solver reports an iteration:
    # the backward -c dy is then the identity's true gradient, which the checker confirms
    layer = make_layer('type: "GradientScaler" gradient_scaler_param { lower_bound: -1 '
                       'upper_bound: -1 }')
    x = np.random.default_rng(1).standard_normal((2, 3))
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.set_iter(0)
    assert layer.coeff == -1.0
    from caffepy.testing import GradientChecker
    GradientChecker().check(layer, bottom, top, first_setup=False)


def test_mixup_scalar_and_onehot_labels():
    import caffepy
    x = np.arange(12.0).reshape(4, 3)
    labels = np.array([0, 1, 2, 1.0])
    caffepy.set_random_seed(3)
    layer = make_layer('type: "Mixup" mixup_param { alpha: 0.2 cls_num: 3 }')
    data, soft = run_layer(layer, make_blobs([x, labels]), make_blobs(2))
    caffepy.set_random_seed(3)
    rng = np.random.default_rng(3)
    perm = rng.permutation(4)
    lam = rng.beta(0.2, 0.2)
    np.testing.assert_allclose(data, lam * x + (1 - lam) * x[perm])
    ref = np.zeros((4, 3))
    for i in range(4):
        ref[i, int(labels[i])] += lam
        ref[i, int(labels[perm[i]])] += 1 - lam
    np.testing.assert_allclose(soft, ref)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0)
    onehot = np.eye(3)[labels.astype(int)]
    caffepy.set_random_seed(3)
    _, soft2 = run_layer(make_layer('type: "Mixup" mixup_param { alpha: 0.2 }'),
                         make_blobs([x, onehot]), make_blobs(2))
    np.testing.assert_allclose(soft2, ref)
    with pytest.raises(Exception, match="class count"):
        run_layer(make_layer('type: "Mixup"'), make_blobs([x, labels]), make_blobs(2))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 4 dim: 4 } shape { dim: 2 } } }
layer { name: "rnd" type: "Random" bottom: "data" top: "rnd" random_param { scale: 1 } }
layer { name: "ip1" type: "InnerProduct" bottom: "rnd" top: "ip1"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "grl" type: "GradientScaler" bottom: "ip1" top: "grl"
        gradient_scaler_param { lower_bound: 0.3 max_iter: 100 } }
layer { name: "ip2" type: "InnerProduct" bottom: "grl" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
'''


def test_small_net():
    forward(NET, labels=3)
    train_step(NET, labels=3)
