"""SSD's MultiBoxLoss: a hand-computed case, the gradient checker, and matching rules."""
import numpy as np
import pytest

from caffepy import zoo
from caffepy.forks.ssd.multibox import match
from caffepy.net import Net
from caffepy.proto import io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PRIORS = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0.0, 0.5, 0.5, 1.0]])
VAR = np.tile([0.1, 0.1, 0.2, 0.2], (3, 1))
LAYER = ('type: "MultiBoxLoss" loss_param { normalization: VALID } multibox_loss_param { '
         'num_classes: 3 code_type: CENTER_SIZE %s }')


def _bottoms(conf, loc=None):
    loc = np.zeros((1, 12)) if loc is None else loc
    priors = np.stack([PRIORS.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]
    return make_blobs([loc, conf.reshape(1, 9), priors, gt])


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_multibox_loss_hand_case():
    conf = np.array([[0.0, 1.0, 0.0],      # prior A: matched to the gt (IoU 0.8), class 1
                     [2.0, 0.0, 0.0],      # prior B: confident background: an easy negative
                     [0.0, 1.0, 1.0]])     # prior C: the hard negative
    loc = np.array([0.5, -0.2, 0.1, 2.0, 0, 0, 0, 0, 0, 0, 0, 0])[None]
    layer = make_layer(LAYER % "neg_pos_ratio: 1")
    (loss,) = run_layer(layer, _bottoms(conf, loc), make_blobs(1))
    # encode gt [0, 0, 0.4, 0.5] against prior A (centre 0.25, 0.25, size 0.5)
    t = np.array([(0.2 - 0.25) / 0.5 / 0.1, (0.25 - 0.25) / 0.5 / 0.1,
                  np.log(0.4 / 0.5) / 0.2, np.log(0.5 / 0.5) / 0.2])
    d = loc[0, :4] - t
    smooth = np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5).sum()
    ce = -np.log(_softmax(conf[0])[1]) - np.log(_softmax(conf[2])[0])
    np.testing.assert_allclose(loss, smooth + ce, rtol=1e-12)      # VALID: 1 match


def test_multibox_loss_logistic_hand_case():
    conf = np.array([[0.0, 1.0, 0.0], [2.0, -3.0, -3.0], [-1.0, 1.0, 1.0]])
    layer = make_layer(LAYER % "neg_pos_ratio: 1 conf_loss_type: LOGISTIC")
    (loss,) = run_layer(layer, _bottoms(conf), make_blobs(1))

    def bce(x, t):
        s = 1 / (1 + np.exp(-x))
        return -(t * np.log(s) + (1 - t) * np.log(1 - s)).sum()
    t = np.array([(0.2 - 0.25) / 0.5 / 0.1, 0.0, np.log(0.4 / 0.5) / 0.2, 0.0])
    smooth = np.where(np.abs(t) < 1, 0.5 * t * t, np.abs(t) - 0.5).sum()
    # positive A (class 1); the hard negative is C (its background BCE sum beats B's)
    want = smooth + bce(conf[0], np.eye(3)[1]) + bce(conf[2], np.eye(3)[0])
    np.testing.assert_allclose(loss, want, rtol=1e-10)


def test_multibox_loss_gradient():
    rng = np.random.default_rng(0)
    conf, loc = rng.standard_normal((3, 3)), 0.3 * rng.standard_normal((1, 12))
    for extra in ("mining_type: NONE", "neg_pos_ratio: 3 loc_weight: 2",
                  "conf_loss_type: LOGISTIC neg_pos_ratio: 3"):
        layer = make_layer(LAYER % extra)
        check_layer_gradient(layer, _bottoms(conf, loc), make_blobs(1), check_bottom=[0, 1])


def test_match_bipartite_then_per_prediction():
    priors = np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.9, 0.9], [0.5, 0.5, 1.0, 1.0]])
    gt = np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.95, 0.95]])
    idx, best = match(priors, gt, per_prediction=False, threshold=0.5)
    # the global best pair (prior 0, gt 0) first, then the best left for gt 1: prior 1
    assert idx.tolist() == [0, 1, -1]
    idx, best = match(priors, gt, per_prediction=True, threshold=0.2)
    assert idx.tolist() == [0, 1, 0] and np.isclose(best[2], 0.25)   # 0.25 vs 0.2025 / 0.95


