"""happynear's LabelSpecific* / Arccos / Noise and arcface-caffe's CombinedMargin (forks.face.margin)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TRAIN, TEST = caffe_pb2.TRAIN, caffe_pb2.TEST
X = np.array([[0.5, -0.2, 0.1], [0.3, 0.6, -0.4], [-0.1, 0.2, 0.7]])
LAB = np.array([0, 1, 2])
R = np.arange(3)


def test_label_specific_margin_hard_numbers_and_gradient():
    text = 'type: "LabelSpecificMargin" label_specific_margin_param { margin_base: 30 }'
    y, m = run_layer(make_layer(text, phase=TRAIN), make_blobs([X, LAB]), make_blobs(2))
    # margin_base set: m = 30 + (1 + 1 * 0)^1 - 1 = 30 degrees on the first forward
    assert m[0] == 30
    want = X.copy()
    want[R, LAB] = np.cos(np.arccos(X[R, LAB]) + np.pi / 6)     # cos(theta + 30 degrees)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    (t,) = run_layer(make_layer(text, phase=TEST), make_blobs([X, LAB]), make_blobs(1))
    np.testing.assert_array_equal(t, X)
    fixed = 'type: "LabelSpecificMargin" label_specific_margin_param { margin_base: 30 gamma: 0 }'
    check_layer_gradient(make_layer(fixed, phase=TRAIN), make_blobs([X, LAB]), make_blobs(1),
                         check_bottom=[0])


def test_label_specific_margin_schedule_soft_bound_and_pass_bp():
    layer = make_layer('type: "LabelSpecificMargin" label_specific_margin_param { margin_base: 2 '
                       'gamma: 1 power: 2 margin_max: 7 }', phase=TRAIN)
    bottom, top = make_blobs([X, LAB]), make_blobs(2)
    run_layer(layer, bottom, top)
    seen = [top[1].data[0]]
    for _ in range(2):
        layer.forward(bottom, top)
        seen.append(top[1].data[0])
    assert seen == [2, 2 + 4 - 1, 7]      # 2 + (1 + it)^2 - 1 for it = 0, 1, 2, capped at 7
    soft = make_layer('type: "LabelSpecificMargin" label_specific_margin_param { type: SOFT '
                      'margin_base: 2 gamma: 0 }', phase=TRAIN)
    (y,) = run_layer(soft, make_blobs([X, LAB]), make_blobs(1))
    th = np.arccos(X[R, LAB])
    th = np.where(2 * th > np.pi - 1e-4, np.pi - 1e-4, th)
    np.testing.assert_allclose(y[R, LAB], np.cos(2 * th))
    x = np.array([[0.3, 0.1], [0.4, -0.3]])   # gradient 2 sin(2 theta) / sin(theta) = 4x in [0, 2]
    check_layer_gradient(soft, make_blobs([x, np.array([0, 0])]), make_blobs(1), check_bottom=[0])
    hard = make_layer('type: "LabelSpecificMargin" label_specific_margin_param { margin_base: 60 '
                      'gamma: 0 pass_bp: true }', phase=TRAIN)
    bottom, top = make_blobs([X, LAB]), make_blobs(1)
    run_layer(hard, bottom, top)
    top[0].diff[...] = 1.5
    hard.backward(top, [True, False], bottom)
    np.testing.assert_array_equal(bottom[0].diff, 1.5)
    hard = make_layer('type: "LabelSpecificMargin" label_specific_margin_param { margin_base: 60 '
                      'gamma: 0 }', phase=TRAIN)
    x = np.array([[-0.9, 0.1]])     # cos 60 + c sin 60 / sqrt(1 - c^2) < 0: bounded to 0
    bottom, top = make_blobs([x, np.array([0])]), make_blobs(1)
    run_layer(hard, bottom, top)
    top[0].diff[...] = 1.0
    hard.backward(top, [True, False], bottom)
    np.testing.assert_array_equal(bottom[0].diff, [[0.0, 1.0]])


def test_label_specific_margin_auto_tune_and_margin_bottom():
    layer = make_layer('type: "LabelSpecificMargin" label_specific_margin_param { auto_tune: true '
                       'margin_base: 0 gamma: 0 }', phase=TRAIN)
    y, stats = run_layer(layer, make_blobs([X, LAB]), make_blobs(2))
    ang = np.degrees(np.arccos(X))
    pos = ang[R, LAB].mean()
    neg = (ang.sum() - ang[R, LAB].sum()) / 6
    np.testing.assert_allclose(stats, [(neg - pos) / 2, pos, neg])   # iteration 1: the batch means
    want = X.copy()
    want[R, LAB] = np.cos(np.arccos(X[R, LAB]) + np.radians((neg - pos) / 2))
    np.testing.assert_allclose(y, want)
    three = make_layer('type: "LabelSpecificMargin"', phase=TRAIN)
    y, m = run_layer(three, make_blobs([X, LAB, np.array([45.0])]), make_blobs(2))
    assert m[0] == 45
    np.testing.assert_allclose(y[0, 0], np.cos(np.arccos(0.5) + np.pi / 4))


def test_label_specific_affine():
    ang = np.arccos(X)
    text = ('type: "LabelSpecificAffine" label_specific_affine_param { scale_base: 1.2 '
            'scale_min: 0 scale_max: 2 bias_base: 0.1 bias_min: -1 bias_max: 1 power_base: 1.5 '
            'power_gamma: 0 power_min: 0 power_max: 3 }')
    y, coef = run_layer(make_layer(text, phase=TRAIN), make_blobs([ang, LAB]), make_blobs(2))
    np.testing.assert_allclose(coef, [1.2, 0.1, 1.5])
    want = ang.copy()
    want[R, LAB] = np.minimum(ang[R, LAB] ** 1.5 * 1.2 * np.pi ** -0.5 + 0.1, np.pi - 1e-4)
    np.testing.assert_allclose(y, want)
    (t, coef) = run_layer(make_layer(text, phase=TEST), make_blobs([ang, LAB]), make_blobs(2))
    np.testing.assert_array_equal(t, ang)
    np.testing.assert_array_equal(coef, [1, 0, 1])
    check_layer_gradient(make_layer(text, phase=TRAIN), make_blobs([ang, LAB]), make_blobs(1),
                         check_bottom=[0])
    anneal = make_layer('type: "LabelSpecificAffine" label_specific_affine_param { scale_base: 1 '
                        'scale_gamma: 1 scale_power: 1 scale_max: 5 iteration: 2 }', phase=TRAIN)
    _, coef = run_layer(anneal, make_blobs([ang, LAB]), make_blobs(2))
    assert coef[0] == 3                                   # 1 * (1 + 1 * 2)^1
    with pytest.raises(NetError, match="auto_tune"):
        run_layer(make_layer('type: "LabelSpecificAffine" label_specific_affine_param '
                             '{ auto_tune: true }'), make_blobs([ang, LAB]), make_blobs(1))


def test_label_specific_rescale():
    text = ('type: "LabelSpecificRescale" label_specific_rescale_param { positive_weight: 0.5 '
            'negative_weight: 2 bias_fix: true }')
    y, w = run_layer(make_layer(text, phase=TRAIN), make_blobs([X, LAB]), make_blobs(2))
    want = 2 * X
    want[R, LAB] = 0.5 * X[R, LAB] + 0.5
    np.testing.assert_allclose(y, want)
    assert w[0] == 0.5
    check_layer_gradient(make_layer(text, phase=TRAIN), make_blobs([X, LAB]), make_blobs(1),
                         check_bottom=[0])
    (t,) = run_layer(make_layer(text, phase=TEST), make_blobs([X, LAB]), make_blobs(1))
    np.testing.assert_array_equal(t, X)
    power = ('type: "LabelSpecificRescale" label_specific_rescale_param { positive_weight: 3 '
             'for_ip: true power_on_positive: true }')
    x = np.array([[0.5, -0.2], [-0.4, 0.3]])
    (y,) = run_layer(make_layer(power, phase=TRAIN), make_blobs([x, np.array([0, 0])]),
                     make_blobs(1))
    np.testing.assert_allclose(y, [[0.125, -0.2], [-0.4, 0.3]])   # row 2: label score <= 0
    check_layer_gradient(make_layer(power, phase=TRAIN), make_blobs([x, np.array([0, 0])]),
                         make_blobs(1), check_bottom=[0])
    anneal = make_layer('type: "LabelSpecificRescale" label_specific_rescale_param { '
                        'positive_weight_base: 4 gamma: 1 power: 1 positive_weight_min: 1.5 }',
                        phase=TRAIN)
    bottom, top = make_blobs([X, LAB]), make_blobs(2)
    run_layer(anneal, bottom, top)
    assert top[1].data[0] == 2                           # 4 (1 + 1)^-1 at iteration 1
    anneal.forward(bottom, top)
    assert top[1].data[0] == 1.5                         # 4 / 3 raised to the minimum


def test_label_specific_hard_margin():
    text = ('type: "LabelSpecificHardMargin" '
            'label_specific_hard_margin_param { positive_weight: 0.25 }')
    layer = make_layer(text, phase=TRAIN)
    bottom, top = make_blobs([X, LAB]), make_blobs(2)
    y, m = run_layer(layer, bottom, top)
    # row 0: others' mean (-0.2 + 0.1) / 2 = -0.05; y = 0.25 * 0.5 + 0.75 * -0.05 = 0.0875
    np.testing.assert_allclose(y[0], [0.0875, -0.2, 0.1])
    margins = [0.75 * (n - s) for s, n in ((0.5, -0.05), (0.6, -0.05), (0.7, 0.05))]
    np.testing.assert_allclose(m[0], sum(margins) / (3 * np.pi / 180))
    top[0].diff[...] = np.arange(9.0).reshape(3, 3)
    layer.backward(top, [True, False], bottom)
    np.testing.assert_array_equal(bottom[0].diff, np.arange(9.0).reshape(3, 3))  # the fork's copy
    check_layer_gradient(make_layer(text, phase=TEST), make_blobs([X, LAB]), make_blobs(1),
                         check_bottom=[0])


def test_arccos_and_noise():
    layer = make_layer('type: "Arccos"')
    (y,) = run_layer(layer, make_blobs([X]), make_blobs(1))
    np.testing.assert_allclose(y, np.arccos(X))
    check_layer_gradient(layer, make_blobs([X]), make_blobs(1))
    bottom, top = make_blobs([np.array([[0.995, 0.0]])]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[-1 / np.sqrt(1 - 0.99 ** 2), -1.0]])
    x = np.full((200, 50), 2.0)                          # rms 2: noise std 2 * 0.5 = 1
    (y,) = run_layer(make_layer('type: "Noise" noise_param { gaussian_std: 0.5 bias: 3 }',
                                phase=TRAIN), make_blobs([x]), make_blobs(1))
    n = y - x
    assert abs(n.mean() - 3) < 0.05 and abs(n.std() - 1) < 0.05
    (y,) = run_layer(make_layer('type: "Noise" noise_param { uniform_range: 0.5 }', phase=TRAIN),
                     make_blobs([x]), make_blobs(1))
    assert np.abs(y - x).max() <= 0.5 and abs((y - x).std() - 0.5 / np.sqrt(3)) < 0.02
    test = make_layer('type: "Noise" noise_param { gaussian_std: 0.5 }', phase=TEST)
    (y,) = run_layer(test, make_blobs([X]), make_blobs(1))
    np.testing.assert_array_equal(y, X)
    check_layer_gradient(test, make_blobs([X]), make_blobs(1))


def test_combined_margin():
    text = 'type: "CombinedMargin" combined_margin_param { m1: 1.25 m2: 0.375 m3: 0.125 }'
    lab = np.array([0, -1, 2])                                 # row 2: no label, left alone
    (y,) = run_layer(make_layer(text), make_blobs([X, lab]), make_blobs(1))
    want = X.copy()
    want[0, 0] = np.cos(1.25 * np.arccos(0.5) + 0.375) - 0.125
    want[2, 2] = np.cos(1.25 * np.arccos(0.7) + 0.375) - 0.125
    np.testing.assert_allclose(y, want)
    check_layer_gradient(make_layer(text), make_blobs([X, lab]), make_blobs(1), check_bottom=[0])
    (y,) = run_layer(make_layer('type: "CombinedMargin" combined_margin_param { m2: 0.5 }'),
                     make_blobs([X, LAB]), make_blobs(1))     # ArcFace: cos(theta + 0.5)
    np.testing.assert_allclose(y[R, LAB], np.cos(np.arccos(X[R, LAB]) + 0.5))


# Face nets shrunk from the forks' published train files: xialuxi/arcface-caffe's (PReLU residual
# 20-layer SphereFace trunk, Normalize, normalized InnerProduct without bias, the margin layer on
# the cosines, a fixed Scale of 64, softmax) with CombinedMargin in place of its CosinAddm, and
# happynear's angular-margin variant (LabelSpecificMargin in degrees, Noise on the features) and
# its AM-Softmax "auto" net (GlobalLSEMargin with its learned scale).
TRUNK = """
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { mirror: true mean_value: 127.5 scale: 0.0078125 }
  data_param { source: "train_lmdb" batch_size: 4 backend: LMDB } }
