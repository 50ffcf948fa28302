import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.face.amsoftmax import FeatureNormalizeLayer, NormalizedInnerProductLayer
from caffepy.layers.normalization import NormalizeLayer
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)


def test_center_loss_numbers_and_center_update():
    x = np.array([[1.0, 2.0], [3.0, 0.0], [0.0, 1.0]])
    lab = np.array([0, 0, 1])
    layer = make_layer('type: "CenterLoss" center_loss_param { num_output: 2 '
                       'center_filler { type: "constant" value: 0.5 } }')
    (loss,) = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    d = x - 0.5
    assert np.isclose(loss, (d ** 2).sum() / 3 / 2)
    top = make_blobs(1)
    bottom = make_blobs([x, lab])
    layer.forward(bottom, top)
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, 2.0 * d / 3)
    # centre 0: two members, (c - x1 + c - x2) / 3; centre 1: one member, (c - x3) / 2
    np.testing.assert_allclose(layer.blobs[0].diff, [-(d[0] + d[1]) / 3, -d[2] / 2])


def test_center_loss_gradient_on_features():
    x = RNG.standard_normal((4, 3))
    layer = make_layer('type: "CenterLoss" center_loss_param { num_output: 3 '
                       'center_filler { type: "gaussian" } }')
    check_layer_gradient(layer, make_blobs([x, np.array([0, 2, 1, 2])]), make_blobs(1),
                         check_bottom=[0], check_params=False)


def _psi_ref(m, theta):
    k = np.floor(theta * m / np.pi)
    return (-1) ** k * np.cos(m * theta) - 2 * k


@pytest.mark.parametrize("kind,m", [("DOUBLE", 2), ("TRIPLE", 3), ("QUADRUPLE", 4)])
def test_margin_inner_product_matches_psi_of_the_paper(kind, m):
    x = RNG.standard_normal((5, 4))
    lab = np.array([0, 1, 2, 1, 0])
    layer = make_layer('type: "MarginInnerProduct" margin_inner_product_param { num_output: 3 '
                       'type: %s weight_filler { type: "gaussian" } base: 1000 gamma: 0.5 '
                       'power: 2 lambda_min: 5 iteration: 10 }' % kind)
    y, lam = run_layer(layer, make_blobs([x, lab]), make_blobs(2))
    lam_want = max(1000 * (1 + 0.5 * 11) ** -2, 5)
    assert np.isclose(lam[0], lam_want)
    w = layer.blobs[0].data
    np.testing.assert_allclose(np.linalg.norm(w, axis=1), 1)
    xn = np.linalg.norm(x, axis=1)
    plain = x @ w.T
    theta = np.arccos(plain[np.arange(5), lab] / xn)
    want = plain.copy()
    want[np.arange(5), lab] = (xn * _psi_ref(m, theta) + lam_want * plain[np.arange(5), lab]) \
        / (1 + lam_want)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)


def test_margin_inner_product_backward_is_the_forks():
    x = RNG.standard_normal((3, 4))
    lab = np.array([2, 0, 1])
    layer = make_layer('type: "MarginInnerProduct" margin_inner_product_param { num_output: 3 '
                       'type: DOUBLE weight_filler { type: "gaussian" } base: 0 }')
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    dy = RNG.standard_normal((3, 3))
    top[0].diff[...] = dy
    layer.backward(top, [True, False], bottom)
    w = layer.blobs[0].data
    want = dy @ w
    for i, j in enumerate(lab):
        xn = np.linalg.norm(x[i])
        c = x[i] @ w[j] / xn
        a, b = 4 * np.sign(c) * c, -(2 * np.sign(c) * c * c + 1) / xn
        r = np.hypot(a, b)
        want[i] += dy[i, j] * ((a / r) * w[j] + (b / r) * x[i] - w[j])
    np.testing.assert_allclose(bottom[0].diff, want, rtol=1e-10)
    np.testing.assert_allclose(layer.blobs[0].diff, dy.T @ x)


def test_margin_inner_product_single_gradient():
    x = RNG.standard_normal((3, 4))
    layer = make_layer('type: "MarginInnerProduct" margin_inner_product_param { num_output: 3 '
                       'weight_filler { type: "gaussian" } }')
    check_layer_gradient(layer, make_blobs([x, np.array([0, 1, 2])]), make_blobs(1),
                         check_bottom=[0], check_params=False)