TINY_SSD = """name: "tiny_ssd_train"
layer { name: "data" type: "AnnotatedData" top: "data" top: "label" include { phase: TRAIN }
  transform_param { mirror: true mean_value: 104 mean_value: 117 mean_value: 123
    resize_param { prob: 1 resize_mode: WARP height: 64 width: 64 interp_mode: LINEAR }
    emit_constraint { emit_type: CENTER } }
  data_param { source: "trainval_lmdb" batch_size: 32 backend: LMDB }
  annotated_data_param { batch_sampler { max_sample: 1 max_trials: 1 } label_map_file: "labelmap.prototxt" } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 stride: 4 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "loc" type: "Convolution" bottom: "conv1" top: "loc"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "loc_perm" type: "Permute" bottom: "loc" top: "loc_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "loc_flat" type: "Flatten" bottom: "loc_perm" top: "loc_flat" flatten_param { axis: 1 } }
layer { name: "conf" type: "Convolution" bottom: "conv1" top: "conf"
  convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "conf_perm" type: "Permute" bottom: "conf" top: "conf_perm" permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "conf_flat" type: "Flatten" bottom: "conf_perm" top: "conf_flat" flatten_param { axis: 1 } }
layer { name: "priors" type: "PriorBox" bottom: "conv1" bottom: "data" top: "priors"
  prior_box_param { min_size: 20 max_size: 40 clip: false variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 step: 4 offset: 0.5 } }
layer { name: "mbox_loss" type: "MultiBoxLoss" bottom: "loc_flat" bottom: "conf_flat" bottom: "priors" bottom: "label"
  top: "mbox_loss" include { phase: TRAIN } propagate_down: true propagate_down: true propagate_down: false propagate_down: false
  loss_param { normalization: VALID }
  multibox_loss_param { loc_loss_type: SMOOTH_L1 conf_loss_type: SOFTMAX loc_weight: 1 num_classes: 3
    share_location: true match_type: PER_PREDICTION overlap_threshold: 0.5 use_prior_for_matching: true
    background_label_id: 0 use_difficult_gt: true neg_pos_ratio: 3 neg_overlap: 0.5 code_type: CENTER_SIZE
    ignore_cross_boundary_bbox: false mining_type: MAX_NEGATIVE } }
"""


def test_tiny_ssd_train_net_one_step():
    """An SSD train file (AnnotatedData swapped for Inputs as the zoo sweep does): forward at
    batch 1 and one SGD step lowers the loss."""
    param = zoo.replace_data_layers(io.read_net(TINY_SSD), batch_size=1)
    net = Net(param, phase=0)
    net.blobs["data"].data[...] = np.random.default_rng(0).standard_normal((1, 3, 64, 64))
    net.blobs["label"].data[...] = zoo.input_values("label", net.blobs["label"].data.shape)
    before = float(net.forward()["mbox_loss"])
    net.backward()
    for p in net.learnable_params:
        p.data[...] -= 0.01 * p.diff
    assert float(net.forward()["mbox_loss"]) < before


def _ce(x, label):
    return -np.log(_softmax(x)[label])


def _target_a():
    """gt [0, 0, 0.4, 0.5] encoded against prior A (centre 0.25, size 0.5), CENTER_SIZE."""
    return np.array([(0.2 - 0.25) / 0.5 / 0.1, 0.0, np.log(0.4 / 0.5) / 0.2, 0.0])


def _smooth(d):
    return np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5).sum()


def test_hard_example_mining_hand_case():
    conf = np.array([[0.0, 5.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    # per-prior scores: A = CE(A, 1) + smoothL1(0 - t) = 0.013 + 1.116; B = CE(B, bg) = 0.24;
    # C = CE(C, bg) = 1.86. sample_size 2 keeps C (a negative) and A (still a positive)
    layer = make_layer(LAYER % "mining_type: HARD_EXAMPLE sample_size: 2")
    (loss,) = run_layer(layer, _bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, _smooth(-_target_a()) + _ce(conf[0], 1) + _ce(conf[2], 0),
                               rtol=1e-12)
    # sample_size 1 keeps only C: A is no longer a positive, M = 0 and the normaliser is 1
    layer = make_layer(LAYER % "mining_type: HARD_EXAMPLE sample_size: 1")
    (loss,) = run_layer(layer, _bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, _ce(conf[2], 0), rtol=1e-12)
    assert not layer.pos


NMS_PRIORS = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0.52, 0.5, 1.0, 1.0]])