layer { name: "conv1_1" type: "Convolution" bottom: "data" top: "conv1_1"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1
    weight_filler { type: "xavier" } bias_filler { type: "constant" value: 0 } } }
layer { name: "relu1_1" type: "PReLU" bottom: "conv1_1" top: "conv1_1" }
layer { name: "conv1_2" type: "Convolution" bottom: "conv1_1" top: "conv1_2"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 0 decay_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 stride: 1 pad: 1
    weight_filler { type: "gaussian" std: 0.01 } bias_filler { type: "constant" value: 0 } } }
layer { name: "relu1_2" type: "PReLU" bottom: "conv1_2" top: "conv1_2" }
layer { name: "res1_2" type: "Eltwise" bottom: "conv1_1" bottom: "conv1_2" top: "res1_2"
  eltwise_param { operation: 1 } }
layer { name: "fc5" type: "InnerProduct" bottom: "res1_2" top: "fc5"
  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 8 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0 } } }
"""
COSINES = """
layer { name: "norm_fc5" type: "Normalize" bottom: "%s" top: "norm_fc5" }
layer { name: "fc6" type: "InnerProduct" bottom: "norm_fc5" top: "fc6" param { lr_mult: 1 }
  inner_product_param { num_output: 6 normalize: true weight_filler { type: "xavier" }
    bias_term: false } }
