import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

TEXT = ('type: "CenterCosLoss" center_cos_loss_param { num_output: 3 '
        'center_cos_filler { type: "gaussian" std: 1 } }')


def _cos(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_forward_is_minus_the_summed_cosines():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 5)), np.array([0, 2, 2, 1.0])
    layer = make_layer(TEXT)
    (loss,) = run_layer(layer, make_blobs([x, y]), make_blobs(1))
    c = layer.blobs[0].data
    assert float(loss) == pytest.approx(-sum(_cos(x[i], c[int(y[i])]) for i in range(4)))


def test_feature_gradient_is_the_fork_s_over_the_batch():
    rng = np.random.default_rng(1)
    # batch 1: the fork's dx (dL/dx / M) is the true gradient
    x, y = rng.standard_normal((1, 4)), np.array([1.0])
    check_layer_gradient(make_layer(TEXT), make_blobs([x, y]), make_blobs(1), check_bottom=[0],
                         check_params=False)
    # batch 3: dL/dx / 3
    x, y = rng.standard_normal((3, 4)), np.array([1, 0, 1.0])
    layer = make_layer(TEXT)
    bottom, top = make_blobs([x, y]), make_blobs(1)
    run_layer(layer, bottom, top)
    layer.blobs[0].diff[...] = 0
    layer.backward(top, [True, False], bottom)
    c = layer.blobs[0].data
    h = 1e-6
    num = np.zeros_like(x)
    for i in range(3):
        for k in range(4):
            for s in (1, -1):
                xp = x.copy()
                xp[i, k] += s * h
                num[i, k] += s * -sum(_cos(xp[j], c[int(y[j])]) for j in range(3)) / (2 * h)
    np.testing.assert_allclose(bottom[0].diff, num / 3, rtol=1e-5, atol=1e-8)
    # the centre diff: + d cos / dc averaged over 1 + n_j items (class 1 has two, 0 one, 2 none)
    ref = np.zeros_like(c)
    for j, items in ((0, [1]), (1, [0, 2])):
        for i in items:
            for k in range(4):
                cp, cm = c[j].copy(), c[j].copy()
                cp[k] += h
                cm[k] -= h
                ref[j, k] += (_cos(x[i], cp) - _cos(x[i], cm)) / (2 * h)
        ref[j] /= 1 + len(items)
    np.testing.assert_allclose(layer.blobs[0].diff, ref, rtol=1e-5, atol=1e-8)


NET = '''
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 6 } shape { dim: 2 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label"
        top: "softmax_loss" }
layer { name: "center_cos_loss" type: "CenterCosLoss" bottom: "ip1" bottom: "label"
        top: "center_cos_loss" param { lr_mult: 1 decay_mult: 0 } loss_weight: 0.1
        center_cos_loss_param { num_output: 3 center_cos_filler { type: "xavier" } } }
'''


def test_small_net():
    forward(NET, labels=3)
    train_step(NET, labels=3)