def _nms_bottoms(conf):
    priors = np.stack([NMS_PRIORS.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]
    return make_blobs([np.zeros((1, 12)), conf.reshape(1, 9), priors, gt])


def test_mining_with_nms_hand_cases():
    # prior 2 overlaps prior 1 (IoU 0.96); scores: prior 1 > prior 2 > prior 0
    conf = np.array([[0.0, 5.0, 0.0], [0.0, 3.0, 3.0], [0.0, 2.0, 2.0]])
    t = _smooth(-_target_a())
    nms = " nms_param { nms_threshold: 0.5 top_k: 10 } use_prior_for_nms: true"
    # HARD_EXAMPLE, sample_size 2: without NMS priors 1 and 2 (prior 0 stops being positive) ...
    layer = make_layer(LAYER % "mining_type: HARD_EXAMPLE sample_size: 2")
    (loss,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, _ce(conf[1], 0) + _ce(conf[2], 0), rtol=1e-12)
    # ... with NMS prior 2 is suppressed by prior 1 and prior 0 comes next
    layer = make_layer(LAYER % ("mining_type: HARD_EXAMPLE sample_size: 2" + nms))
    (loss,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, t + _ce(conf[0], 1) + _ce(conf[1], 0), rtol=1e-12)
    # MAX_NEGATIVE, neg_pos_ratio 2: negatives 1 and 2, or only 1 after NMS
    layer = make_layer(LAYER % "neg_pos_ratio: 2")
    (loss,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, t + _ce(conf[0], 1) + _ce(conf[1], 0) + _ce(conf[2], 0),
                               rtol=1e-12)
    layer = make_layer(LAYER % ("neg_pos_ratio: 2" + nms))
    (loss,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, t + _ce(conf[0], 1) + _ce(conf[1], 0), rtol=1e-12)
    # NMS over the decoded predictions (zero offsets decode to the priors themselves: the same)
    layer = make_layer(LAYER % ("neg_pos_ratio: 2 nms_param { nms_threshold: 0.5 top_k: 10 }"))
    (loss2,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss2, loss, rtol=1e-12)
    # nms_param without top_k: the fork's top_k 0 keeps no candidate
    layer = make_layer(LAYER % "neg_pos_ratio: 2 nms_param { nms_threshold: 0.5 }")
    (loss,) = run_layer(layer, _nms_bottoms(conf), make_blobs(1))
    np.testing.assert_allclose(loss, t + _ce(conf[0], 1), rtol=1e-12)


def _unshared_bottoms(conf, loc):
    priors = np.stack([PRIORS.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 2, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]       # class 2
    return make_blobs([loc.reshape(1, 36), conf.reshape(1, 9), priors, gt])


def test_share_location_false_hand_case_and_gradient():
    rng = np.random.default_rng(5)
    conf, loc = rng.standard_normal((3, 3)), 0.3 * rng.standard_normal((3, 3, 4))
    layer = make_layer(LAYER % "share_location: false mining_type: NONE")
    (loss,) = run_layer(layer, _unshared_bottoms(conf, loc), make_blobs(1))
    # prior A's class-2 offsets against the truth; every other prior is background
    want = (_smooth(loc[0, 2] - _target_a()) + _ce(conf[0], 2) + _ce(conf[1], 0)
            + _ce(conf[2], 0))
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    check_layer_gradient(make_layer(LAYER % "share_location: false mining_type: NONE"),
                         _unshared_bottoms(conf, loc), make_blobs(1), check_bottom=[0, 1])


def test_hard_example_gradient_and_refusals():
    rng = np.random.default_rng(6)
    conf, loc = rng.standard_normal((3, 3)), 0.3 * rng.standard_normal((1, 12))
    check_layer_gradient(make_layer(LAYER % "mining_type: HARD_EXAMPLE sample_size: 2"),
                         _bottoms(conf, loc), make_blobs(1), check_bottom=[0, 1])
    for bad, says in (("share_location: false", "share_location: true"),
                      ("mining_type: HARD_EXAMPLE sample_size: 0", "sample_size > 0")):
        layer = make_layer(LAYER % bad)
        with pytest.raises(Exception, match=says):
            layer.setup(_bottoms(conf, loc), make_blobs(1))


def test_l2_loc_loss_hand_case_and_gradient():
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    loc = np.array([0.5, -0.2, 0.1, 2.0, 0, 0, 0, 0, 0, 0, 0, 0])[None]
    layer = make_layer(LAYER % "neg_pos_ratio: 1 loc_loss_type: L2")
    (loss,) = run_layer(layer, _bottoms(conf, loc), make_blobs(1))
    d = loc[0, :4] - _target_a()
    np.testing.assert_allclose(loss, 0.5 * (d * d).sum() + _ce(conf[0], 1) + _ce(conf[2], 0),
                               rtol=1e-12)
    check_layer_gradient(make_layer(LAYER % "loc_loss_type: L2 mining_type: HARD_EXAMPLE "
                                    "sample_size: 2"), _bottoms(conf, loc), make_blobs(1),
                         check_bottom=[0, 1])


def test_ignore_cross_boundary_bbox():
    crossing = np.array([[-0.1, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0], [0.0, 0.5, 0.5, 1.0]])
    idx, best = match(crossing, np.array([[0.0, 0.0, 0.4, 0.5]]), True, 0.5, True)
    assert idx.tolist() == [-2, -1, -1] and best[0] == 0
    priors = np.stack([crossing.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    bottoms = lambda: make_blobs([np.zeros((1, 12)), conf.reshape(1, 9), priors, gt])  # noqa: E731
    # no positive: MAX_NEGATIVE mines nothing (0 x neg_pos_ratio), the loss is 0
    (loss,) = run_layer(make_layer(LAYER % "ignore_cross_boundary_bbox: true"), bottoms(),
                        make_blobs(1))
    assert loss == 0
    # without mining every prior that is not a positive is background, the ignored one too
    (loss,) = run_layer(make_layer(LAYER % "ignore_cross_boundary_bbox: true mining_type: NONE"),
                        bottoms(), make_blobs(1))
    np.testing.assert_allclose(loss, sum(_ce(c, 0) for c in conf), rtol=1e-12)


def _loc_onto_gt_from_b():
    """CENTER_SIZE offsets decoding prior B ([0.5, 0.5, 1, 1]) onto the truth [0, 0, 0.4, 0.5]."""
    return np.array([(0.2 - 0.75) / 0.05, (0.25 - 0.75) / 0.05, np.log(0.8) / 0.2, 0.0])


def test_matching_on_decoded_predictions():
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    loc = np.zeros((3, 4))
    loc[1] = _loc_onto_gt_from_b()
    # on the priors only A matches; on the predictions B's (IoU 1) is taken first, then A's (0.8)
    layer = make_layer(LAYER % "neg_pos_ratio: 1 use_prior_for_matching: false")
    (loss,) = run_layer(layer, _bottoms(conf, loc.reshape(1, 12)), make_blobs(1))
    want = (_smooth(-_target_a()) + _ce(conf[0], 1) + _ce(conf[1], 1) + _ce(conf[2], 0)) / 2
    np.testing.assert_allclose(loss, want, rtol=1e-9)        # B's offsets are its target: 0
    check_layer_gradient(make_layer(LAYER % "neg_pos_ratio: 1 use_prior_for_matching: false"),
                         _bottoms(conf, loc.reshape(1, 12) + 0.01), make_blobs(1),
                         check_bottom=[0, 1])
    # per-class locations: class 2's predictions against the class-2 truth
    unshared = np.zeros((3, 3, 4))
    unshared[1, 1] = unshared[1, 2] = _loc_onto_gt_from_b()
    layer = make_layer(LAYER % "share_location: false mining_type: NONE "
                       "use_prior_for_matching: false")
    (loss,) = run_layer(layer, _unshared_bottoms(conf, unshared), make_blobs(1))
    want = (_smooth(-_target_a()) + _ce(conf[0], 2) + _ce(conf[1], 2) + _ce(conf[2], 0)) / 2
    np.testing.assert_allclose(loss, want, rtol=1e-9)


def test_encode_variance_in_target_divides_both_by_the_variance():
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    loc = np.array([0.5, -0.2, 0.1, 2.0, 0, 0, 0, 0, 0, 0, 0, 0])[None]
    text = LAYER % "neg_pos_ratio: 1 encode_variance_in_target: true"
    (loss,) = run_layer(make_layer(text), _bottoms(conf, loc), make_blobs(1))
    raw = np.array([(0.2 - 0.25) / 0.5, 0.0, np.log(0.8), 0.0])       # truth against prior A
    d = (loc[0, :4] - raw) / np.array([0.1, 0.1, 0.2, 0.2])
    np.testing.assert_allclose(loss, _smooth(d) + _ce(conf[0], 1) + _ce(conf[2], 0), rtol=1e-12)
    check_layer_gradient(make_layer(text), _bottoms(conf, 0.13 * loc), make_blobs(1),
                         check_bottom=[0, 1])


def test_bp_inside_drops_coordinates_outside_the_image():
    priors = PRIORS.copy()
    priors[0, 0] = -0.1                     # prior A reaches left of the image; IoU 0.2 / 0.3
    pri = np.stack([priors.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]
    conf = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    text = LAYER.replace("CENTER_SIZE", "CORNER") % "neg_pos_ratio: 1 bp_inside: true"
    bottoms = make_blobs([np.zeros((1, 12)), conf.reshape(1, 9), pri, gt])
    (loss,) = run_layer(make_layer(text), bottoms, make_blobs(1))
    # CORNER target (truth - prior) / variance = [1, 0, -0.5, 0]; xmin is outside: dropped
    np.testing.assert_allclose(loss, _smooth(np.array([0.0, 0.0, 0.5, 0.0])) + _ce(conf[0], 1)
                               + _ce(conf[2], 0), rtol=1e-12)
    layer = make_layer(text)
    bottoms = make_blobs([0.1 * np.ones((1, 12)), conf.reshape(1, 9), pri, gt])
    check_layer_gradient(layer, bottoms, make_blobs(1), check_bottom=[0, 1])
    assert bottoms[0].diff[0, 0] == 0 and bottoms[0].diff[0, 2] != 0


def test_map_object_to_agnostic():
    conf = np.array([[0.0, 1.0], [2.0, 0.0], [0.5, 1.0]])
    priors = np.stack([PRIORS.reshape(-1), VAR.reshape(-1)])[None]
    gt = np.array([[0, 5, 0, 0.0, 0.0, 0.4, 0.5, 0]])[None, None]          # class 5: objectness
    text = ('type: "MultiBoxLoss" loss_param { normalization: VALID } multibox_loss_param { '
            'num_classes: 2 code_type: CENTER_SIZE map_object_to_agnostic: true %s }')
    bottoms = lambda: make_blobs([np.zeros((1, 12)), conf.reshape(1, 6), priors, gt])  # noqa: E731
    (loss,) = run_layer(make_layer(text % "mining_type: NONE"), bottoms(), make_blobs(1))
    np.testing.assert_allclose(loss, _smooth(-_target_a()) + _ce(conf[0], 1) + _ce(conf[1], 0)
                               + _ce(conf[2], 0), rtol=1e-12)
    with pytest.raises(Exception, match="not below num_classes 2"):      # mining scores label 5
        run_layer(make_layer(text % ""), bottoms(), make_blobs(1))
    with pytest.raises(Exception, match="needs num_classes 2"):
        make_layer(text.replace("num_classes: 2", "num_classes: 3") % "").setup(
            bottoms(), make_blobs(1))


def test_background_label_outside_the_classes_is_refused():
    conf = np.zeros((3, 3))
    with pytest.raises(Exception, match="for SOFTMAX"):
        make_layer(LAYER % "background_label_id: 3").setup(_bottoms(conf), make_blobs(1))


def test_multibox_loss_leaves_out_a_term_propagate_down_turns_off():
    """SSD adds loc_weight * loc / n only with propagate_down(0), conf / n only with
    propagate_down(1) (both true when the layer gives none)."""
    rng = np.random.default_rng(3)
    conf, loc = rng.standard_normal((3, 3)), 0.3 * rng.standard_normal((1, 12))
    both = run_layer(make_layer(LAYER % "neg_pos_ratio: 1"), _bottoms(conf, loc), make_blobs(1))[0]
    parts = []
    for flags in ("true false false false", "false true false false"):
        text = LAYER % "neg_pos_ratio: 1" + "".join(
            " propagate_down: %s" % f for f in flags.split())
        parts.append(run_layer(make_layer(text), _bottoms(conf, loc), make_blobs(1))[0])
    assert parts[0] > 0 and parts[1] > 0
    np.testing.assert_allclose(parts[0] + parts[1], both, rtol=1e-12)
    (zero,) = run_layer(make_layer(LAYER % "neg_pos_ratio: 1" + " propagate_down: false" * 4),
                        _bottoms(conf, loc), make_blobs(1))
    assert zero == 0