"""
SCALED_SOFTMAX = """
layer { name: "fc6_margin_scale" type: "Scale" bottom: "fc6_margin" top: "fc6_margin_scale"
  param { lr_mult: 0 decay_mult: 0 } scale_param { filler { type: "constant" value: %d } } }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "fc6_margin_scale" bottom: "label"
  top: "softmax_loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "fc6_margin_scale" bottom: "label"
  top: "accuracy" include { phase: TRAIN } }
"""
ARCFACE = TRUNK + COSINES % "fc5" + """
layer { name: "combined_margin" type: "CombinedMargin" bottom: "fc6" bottom: "label"
  top: "fc6_margin" combined_margin_param { m1: 1 m2: 0.3 m3: 0.2 } }
""" + SCALED_SOFTMAX % 64
ANGULAR = TRUNK + """
layer { name: "noise" type: "Noise" bottom: "fc5" top: "fc5_noise"
  noise_param { gaussian_std: 0.1 } }
""" + COSINES % "fc5_noise" + """
layer { name: "label_specific_margin" type: "LabelSpecificMargin" bottom: "fc6" bottom: "label"
  top: "fc6_margin" top: "margin" label_specific_margin_param { margin_base: 20 gamma: 0 } }
""" + SCALED_SOFTMAX % 30
FOCAL = TRUNK + COSINES % "fc5" + """
layer { name: "cosin_add_m" type: "CosinAddm" bottom: "fc6" bottom: "label" top: "fc6_margin"
  cosin_add_m_param { m: 0.5 } }
