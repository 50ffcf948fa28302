"""R-FCN's own caffe (daijifeng001/caffe-rfcn): SoftmaxWithLoss with a per-instance top, SmoothL1Loss
with one weight bottom, LossParameter normalisation and a per-instance top (forks/detection/rfcn.py)."""
import numpy as np
import pytest

from caffepy.forks.detection.rfcn import RFCNSmoothL1LossLayer, RFCNSoftmaxWithLossLayer
from caffepy.layers.loss_regression import SmoothL1LossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

SOFTMAX3 = 'type: "SoftmaxWithLoss" bottom: "s" bottom: "l" top: "loss" top: "prob" top: "per" '
SMOOTH3 = 'type: "SmoothL1Loss" bottom: "p" bottom: "t" bottom: "w" top: "loss" top: "per" '


def test_variants_are_chosen_by_blob_counts():
    assert isinstance(make_layer(SOFTMAX3), RFCNSoftmaxWithLossLayer)
    assert not isinstance(make_layer('type: "SoftmaxWithLoss" bottom: "s" bottom: "l" top: "loss"'),
                          RFCNSoftmaxWithLossLayer)
    assert isinstance(make_layer(SMOOTH3), RFCNSmoothL1LossLayer)
    four = make_layer('type: "SmoothL1Loss" bottom: "a" bottom: "b" bottom: "c" bottom: "d" top: "l"')
    assert type(four) is SmoothL1LossLayer             # py-faster-rcnn's (inside + outside weights)


def test_softmax_with_loss_per_instance_top():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 1, 1))
    label = np.array([2, -1, 0, 1], float).reshape(4, 1, 1, 1)
    layer = make_layer(SOFTMAX3 + 'loss_param { ignore_label: -1 }')
    loss, prob, per = run_layer(layer, make_blobs([x, label]), make_blobs(3))
    p = np.exp(x[:, :, 0, 0]) / np.exp(x[:, :, 0, 0]).sum(1, keepdims=True)
    ref = [-np.log(p[0, 2]), 0.0, -np.log(p[2, 0]), -np.log(p[3, 1])]
    assert per.shape == (4, 1, 1, 1)                   # like the labels
    np.testing.assert_allclose(per.ravel(), ref, rtol=1e-6)
    np.testing.assert_allclose(loss, sum(ref) / 3, rtol=1e-6)      # VALID: 3 labels count
    np.testing.assert_allclose(prob[:, :, 0, 0], p, rtol=1e-6)
    # the gradient is of the loss top only (the fork reads no diff of the other two tops)
    check_layer_gradient(make_layer(SOFTMAX3 + 'loss_param { ignore_label: -1 }'),
                         make_blobs([x, label]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("norm, expect", [("", 4 * 2), ("loss_param { normalization: BATCH_SIZE }", 4),
                                          ("loss_param { normalization: PRE_FIXED pre_fixed_normalizer: 256 }", 256),
                                          ("loss_param { normalization: NONE }", 1)])
def test_smooth_l1_loss_numbers(norm, expect):
    x = np.array([0.5, -2.0, 3.0, 0.2, 0.0, 1.5, -0.4, 4.0] * 2).reshape(4, 2, 2, 1)
    t = np.zeros_like(x)
    w = np.ones_like(x)
    w[1] = 0.0                                        # an ignored RoI: weight 0
    layer = make_layer(SMOOTH3 + norm)
    loss, per = run_layer(layer, make_blobs([x, t, w]), make_blobs(2))
    # f(d) = 0.5 d^2 (|d| < 1) else |d| - 0.5, by hand per element
    f = {0.5: 0.125, -2.0: 1.5, 3.0: 2.5, 0.2: 0.02, 0.0: 0.0, 1.5: 1.0, -0.4: 0.08, 4.0: 3.5}
    err = np.vectorize(f.get)(x) * w
    assert per.shape == (4, 1, 2, 1)                   # N x 1 x H x W, summed over channels
    np.testing.assert_allclose(per, err.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(loss, err.sum() / expect, rtol=1e-6)


def test_smooth_l1_loss_gradient_with_0_1_weights():
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((5, 8)) * 2, rng.standard_normal((5, 8))
    w = (rng.random((5, 8)) > 0.4).astype(float)
    check_layer_gradient(make_layer(SMOOTH3), make_blobs([x, t, w]), make_blobs(1),
                         check_bottom=[0, 1], kink_range=1e-2)


def test_smooth_l1_loss_backward_is_the_forks():
    """The fork's backward does not multiply by the weight again: f'(w (a - b)) * top_diff / norm."""
    x, t, w = np.array([[0.4, 3.0]]), np.zeros((1, 2)), np.array([[0.5, 0.5]])
    layer = make_layer(SMOOTH3)
    bottom, top = make_blobs([x, t, w]), make_blobs(2)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0.2, 1.0]])   # d = 0.2, 1.5; VALID: N*H*W = 1


def test_smooth_l1_loss_ignores_a_weights_gradient_request():
    """Asked for a gradient to the weights (bottom 2) it leaves them alone, as the fork's backward
    (bottoms 0 and 1 only) does, and still gives the predictions theirs."""
    x, t, w = np.array([[0.4, 3.0]]), np.zeros((1, 2)), np.array([[0.5, 0.5]])
    layer = make_layer(SMOOTH3)
    bottom, top = make_blobs([x, t, w]), make_blobs(2)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    bottom[2].diff[...] = 7.0
    layer.backward(top, [True, False, True], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0.2, 1.0]])
    assert (bottom[2].diff == 7.0).all()
