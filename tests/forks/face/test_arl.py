"""ZhiwenShao/ARL's layers (caffepy/forks/face/arl.py, arl_meanfield.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(11)

DIV = ('type: "Division" division_param { width: 2 height: 1 '
       'xcoord: 0 xcoord: 1 ycoord: 0 ycoord: 2 }')
COMB = 'type: "Combination" combination_param { xcoord: 0 xcoord: 2 ycoord: 0 ycoord: 1 }'


def test_division_by_hand_and_gradient():
    x = np.arange(24.0).reshape(1, 2, 3, 4)
    layer = make_layer(DIV)
    a, b = run_layer(layer, make_blobs([x]), make_blobs(2))
    np.testing.assert_array_equal(a, [[[[0, 1]], [[12, 13]]]])     # x 0..1, row 0
    np.testing.assert_array_equal(b, [[[[9, 10]], [[21, 22]]]])    # x 1..2, row 2
    check_layer_gradient(make_layer(DIV), make_blobs([RNG.standard_normal((2, 2, 3, 4))]),
                         make_blobs(2))
    bottom, top = make_blobs([x]), make_blobs(2)
    run_layer(layer, bottom, top)
    top[0].diff[...], top[1].diff[...] = 1.0, 2.0
    bottom[0].diff[...] = 7.0
    layer.backward(top, [True], bottom)
    want = np.zeros((3, 4))
    want[0, 0:2], want[2, 1:3] = 1.0, 2.0
    np.testing.assert_array_equal(bottom[0].diff[0, 1], want)     # outside the patches: 0


def test_division_refusals():
    with pytest.raises(NetError, match="leaves"):
        run_layer(make_layer(DIV.replace("ycoord: 2", "ycoord: 3")),
                  make_blobs([np.zeros((1, 1, 3, 4))]), make_blobs(2))
    with pytest.raises(NetError, match="one xcoord and one ycoord per top"):
        run_layer(make_layer(DIV), make_blobs([np.zeros((1, 1, 3, 4))]), make_blobs(3))
    with pytest.raises(NetError, match="width and height"):
        run_layer(make_layer('type: "Division" division_param { width: 2 xcoord: 0 ycoord: 0 }'),
                  make_blobs([np.zeros((1, 1, 3, 4))]), make_blobs(1))


def test_combination_by_hand_and_gradient():
    a = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])                 # 2 x 2 at (0, 0)
    b = np.array([[[[5.0, 6.0, 7.0]]]])                        # 1 x 3 at x=2, y=1
    y, = run_layer(make_layer(COMB), make_blobs([a, b]), make_blobs(1))
    # top: (1 + 1) x (2 + 3); uncovered places 0
    np.testing.assert_array_equal(y[0, 0], [[1, 2, 0, 0, 0], [3, 4, 5, 6, 7]])
    check_layer_gradient(make_layer(COMB), make_blobs([RNG.standard_normal((2, 3, 2, 2)),
                                                       RNG.standard_normal((2, 3, 1, 3))]),
                         make_blobs(1))


def test_combination_inverts_division_and_refuses_overhang():
    x = RNG.standard_normal((2, 3, 4, 4))
    cut = make_layer('type: "Division" division_param { width: 2 height: 2 xcoord: 0 '
                     'xcoord: 2 xcoord: 0 xcoord: 2 ycoord: 0 ycoord: 0 ycoord: 2 ycoord: 2 }')
    parts = run_layer(cut, make_blobs([x]), make_blobs(4))
    paste = make_layer('type: "Combination" combination_param { xcoord: 0 xcoord: 2 '
                       'xcoord: 0 xcoord: 2 ycoord: 0 ycoord: 0 ycoord: 2 ycoord: 2 }')
    y, = run_layer(paste, make_blobs(parts), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    with pytest.raises(NetError, match="leaves"):
        run_layer(make_layer(COMB), make_blobs([np.zeros((1, 1, 3, 2)), np.zeros((1, 1, 1, 3))]),
                  make_blobs(1))


def test_cosine_similarity_loss_by_hand_and_gradient():
    a = np.array([[1.0, 0.0], [0.6, 0.8]])
    b = np.array([[0.0, 1.0], [0.6, 0.8]])
    layer = make_layer('type: "CosineSimilarityLoss"')
    y, = run_layer(layer, make_blobs([a, b]), make_blobs(1))
    assert np.isclose(y, 1 - (0.0 + 1.0) / 2)
    check_layer_gradient(make_layer('type: "CosineSimilarityLoss"'),
                         make_blobs([RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))]),
                         make_blobs(1), check_bottom=[0, 1])


E6 = 'type: "EuclideanLoss6"'


def test_euclidean_loss6_by_hand():
    p = np.array([[1.0, 2.0, 3.0]])
    t = np.array([[0.0, 9.0, 1.0]])                 # the middle label is missing
    w = np.array([[2.0, 5.0, 1.0]])
    layer = make_layer(E6)
    bottom, top = make_blobs([p, t, w]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    # d = ((1 - 0) 2, 0, (3 - 1) 1) = (2, 0, 2); M = 2; loss = (4 + 4) / 2
    assert np.isclose(y, 4.0)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[2.0, 0.0, 2.0]])   # 2 d / M (the fork's)
    np.testing.assert_allclose(bottom[1].diff, [[-2.0, 0.0, -2.0]])


def test_euclidean_loss6_gradient_with_unit_weights():
    p = RNG.standard_normal((2, 4))
    t = RNG.uniform(0, 5, (2, 4))
    t[0, 1] = 9.0
    w = np.ones((2, 4))
    w[1, 2] = 0.0
    # a missing label (9) stops being one when the check moves it: bottom 1 without them
    check_layer_gradient(make_layer(E6), make_blobs([p, t, w]), make_blobs(1), check_bottom=[0])
    t[0, 1] = 2.0
    check_layer_gradient(make_layer(E6), make_blobs([p, t, w]), make_blobs(1),
                         check_bottom=[0, 1])


SCE3 = ('type: "SigmoidCrossEntropyLoss" bottom: "x" bottom: "t" bottom: "w" '
        'loss_param { normalization: VALID %s }')


def test_weighted_sigmoid_cross_entropy_by_hand_and_gradient():
    x = np.array([[0.0, 2.0, -1.0]])
    t = np.array([[1.0, 0.0, -1.0]])
    w = np.array([[2.0, 0.5, 3.0]])
    layer = make_layer(SCE3 % "ignore_label: -1")
    assert type(layer).__name__ == "WeightedSigmoidCrossEntropyLossLayer"
    y, = run_layer(layer, make_blobs([x, t, w]), make_blobs(1))
    # valid: the first two; terms -(x (t - [x >= 0]) - log(1 + exp(-|x|))) * w
    l0 = np.log(2.0) * 2.0
    l1 = -(2.0 * (0.0 - 1.0) - np.log1p(np.exp(-2.0))) * 0.5
    assert np.isclose(y, (l0 + l1) / 2)
    check_layer_gradient(make_layer(SCE3 % ""),
                         make_blobs([RNG.standard_normal((2, 3)), RNG.uniform(0, 1, (2, 3)),
                                     RNG.uniform(0.5, 2, (2, 3))]),
                         make_blobs(1), check_bottom=[0])
    two = make_layer('type: "SigmoidCrossEntropyLoss" bottom: "x" bottom: "t"')
    assert type(two).__name__ == "SigmoidCrossEntropyLossLayer"


AU3 = ('type: "MultiStageMeanfieldAU3" multi_stage_meanfield_au3_param { num_iterations: %d '
       'theta_alpha: 2 theta_beta: 3 theta_gamma: 1 spatial_filter_weight: 3 '
       'bilateral_filter_weight: 5 }')


def test_meanfield_au3_two_pixels_by_hand():
    # 1 x 2 map, 2 classes, a 5-channel feature map: features differ by 3 in channel 4 only
    # (bilateral exponent -1/8 - 9 / (2 * 9)), so the fifth channel counts, unlike crfasrnn's RGB
    u = np.array([[[[1.0, 0.0]], [[0.0, 1.0]]]])
    f = np.zeros((1, 5, 1, 2))
    f[0, 4, 0, 1] = 3.0
    y, = run_layer(make_layer(AU3 % 2), make_blobs([u, u.copy(), f]), make_blobs(1))
    ks, kb = np.exp(-0.5), np.exp(-0.125 - 0.5)
    un = u[0].reshape(2, 2)
    q = un
    for _ in range(2):
        prob = np.exp(q) / np.exp(q).sum(axis=0)
        s = (np.array([[1, ks], [ks, 1]]) @ prob.T).T / (1 + ks)
        b = (np.array([[1, kb], [kb, 1]]) @ prob.T).T / (1 + kb)
        q = un + (3 * s + 5 * b)                     # W_c = -I, W_s = 3 I, W_b = 5 I
    np.testing.assert_allclose(y.reshape(2, 2), q, rtol=1e-6)


def test_meanfield_au3_gradient_and_refusal():
    u, q0 = RNG.standard_normal((2, 2, 3, 2, 3)) * 0.5
    f = RNG.uniform(0, 4, (2, 4, 2, 3))
    check_layer_gradient(make_layer(AU3 % 3), make_blobs([u, q0, f]), make_blobs(1),
                         check_bottom=[0, 1])
    with pytest.raises(NetError, match="greater than 1"):
        run_layer(make_layer(AU3 % 1), make_blobs([u, q0, f]), make_blobs(1))


NET = '''
name: "arl_excerpt"
input: "data" input_shape { dim: 2 dim: 3 dim: 8 dim: 8 }
input: "label" input_shape { dim: 2 dim: 2 }
input: "weight" input_shape { dim: 2 dim: 2 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1
  weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "conv1_division" type: "Division" bottom: "conv1"
  top: "out_1" top: "out_2" top: "out_3" top: "out_4"
  division_param { width: 4 height: 4
  xcoord: 0 xcoord: 4 xcoord: 0 xcoord: 4
  ycoord: 0 ycoord: 0 ycoord: 4 ycoord: 4 } }
layer { name: "res_1" type: "Convolution" bottom: "out_1" top: "res_1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1
  weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "conv1_combination" type: "Combination" bottom: "res_1" bottom: "out_2"
  bottom: "out_3" bottom: "out_4" top: "conv1_combination"
  combination_param { xcoord: 0 xcoord: 4 xcoord: 0 xcoord: 4
  ycoord: 0 ycoord: 0 ycoord: 4 ycoord: 4 } }
layer { name: "unary" type: "Convolution" bottom: "conv1_combination" top: "unary"
  convolution_param { num_output: 2 kernel_size: 1 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "unary_split" type: "Split" bottom: "unary" top: "au_unary" top: "au_Q0" }
layer { name: "au_crf" type: "MultiStageMeanfieldAU3" bottom: "au_unary" bottom: "au_Q0"
  bottom: "conv1_combination" top: "au_pred"
  param { lr_mult: 0.01 } param { lr_mult: 0.01 } param { lr_mult: 0.001 }
  multi_stage_meanfield_au3_param { num_iterations: 3 compatibility_mode: POTTS threshold: 2
  theta_alpha: 160 theta_beta: 3 theta_gamma: 3 spatial_filter_weight: 3
  bilateral_filter_weight: 5 } }
layer { name: "fc" type: "InnerProduct" bottom: "au_pred" top: "fc"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "fc_split" type: "Split" bottom: "fc" top: "fc_a" top: "fc_b" top: "fc_c" }
layer { name: "all_sigmoid_loss" type: "SigmoidCrossEntropyLoss" bottom: "fc_a" bottom: "label"
  bottom: "weight" top: "all_sigmoid_loss" loss_param { normalization: VALID } }
layer { name: "intensity_loss" type: "EuclideanLoss6" bottom: "fc_b" bottom: "label"
  bottom: "weight" top: "intensity_loss" }
layer { name: "norm" type: "L2Norm" bottom: "fc_c" top: "norm" }
layer { name: "label_norm" type: "L2Norm" bottom: "weight" top: "weight_norm" }
layer { name: "cos_loss" type: "CosineSimilarityLoss" bottom: "norm" bottom: "weight_norm"
  top: "cos_loss" }
'''


def test_excerpt_summary_strict_and_training_step(tmp_path):
    net = strict_excerpt(tmp_path, NET, caffe_pb2.TRAIN)
    net.blobs["data"].data[...] = RNG.standard_normal((2, 3, 8, 8))
    net.blobs["label"].data[...] = [[1, 0], [0, 9]]
    net.blobs["weight"].data[...] = [[1, 1], [0.5, 1]]
    net.forward()
    net.backward()
    assert net.blobs["conv1_combination"].shape == (2, 4, 8, 8)
    assert net.blobs["au_pred"].shape == (2, 2, 8, 8)
    assert all(np.isfinite(net.blobs[k].data).all()
               for k in ("all_sigmoid_loss", "intensity_loss", "cos_loss"))
    assert np.abs(net.layer_by_name("au_crf").blobs[2].diff).sum() > 0
    assert np.abs(net.layer_by_name("conv1").blobs[0].diff).sum() > 0