layer { name: "fc6_margin_scale" type: "Scale" bottom: "fc6_margin" top: "fc6_margin_scale"
  param { lr_mult: 0 decay_mult: 0 } scale_param { filler { type: "constant" value: 64 } } }
layer { name: "focal_loss" type: "FocalLoss" bottom: "fc6_margin_scale" bottom: "label"
  top: "softmax_loss" focal_loss_param { type: ORIGIN gamma: 2 alpha: 0.25 beta: 1 }
  loss_weight: 1 }
"""


AUTO = TRUNK + """
layer { name: "norm1" type: "Normalize" bottom: "fc5" top: "norm1"
  normalize_param { bp_norm: true } }
layer { name: "fc6" type: "InnerProduct" bottom: "norm1" top: "fc6" param { lr_mult: 1 }
  inner_product_param { num_output: 6 normalize: true weight_filler { type: "xavier" }
    bias_term: false } }
layer { name: "margin" type: "GlobalLSEMargin" bottom: "fc6" bottom: "label" top: "fc6_margin_scale"
  top: "statistics" }
layer { name: "softmax_loss" type: "SoftmaxWithLoss" bottom: "fc6_margin_scale" bottom: "label"
  top: "softmax_loss" loss_weight: 1 softmax_param { normalize_type: "Softmax" } }
