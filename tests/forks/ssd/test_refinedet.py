"""RefineDet's MultiBoxLoss with the ARM bottoms: hand cases from the fork's rules."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.ssd.refinedet import RefineDetMultiBoxLossLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PRIORS = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0.0, 0.5, 0.5, 1.0]])
VAR = np.tile([0.1, 0.1, 0.2, 0.2], (3, 1))
LAYER = ('type: "MultiBoxLoss" bottom: "loc" bottom: "conf" bottom: "prior" bottom: "label" '
         'bottom: "arm_conf" %s loss_param { normalization: VALID } multibox_loss_param { '
         'num_classes: 3 code_type: CENTER_SIZE neg_pos_ratio: 1 }')
CONF = np.array([[0.0, 1.0, 0.0],      # prior A: matched to the gt, class 1
                 [2.0, 0.0, 0.0],      # prior B: an easy negative
                 [0.0, 1.0, 1.0]])     # prior C: the hard negative
# ARM offsets moving prior A (centre 0.25, 0.25, size 0.5) exactly onto the gt [0, 0, 0.4, 0.5]
ARM_LOC = np.array([-1.0, 0.0, np.log(0.8) / 0.2, 0.0] + [0.0] * 8)[None]


def _bottoms(loc, objectness, arm_loc=None):
    priors = np.stack([PRIORS.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]
    arm_conf = np.stack([1 - objectness, objectness], axis=1).reshape(1, 6)
    blobs = [loc, CONF.reshape(1, 9), priors, gt, arm_conf]
    return make_blobs(blobs + ([] if arm_loc is None else [arm_loc]))


def _ce(x, label):
    e = np.exp(x - x.max())
    return -np.log(e[label] / e.sum())


def _smooth(d):
    return np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5).sum()


LOC = np.array([0.5, -0.2, 0.1, 2.0, 0, 0, 0, 0, 0, 0, 0, 0])[None]


def test_arm_objectness_filters_the_negatives():
    layer = make_layer(LAYER % "")
    assert isinstance(layer, RefineDetMultiBoxLossLayer)
    (loss,) = run_layer(layer, _bottoms(LOC, np.array([0.9, 0.9, 0.005])), make_blobs(1))
    t = np.array([(0.2 - 0.25) / 0.5 / 0.1, 0.0, np.log(0.4 / 0.5) / 0.2, 0.0])
    # C (objectness 0.005 < 0.01) cannot be mined: B is the negative
    want = _smooth(LOC[0, :4] - t) + _ce(CONF[0], 1) + _ce(CONF[1], 0)
    np.testing.assert_allclose(loss, want, rtol=1e-6)


def test_arm_offsets_refine_the_priors_and_gradient():
    proto = LAYER % 'bottom: "arm_loc"'
    (loss,) = run_layer(make_layer(proto), _bottoms(LOC, np.ones(3), ARM_LOC), make_blobs(1))
    # the refined A is the gt itself: its target is 0; C is the hard negative
    want = _smooth(LOC[0, :4]) + _ce(CONF[0], 1) + _ce(CONF[2], 0)
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    loc = 0.3 * np.random.default_rng(0).standard_normal((1, 12))
    check_layer_gradient(make_layer(proto), _bottoms(loc, np.ones(3), ARM_LOC), make_blobs(1),
                         check_bottom=[0, 1])


def test_arm_bottom_shape_error():
    with pytest.raises(NetError, match="arm conf"):
        bottoms = _bottoms(LOC, np.ones(3))
        bottoms[4].reshape((1, 4))
        run_layer(make_layer(LAYER % ""), bottoms, make_blobs(1))


DO = ('type: "DetectionOutput" bottom: "odm_loc" bottom: "odm_conf" bottom: "prior" bottom: "%s" '
      '%s detection_output_param { num_classes: 2 code_type: CENTER_SIZE '
      'confidence_threshold: 0.01 nms_param { nms_threshold: 0.45 } }')


def _do_bottoms(fourth, arm_loc=None):
    pri = np.stack([PRIORS[:2].reshape(-1), VAR[:2].reshape(-1)])[None]
    conf = np.array([[0.2, 0.8, 0.1, 0.9]])
    blobs = [np.zeros((1, 8)), conf, pri, fourth]
    return make_blobs(blobs + ([] if arm_loc is None else [arm_loc]))


def test_detection_output_with_arm_objectness_and_offsets():
    arm_conf = np.array([[0.1, 0.9, 0.995, 0.005]])   # B's objectness is under 0.01
    layer = make_layer(DO % ("arm_conf", 'bottom: "arm_loc"'), dtype=np.float64)
    (out,) = run_layer(layer, _do_bottoms(arm_conf, ARM_LOC[:, :8]), make_blobs(1))
    # B scores (1, 0): no detection; A's box is its ARM-refined prior (zero ODM offsets)
    np.testing.assert_allclose(out.reshape(-1, 7), [[0, 1, 0.8, 0, 0, 0.4, 0.5]], atol=1e-12)


def test_detection_output_fourth_bottom_of_ssd_is_ignored():
    layer = make_layer(DO % ("label", ""), dtype=np.float64)
    (out,) = run_layer(layer, _do_bottoms(np.zeros((1, 1, 1, 8))), make_blobs(1))
    np.testing.assert_allclose(out.reshape(-1, 7), [[0, 1, 0.9, 0.5, 0.5, 1, 1],
                                                    [0, 1, 0.8, 0, 0, 0.5, 0.5]], atol=1e-12)
    with pytest.raises(NetError, match="arm loc"):
        run_layer(make_layer(DO % ("arm_conf", 'bottom: "arm_loc"')),
                  _do_bottoms(np.ones((1, 4)), np.zeros((1, 4))), make_blobs(1))
