import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_sice_l1_loss_is_flownets_default():
    a = np.array([[1.0, -2.0], [0.5, 0.0]])
    b = np.array([[0.0, 0.0], [1.0, 1.0]])
    (loss,) = run_layer(make_layer('type: "L1Loss"'), make_blobs([a, b]), make_blobs(1))
    assert float(loss) == pytest.approx((1 + 2 + 0.5 + 1) / 2)
    rng = np.random.default_rng(14)
    check_layer_gradient(make_layer('type: "L1Loss"'),
                         make_blobs([rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]),
                         make_blobs(1))


def test_regularization_targets_and_gradient():
    x = np.array([[-0.5, 0.1, 0.3, 0.6, 0.9, 1.5]])
    text = ('type: "Regularization" regularization_param { norm: L2 method: Two level1: 0.2 '
            'level2: 0.5 level3: 0.8 value1: 0.1 value2: 0.4 value3: 0.7 value4: 0.95 }')
    layer = make_layer(text)
    bottom, top = make_blobs([x, np.zeros((1, 1))]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    t = np.array([0, 0.1, 0.4, 0.7, 0.95, 1])
    assert float(loss) == pytest.approx(((x[0] - t) ** 2).sum() / 2)
    check_layer_gradient(make_layer(text), make_blobs([x, np.zeros((1, 1))]), make_blobs(1),
                         check_bottom=[0])
    (loss,) = run_layer(make_layer('type: "Regularization"'), make_blobs([x, np.zeros((1, 1))]),
                        make_blobs(1))
    assert float(loss) == pytest.approx(np.abs(x - 0.5).sum() / 2)


def test_weighted_softmax_loss():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((4, 3))
    lab = np.array([0, 2, 1, 2.0])
    w = np.array([1.0, 0.5, 2.0, 0.0])
    layer = make_layer('type: "WeightedSoftmaxWithLoss"')
    (loss,) = run_layer(layer, make_blobs([x, lab, w]), make_blobs(1))
    p = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    assert float(loss) == pytest.approx(-(w * np.log(p[np.arange(4), lab.astype(int)])).sum() / 4)
    x = rng.standard_normal((2, 3, 2, 2))
    lab = rng.integers(0, 3, (2, 2, 2)).astype(float)
    lab[0, 0, 0] = 255
    w = rng.uniform(0.5, 2, (2, 2, 2))
    text = 'type: "WeightedSoftmaxWithLoss" loss_param { ignore_label: 255 normalize: true }'
    check_layer_gradient(make_layer(text), make_blobs([x, lab, w]), make_blobs(1),
                         check_bottom=[0])


def test_sigmoid_euclidean_loss_is_the_forks():
    x = np.array([[0.5, -1.0, 2.0], [0.0, 1.0, -0.5]])
    t = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    layer = make_layer('type: "SigmoidEuclideanLoss"')
    bottom, top = make_blobs([x, t]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    # image 0: P 1, Q 2; image 1 (counts accumulate): P 2, Q 4
    ref = 0.25 * 2 / 3 + (1 + 4) * 1 / 3 + 2.25 * 4 / 6 + (0 + 1) * 2 / 6
    assert float(loss) == pytest.approx(ref / 2)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    s = 1 / (1 + np.exp(-x))
    scale = np.array([[2 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 2 / 3]])
    np.testing.assert_allclose(bottom[0].diff, (s - t) * scale / 2)


def test_accuracy_distance():
    p = np.array([[0.0, 0.0, 1.0, -1.0]])
    t = np.array([[0.0, 0.5, 1.0, 1.0]])
    layer = make_layer('type: "AccuracyDistance" accuracy_distance_param { dh: 5 dw: 5 }')
    (d,) = run_layer(layer, make_blobs([p, t]), make_blobs(1))
    # pixels: (2, 2) vs (2, 3); (4, 0) vs (4, 4): distances 1 and 4
    assert float(d) == pytest.approx((1 + 4) / 2)


def test_semicontrast_loss_values_and_forks_gradient():
    rng = np.random.default_rng(21)
    u, v = rng.standard_normal((3, 2)) * 0.3, rng.standard_normal((3, 2)) * 0.3
    lab = np.array([0.0, 1.0, 0.0])
    text = 'type: "SemiContrastLoss" semicontrast_loss_param { margin: 1.5 feature_index: 1 }'
    layer = make_layer(text)
    bottom, top = make_blobs([u, v, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    d = np.sqrt(((u[:, None] - v[None]) ** 2).sum(2))
    same = lab[:, None] == lab[None]
    ref = np.where(same, d ** 2, np.maximum(1.5 - d, 0) ** 2).sum() / 3 / 2
    assert float(loss) == pytest.approx(ref)
    top[0].diff[...] = 1
    layer.backward(top, [True, True, False], bottom)

    def f(uu, vv):
        return float(run_layer(make_layer(text), make_blobs([uu, vv, lab]), make_blobs(1))[0])
    h = 1e-6
    for which, arr in ((0, u), (1, v)):
        e = np.zeros_like(arr)
        e[1, 0] = h
        args = [(u + e, v), (u - e, v)] if which == 0 else [(u, v + e), (u, v - e)]
        num = (f(*args[0]) - f(*args[1])) / (2 * h)
        assert bottom[which].diff[1, 0] == pytest.approx(2 * num, rel=1e-3)


def test_ssim_loss_values_and_gradient():
    rng = np.random.default_rng(25)
    x = rng.uniform(0, 1, (1, 2, 5, 6))
    y = rng.uniform(0, 1, (1, 2, 5, 6))
    text = 'type: "SSIMLoss" ssim_loss_param { kernel_size: 3 stride: 2 c1: 0.01 c2: 0.03 }'
    (loss,) = run_layer(make_layer(text), make_blobs([x, x]), make_blobs(1))
    # x against itself: l = c = 1 on full windows; the clipped last column of windows (P_w = 3,
    # 6 = 2 * 2 + 3 - 1) still gives l = 1 and c = 1
    assert float(loss) == pytest.approx(0, abs=1e-9)
    (loss,) = run_layer(make_layer(text), make_blobs([x, y]), make_blobs(1))
    assert float(loss) > 0
    check_layer_gradient(make_layer(text), make_blobs([x, y]), make_blobs(1), check_bottom=[0])
