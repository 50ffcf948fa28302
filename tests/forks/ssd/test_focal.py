"""The detection forks' focal losses (forks.ssd.focal): FocalLoss with axis / engine and SSD's
MultiBoxFocalLoss, by hand and through the gradient checker."""
import numpy as np
import pytest

from caffepy.forks.face.focal import FocalLossLayer
from caffepy.forks.ssd.focal import MultiBoxFocalLossLayer, SoftmaxFocalLossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.forks.ssd.test_multibox import LAYER, _bottoms

RNG = np.random.default_rng(7)


def _softmax(x, axis=1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_detection_focal_loss_is_the_variant_with_axis_or_engine():
    assert isinstance(make_layer('type: "FocalLoss" focal_loss_param { axis: 1 }'),
                      SoftmaxFocalLossLayer)
    assert isinstance(make_layer('type: "FocalLoss" focal_loss_param { engine: CAFFE gamma: 1 }'),
                      SoftmaxFocalLossLayer)
    plain = make_layer('type: "FocalLoss" focal_loss_param { gamma: 1 }')
    assert isinstance(plain, FocalLossLayer) and not isinstance(plain, SoftmaxFocalLossLayer)


def test_detection_focal_loss_hand_computed():
    x = np.array([[1.0, 2.0, 0.0], [0.5, 0.5, 3.0], [0.0, -1.0, 1.0]])
    lab = np.array([1, 0, 2])
    p = _softmax(x)
    pt = p[[0, 1, 2], lab]
    layer = make_layer('type: "FocalLoss" focal_loss_param { axis: 1 }')   # alpha 0.25, gamma 2
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    assert np.isclose(loss, -np.sum(0.25 * (1 - pt) ** 2 * np.log(pt)) / 3)
    # the gradient is the derivative of -alpha (1 - p_t)^gamma log p_t: a central difference
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    h, num = 1e-6, np.zeros_like(x)
    for i in range(3):
        for c in range(3):
            e = np.zeros_like(x)
            e[i, c] = h
            lo = run_layer(make_layer('type: "FocalLoss" focal_loss_param { axis: 1 }'),
                           make_blobs([x - e, lab]), make_blobs(1))[0]
            hi = run_layer(make_layer('type: "FocalLoss" focal_loss_param { axis: 1 }'),
                           make_blobs([x + e, lab]), make_blobs(1))[0]
            num[i, c] = (hi - lo) / (2 * h)
    np.testing.assert_allclose(bottom[0].diff, num, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fields", ["axis: 1 alpha: 0.5 gamma: 1.5",
                                    "engine: CAFFE gamma: 0"])
def test_detection_focal_loss_gradient_on_maps(fields):
    x = RNG.standard_normal((2, 4, 3, 2))
    lab = RNG.integers(0, 4, (2, 1, 3, 2)).astype(float)
    lab[0, 0, 1, 1] = 255
    layer = make_layer('type: "FocalLoss" focal_loss_param { %s } '
                       'loss_param { ignore_label: 255 }' % fields)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])


def test_detection_focal_loss_gamma_0_alpha_1_is_softmax_loss():
    x, lab = RNG.standard_normal((5, 3)), RNG.integers(0, 3, 5)
    (focal,) = run_layer(make_layer('type: "FocalLoss" focal_loss_param { axis: 1 alpha: 1 '
                                    'gamma: 0 }'), make_blobs([x, lab]), make_blobs(1))
    (soft,) = run_layer(make_layer('type: "SoftmaxWithLoss"'), make_blobs([x, lab]),
                        make_blobs(1))
    assert np.isclose(focal, soft, rtol=1e-12)


def test_detection_focal_loss_axes_must_agree():
    x, lab = RNG.standard_normal((2, 3, 4)), np.zeros((2, 3))
    with pytest.raises(Exception, match="axis"):
        run_layer(make_layer('type: "FocalLoss" focal_loss_param { axis: 2 }'),
                  make_blobs([x, lab]), make_blobs(1))


MB_FOCAL = LAYER.replace('"MultiBoxLoss"', '"MultiBoxFocalLoss"')


def test_multibox_focal_loss_hand_case():
    """MultiBoxLoss's hand case with the focal term: mining still picks prior C (the largest
    -log p(background)), and the positive A and negative C each add -a (1 - p_t)^g log p_t."""
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    loc = np.array([0.5, -0.2, 0.1, 2.0, 0, 0, 0, 0, 0, 0, 0, 0])[None]
    layer = make_layer(MB_FOCAL % "neg_pos_ratio: 1" + " focal_loss_param { alpha: 0.5 gamma: 2 }")
    (loss,) = run_layer(layer, _bottoms(conf, loc), make_blobs(1))
    (plain,) = run_layer(make_layer(LAYER % "neg_pos_ratio: 1"), _bottoms(conf, loc),
                         make_blobs(1))
    pa, pc = _softmax(conf[0:1])[0, 1], _softmax(conf[2:3])[0, 0]
    ce = -np.log(pa) - np.log(pc)
    focal = -0.5 * ((1 - pa) ** 2 * np.log(pa) + (1 - pc) ** 2 * np.log(pc))
    np.testing.assert_allclose(loss, plain - ce + focal, rtol=1e-12)      # VALID: 1 match


def test_multibox_focal_loss_gradient_and_logistic():
    rng = np.random.default_rng(0)
    conf, loc = rng.standard_normal((3, 3)), 0.3 * rng.standard_normal((1, 12))
    for extra in ("mining_type: NONE", "neg_pos_ratio: 3 loc_weight: 2"):
        layer = make_layer(MB_FOCAL % extra)
        assert isinstance(layer, MultiBoxFocalLossLayer)
        check_layer_gradient(layer, _bottoms(conf, loc), make_blobs(1), check_bottom=[0, 1])
    # LOGISTIC: MultiBoxLoss's sigmoid cross entropy, unchanged
    text = "conf_loss_type: LOGISTIC neg_pos_ratio: 3"
    (focal,) = run_layer(make_layer(MB_FOCAL % text), _bottoms(conf, loc), make_blobs(1))
    (plain,) = run_layer(make_layer(LAYER % text), _bottoms(conf, loc), make_blobs(1))
    assert focal == plain