layer { name: "Accuracy" type: "Accuracy" bottom: "fc6" bottom: "label" top: "accuracy"
  accuracy_param { min_is_better: false } }
"""


@pytest.mark.parametrize("text", [ARCFACE, ANGULAR, FOCAL, AUTO],
                         ids=["combined_margin", "angular_margin", "cosin_add_m_focal",
                              "global_lse_margin"])
def test_margin_face_nets_forward_and_train_step(text):
    from ..nets import forward, train_step
    net = forward(text, phase=TRAIN, labels=6)   # the fork's file has a TRAIN data layer only
    assert net.blobs["fc6_margin_scale"].shape == (1, 6)
    assert np.isfinite(float(net.blobs["softmax_loss"].data))
    train_step(text, labels=6, batch=4)


def test_adacos_add_m_scale():
    from caffepy.forks.face.arcface import AdaCosAddmScaleLayer
    lab = np.array([0, 1, 2])
    layer = make_layer('type: "AdaCosAddmScale" '
                       'adacos_add_m_scale_param { m: 0.5 num_classes: 10 }')
    (y,) = run_layer(layer, make_blobs([X, lab]), make_blobs(1))
    s0 = np.sqrt(2) * np.log(9)
    keep = np.ones((3, 3))
    keep[R, lab] = 0
    s1 = np.log(np.exp(s0 * X * keep).sum() / 3) / np.cos(min(np.arccos(X).mean(), np.pi / 4))
    want = X.copy()
    want[R, lab] = np.cos(np.arccos(X[R, lab]) + 0.5)
    np.testing.assert_allclose(y, s1 * want)
    assert np.isclose(layer.s, s1)

    class HeldScale(AdaCosAddmScaleLayer):     # the fork does not differentiate s: hold it
        def _update_scale(self, x, rows, lab):
            self.s = 3.0

    held = HeldScale(make_layer('type: "AdaCosAddmScale"').layer_param, dtype=np.float64)
    check_layer_gradient(held, make_blobs([X, lab]), make_blobs(1), check_bottom=[0])


def test_norm_l2_and_normalize_bp_norm_without_its_top():
    x = np.arange(12.0).reshape(2, 3, 2) - 5
    layer = make_layer('type: "NormL2"')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    n = np.sqrt((x.reshape(2, -1) ** 2).sum(1) + 1e-7)
    np.testing.assert_allclose(y, x / n[:, None, None])
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    # happynear's Normalize ignores bp_norm without the norm top (xialuxi's and AMSoftmax's nets)
    norm = make_layer('type: "Normalize" normalize_param { bp_norm: true }')
    (y,) = run_layer(norm, make_blobs([X]), make_blobs(1))
    np.testing.assert_allclose(y, X / np.sqrt((X ** 2).sum(1, keepdims=True) + 1e-6))
    check_layer_gradient(norm, make_blobs([X]), make_blobs(1))