def test_label_specific_add_train_and_test():
    x = np.array([[0.5, 0.2], [0.1, 0.9], [0.3, 0.4]])
    lab = np.array([0, 1, 0])
    text = 'type: "LabelSpecificAdd" label_specific_add_param { bias: -0.35 }'
    (y,) = run_layer(make_layer(text, phase=caffe_pb2.TRAIN), make_blobs([x, lab]),
                     make_blobs(1))
    np.testing.assert_allclose(y, [[0.15, 0.2], [0.1, 0.55], [0.3, 0.4]])  # 0.3 <= 0.35: kept
    (y,) = run_layer(make_layer(text, phase=caffe_pb2.TEST), make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_allclose(y, x)
    anneal = make_layer('type: "LabelSpecificAdd" label_specific_add_param { bias_base: 0 '
                        'bias_gamma: 1 bias_power: 1 bias_min: 0 bias_max: 0.5 }',
                        phase=caffe_pb2.TRAIN)
    bottom, top = make_blobs([x, lab]), make_blobs(2)
    run_layer(anneal, bottom, top)
    assert top[1].data[0] == 0
    anneal.forward(bottom, top)
    assert np.isclose(top[1].data[0], 0.5)  # 0 + (1 + 1)^1 - 1 = 1, clipped to 0.5
    check_layer_gradient(make_layer(text, phase=caffe_pb2.TRAIN),
                         make_blobs([x + 1, lab]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("kind", ["L2", "L1"])
def test_feature_normalize(kind):
    x = RNG.standard_normal((2, 3, 2, 2)) + 0.1
    layer = make_layer('type: "Normalize" normalize_param { normalize_type: "%s" }' % kind)
    assert isinstance(layer, FeatureNormalizeLayer)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    n = np.sqrt((x ** 2).sum(1, keepdims=True) + 1e-6) if kind == "L2" else \
        np.abs(x).sum(1, keepdims=True) + 1e-6
    np.testing.assert_allclose(y, x / n)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    assert isinstance(make_layer('type: "Normalize" norm_param { across_spatial: false }'),
                      NormalizeLayer)


def test_normalized_inner_product():
    x = RNG.standard_normal((2, 3))
    layer = make_layer('type: "InnerProduct" inner_product_param { num_output: 4 normalize: true '
                       'bias_term: false weight_filler { type: "gaussian" std: 3 } }')
    assert isinstance(layer, NormalizedInnerProductLayer)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w = layer.blobs[0].data
    np.testing.assert_allclose((w ** 2).sum(1), 1, rtol=1e-5)
    np.testing.assert_allclose(y, x @ w.T)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1), check_params=False)


# Face nets shrunk from the forks' published train files: SphereFace (MarginInnerProduct with its
# lambda top, PReLU residual blocks), caffe-face (CenterLoss beside the softmax, loss_weight 0.008),
# AM-Softmax (Normalize, normalized InnerProduct, LabelSpecificAdd, fixed Scale of 30).
FACE_HEAD = """
name: "face-mini"
layer { name: "data" type: "ImageData" top: "data" top: "label"
  image_data_param { source: "list.txt" batch_size: 4 new_height: 12 new_width: 10 }
  transform_param { mean_value: 127.5 scale: 0.0078125 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "PReLU" bottom: "conv1" top: "conv1" }
layer { name: "conv1_2" type: "Convolution" bottom: "conv1" top: "conv1_2"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "relu1_2" type: "PReLU" bottom: "conv1_2" top: "conv1_2" }
layer { name: "res1" type: "Eltwise" bottom: "conv1" bottom: "conv1_2" top: "res1"
  eltwise_param { operation: SUM } }
layer { name: "fc5" type: "InnerProduct" bottom: "res1" top: "fc5"
  inner_product_param { num_output: 8 weight_filler { type: "xavier" } } }
"""
SPHEREFACE = FACE_HEAD + """
layer { name: "fc6" type: "MarginInnerProduct" bottom: "fc5" bottom: "label" top: "fc6" top: "lambda"
  param { lr_mult: 1 decay_mult: 1 }
  margin_inner_product_param { num_output: 6 type: QUADRUPLE weight_filler { type: "xavier" }
    base: 1000 gamma: 0.12 power: 1 lambda_min: 5 iteration: 0 } }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "fc6" bottom: "label" top: "softmax_loss" }
"""
CENTER = FACE_HEAD + """
layer { name: "fc6" type: "InnerProduct" bottom: "fc5" top: "fc6"
  inner_product_param { num_output: 6 weight_filler { type: "xavier" } } }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "fc6" bottom: "label" top: "softmax_loss" }
layer { name: "center_loss" type: "CenterLoss" bottom: "fc5" bottom: "label" top: "center_loss"
  param { lr_mult: 1 decay_mult: 2 }
  center_loss_param { num_output: 6 center_filler { type: "xavier" } } loss_weight: 0.008 }
"""
AMSOFTMAX = FACE_HEAD + """
layer { name: "norm1" type: "Normalize" bottom: "fc5" top: "norm1" }
layer { name: "fc6_l2" type: "InnerProduct" bottom: "norm1" top: "fc6"
  param { lr_mult: 1 decay_mult: 1 }
  inner_product_param { num_output: 6 normalize: true bias_term: false weight_filler { type: "xavier" } } }
layer { name: "label_specific_margin" type: "LabelSpecificAdd" bottom: "fc6" bottom: "label" top: "fc6_margin"
  label_specific_add_param { bias: -0.35 } }
layer { name: "fc6_margin_scale" type: "Scale" bottom: "fc6_margin" top: "fc6_margin_scale"
  param { lr_mult: 0 decay_mult: 0 } scale_param { filler { type: "constant" value: 30 } } }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "fc6_margin_scale" bottom: "label" top: "softmax_loss" }
"""


@pytest.mark.parametrize("text", [SPHEREFACE, CENTER, AMSOFTMAX], ids=["sphereface", "center",
                                                                      "amsoftmax"])
def test_face_nets_forward_and_train_step(text):
    from ..nets import forward, train_step
    net = forward(text, labels=6)
    assert net.blobs["fc6"].shape == (1, 6)
    train_step(text, labels=6, batch=4)


@pytest.mark.parametrize("kind,m", [("DOUBLE", 2), ("TRIPLE", 3), ("QUADRUPLE", 4)])
def test_large_margin_inner_product(kind, m):
    x = RNG.standard_normal((4, 3))
    lab = np.array([1, 0, 2, 1])
    text = ('type: "LargeMarginInnerProduct" largemargin_inner_product_param { num_output: 3 '
            'type: %s weight_filler { type: "gaussian" std: 2 } base: 4 gamma: 1 power: 1 }' % kind)
    layer = make_layer(text)
    y, lam = run_layer(layer, make_blobs([x, lab]), make_blobs(2))
    assert np.isclose(lam[0], 4 / 2.0)
    w = layer.blobs[0].data
    plain = x @ w.T
    r = np.arange(4)
    xn, wn = np.linalg.norm(x, axis=1), np.linalg.norm(w[lab], axis=1)
    theta = np.arccos(plain[r, lab] / (xn * wn))
    want = plain.copy()
    want[r, lab] = (xn * wn * _psi_ref(m, theta) + 2 * plain[r, lab]) / 3
    np.testing.assert_allclose(y, want, rtol=1e-10)
    steady = text.replace("base: 4 gamma: 1", "base: 0.5 gamma: 0")  # lambda fixed across calls
    check_layer_gradient(make_layer(steady), make_blobs([x, lab]), make_blobs(1),
                         check_bottom=[0])


def test_channel_scale_and_flip():
    x, a = RNG.standard_normal((2, 3, 2, 2)), RNG.standard_normal((2, 1, 2, 2))
    layer = make_layer('type: "ChannelScale"')
    (y,) = run_layer(layer, make_blobs([x, a]), make_blobs(1))
    np.testing.assert_allclose(y, x * a)
    check_layer_gradient(layer, make_blobs([x, a]), make_blobs(1))
    flip = make_layer('type: "Flip" flip_param { flip_width: true flip_height: true }')
    (f,) = run_layer(flip, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(f, x[:, :, ::-1, ::-1])
    check_layer_gradient(flip, make_blobs([x]), make_blobs(1))


def test_normalize_bp_norm_and_softmax_guard():
    x = RNG.standard_normal((3, 4)) + 0.2
    layer = make_layer('type: "Normalize" normalize_param { bp_norm: true }')
    y, n = run_layer(layer, make_blobs([x]), make_blobs(2))
    np.testing.assert_allclose(n.reshape(-1), np.sqrt((x ** 2).sum(1) + 1e-6))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(2))
    ok = make_layer('type: "SoftmaxWithLoss" softmax_param { normalize_type: "Softmax" }')
    (loss,) = run_layer(ok, make_blobs([x, np.array([0, 1, 3])]), make_blobs(1))
    p = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    assert np.isclose(loss, -np.log(p[[0, 1, 2], [0, 1, 3]]).mean())
    with pytest.raises(NetError, match="not supported"):
        run_layer(make_layer('type: "SoftmaxWithLoss" softmax_param { hard_ratio: 0.5 }'),
                  make_blobs([x, np.array([0, 1, 3])]), make_blobs(1))


def test_cosin_add_m():
    x = np.array([[0.8, 0.1, -0.3], [0.2, -0.95, 0.5]])
    lab = np.array([0, 1])
    layer = make_layer('type: "CosinAddm" cosin_add_m_param { m: 0.5 }')
    (y,) = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    want = x.copy()
    want[0, 0] = np.cos(np.arccos(0.8) + 0.5)                 # ArcFace: cos(theta + m)
    want[1, 1] = -0.95 - np.sin(np.pi - 0.5) * 0.5             # theta + m past pi: the linear branch
    np.testing.assert_allclose(y, want)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
