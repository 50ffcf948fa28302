"""py-faster-rcnn's RPN layers (caffepy.forks.detection.frcnn) on small hand-computed cases, the Python
layer's fallback to them, and the fork ``Proposal`` type."""
import logging
import textwrap

import numpy as np
import pytest

import caffepy
from caffepy.forks.detection.frcnn import config
from caffepy.testing import make_blobs, make_layer, run_layer

ONE_ANCHOR = "{'feat_stride': 16, 'scales': [1], 'ratios': [1]}"      # one 16 x 16 anchor per cell


def _py(module, cls, param_str, phase=caffepy.TEST):
    return make_layer('type: "Python" python_param { module: "%s" layer: "%s" param_str: "%s" }'
                      % (module, cls, param_str), phase=phase)


@pytest.fixture
def train_cfg(monkeypatch):
    """cfg.TRAIN, restored after the test."""
    monkeypatch.setattr(config, "cfg", config.default_config())
    for mod in ("anchor_target", "proposal_target", "proposal"):
        monkeypatch.setattr("caffepy.forks.detection.frcnn.%s.cfg" % mod, config.cfg)
    return config.cfg.TRAIN


def _proposals(scores_fg, deltas, im_info, phase=caffepy.TEST):
    """Run ProposalLayer with one anchor on a 1 x 2 map (cells at x = 0 and x = 16)."""
    scores = np.concatenate([1 - scores_fg, scores_fg]).reshape(1, 2, 1, 2)
    layer = _py("rpn.proposal_layer", "ProposalLayer", ONE_ANCHOR, phase)
    rois, sc = run_layer(layer, make_blobs([scores, deltas.reshape(1, 4, 1, 2), [im_info]]),
                         make_blobs(2))
    return rois, sc


def test_proposal_orders_by_score():
    # zero deltas give anchor [x1, x1 + 16] (centre + w / 2: py-faster-rcnn's asymmetry)
    rois, scores = _proposals(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 1])
    np.testing.assert_array_equal(rois, [[0, 16, 0, 32, 16], [0, 0, 0, 16, 16]])
    np.testing.assert_allclose(scores, [[0.9], [0.2]])


def test_proposal_nms_suppresses_a_duplicate():
    deltas = np.zeros((4, 2))
    deltas[0, 1] = -1.0                      # cell 1 moves one width left: same box as cell 0
    rois, scores = _proposals(np.array([0.2, 0.9]), deltas, [100, 100, 1])
    np.testing.assert_array_equal(rois, [[0, 0, 0, 16, 16]])
    np.testing.assert_allclose(scores, [[0.9]])


def test_proposal_clips_then_drops_small_boxes():
    # image 20 wide: cell 1's box [16, 32] clips to [16, 19], 4 < RPN_MIN_SIZE (16) wide
    rois, _ = _proposals(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 20, 1])
    np.testing.assert_array_equal(rois, [[0, 0, 0, 16, 16]])
    rois, _ = _proposals(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 2])   # min 32
    assert rois.shape == (0, 5)


def test_proposal_post_nms_top_n_by_phase(train_cfg):
    train_cfg.RPN_POST_NMS_TOP_N = 1
    rois, _ = _proposals(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 1], caffepy.TRAIN)
    np.testing.assert_array_equal(rois, [[0, 16, 0, 32, 16]])
    rois, _ = _proposals(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 1], caffepy.TEST)
    assert len(rois) == 2


def test_proposal_checks_channels_against_anchors():
    # neither py-faster-rcnn's 9 anchors nor Curve-Text-Detector's 12 fit 2 / 4 channels
    layer = _py("rpn.proposal_layer", "ProposalLayer", "'feat_stride': 16")
    with pytest.raises(caffepy.errors.NetError, match="9 anchors need 18 score.*12 anchors need 24"):
        run_layer(layer, make_blobs([np.zeros((1, 2, 1, 2)), np.zeros((1, 4, 1, 2)),
                                     [[10, 10, 1]]]), make_blobs(1))


def _anchor_targets(gt, im_info):
    layer = _py("rpn.anchor_target_layer", "AnchorTargetLayer", ONE_ANCHOR, caffepy.TRAIN)
    bottom = make_blobs([np.zeros((1, 2, 2, 2)), gt, [im_info]])
    return run_layer(layer, bottom, make_blobs(4))


def test_anchor_targets():
    # 2 x 2 cells, anchors [0,0,15,15] [16,0,31,15] [0,16,15,31] [16,16,31,31]; gt = the first
    labels, targets, inside, outside = _anchor_targets([[0, 0, 15, 15, 1]], [32, 32, 1])
    assert labels.shape == (1, 1, 2, 2) and targets.shape == (1, 4, 2, 2)
    np.testing.assert_array_equal(labels[0, 0], [[1, 0], [0, 0]])
    np.testing.assert_allclose(targets[0, :, 0, 1], [-1, 0, 0, 0])   # centre 8 vs 24, width 16
    np.testing.assert_allclose(targets[0, :, 1, 0], [0, -1, 0, 0])
    np.testing.assert_allclose(targets[0, :, 0, 0], 0)
    np.testing.assert_array_equal(inside[0, :, 0, 0], 1)
    assert inside.sum() == 4
    np.testing.assert_allclose(outside, 0.25)                          # 1 / 4 labelled anchors


def test_anchor_targets_ignore_anchors_outside_the_image():
    labels, targets, inside, outside = _anchor_targets([[0, 0, 15, 15, 1]], [32, 20, 1])
    np.testing.assert_array_equal(labels[0, 0], [[1, -1], [0, -1]])
    np.testing.assert_allclose(targets[0, :, :, 1], 0)
    np.testing.assert_allclose(outside[0, :, :, 0], 0.5)
    np.testing.assert_allclose(outside[0, :, :, 1], 0)


def test_anchor_targets_subsample(train_cfg):
    train_cfg.RPN_BATCHSIZE = 2                 # at most 1 positive, then 1 negative of 3
    caffepy.set_random_seed(3)
    labels = _anchor_targets([[0, 0, 15, 15, 1]], [32, 32, 1])[0]
    assert (labels == 1).sum() == 1 and (labels == 0).sum() == 1 and (labels == -1).sum() == 2


def test_proposal_targets():
    rois = [[0, 0, 0, 15, 15],        # IoU 1 with the gt: foreground
            [0, 50, 50, 60, 60],      # IoU 0: neither (background needs >= 0.1)
            [0, 0, 0, 31, 31]]        # IoU 256 / 1024 = 0.25: background
    gt = [[0, 0, 15, 15, 3]]
    layer = _py("rpn.proposal_target_layer", "ProposalTargetLayer", "'num_classes': 4",
                caffepy.TRAIN)
    caffepy.set_random_seed(0)
    out_rois, labels, targets, inside, outside = run_layer(
        layer, make_blobs([rois, gt]), make_blobs(5))
    # candidates: the 3 rois and the gt box itself; 2 foreground then 1 background
    assert out_rois.shape == (3, 5, 1, 1) and labels.shape == (3, 1, 1, 1)
    np.testing.assert_array_equal(out_rois[:, 1:, 0, 0],
                                  [[0, 0, 15, 15], [0, 0, 15, 15], [0, 0, 31, 31]])
    np.testing.assert_array_equal(labels.ravel(), [3, 3, 0])
    assert targets.shape == (3, 16, 1, 1)
    np.testing.assert_allclose(targets, 0)               # fg rois are the gt box; bg: none
    expected_w = np.zeros((3, 16, 1, 1))
    expected_w[:2, 12:16] = 1
    np.testing.assert_array_equal(inside, expected_w)
    np.testing.assert_array_equal(outside, expected_w)


def test_proposal_targets_agnostic_and_all_rois(train_cfg):
    train_cfg.AGONISTIC, train_cfg.BATCH_SIZE = True, -1      # py-R-FCN's options
    rois = [[0, 2, 0, 17, 15]] + [[0, 0, 0, 31, 31]] * 3     # IoU 224/288, then 0.25 x 3
    layer = _py("rpn.proposal_target_layer", "ProposalTargetLayer", "'num_classes': 2",
                caffepy.TRAIN)
    _, labels, targets, _, _ = run_layer(layer, make_blobs([rois, [[0, 0, 15, 15, 5]]]),
                                         make_blobs(5))
    np.testing.assert_array_equal(np.sort(labels.ravel()), [0, 0, 0, 5, 5])
    fg = labels.ravel() == 5
    assert np.all(targets[~fg] == 0) and np.all(targets[fg, :4] == 0)
    np.testing.assert_allclose(np.abs(targets[fg, 4]).max(), 2 / 16.)   # dx of the shifted roi


def test_proposal_targets_sample_at_most_batch_size(train_cfg):
    train_cfg.BATCH_SIZE = 4                             # 1 foreground, 3 background
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 40, size=(50, 1))
    rois = np.hstack([np.zeros((50, 1)), x, x, x + 30, x + 30])
    layer = _py("rpn.proposal_target_layer", "ProposalTargetLayer", "'num_classes': 2",
                caffepy.TRAIN)
    out = run_layer(layer, make_blobs([rois, [[10, 10, 40, 40, 1]]]), make_blobs(5))
    assert out[0].shape == (4, 5, 1, 1) and out[2].shape == (4, 8, 1, 1)
    assert out[1].ravel()[0] == 1 and np.all(out[1].ravel()[1:] == 0)


NET = '''
layer { name: "in" type: "Input" top: "cls" top: "bbox" top: "im_info"
        input_param { shape { dim: 1 dim: 2 dim: 1 dim: 2 } shape { dim: 1 dim: 4 dim: 1 dim: 2 }
                      shape { dim: 1 dim: 3 } } }
layer { name: "proposal" type: "Python" bottom: "cls" bottom: "bbox" bottom: "im_info"
        top: "rois" python_param { module: "rpn.proposal_layer" layer: "ProposalLayer"
        param_str: "%s" } }
''' % ONE_ANCHOR


def _run_net():
    from caffepy.net import Net
    net = Net(NET, caffepy.TEST)
    net.blobs["cls"].data[...] = np.array([0.8, 0.1, 0.2, 0.9]).reshape(1, 2, 1, 2)
    net.blobs["im_info"].data[...] = [[100, 100, 1]]
    return net.forward()["rois"]


def test_python_layer_falls_back_to_builtin(caplog):
    logger = logging.getLogger("caffepy")   # attached directly: caffepy.log may stop propagation
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="caffepy"):
            rois = _run_net()
    finally:
        logger.removeHandler(caplog.handler)
    np.testing.assert_array_equal(rois, [[0, 16, 0, 32, 16], [0, 0, 0, 16, 16]])
    lines = sorted({r.getMessage() for r in caplog.records if "built-in" in r.getMessage()})
    assert len(lines) == 1 and "rpn.proposal_layer" in lines[0] and "'proposal'" in lines[0]


def test_users_module_wins(tmp_path, monkeypatch):
    pkg = tmp_path / "rpn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "proposal_layer.py").write_text(textwrap.dedent('''
        from caffepy.layers.python_layer import Layer
        class ProposalLayer(Layer):
            def reshape(self, bottom, top):
                top[0].reshape(1, 5)
            def forward(self, bottom, top):
                top[0].data[...] = 7
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys
    monkeypatch.delitem(sys.modules, "rpn", raising=False)
    monkeypatch.delitem(sys.modules, "rpn.proposal_layer", raising=False)
    try:
        np.testing.assert_array_equal(_run_net(), np.full((1, 5), 7.0))
    finally:    # the user's module must not stay imported for later tests (ONNX export, sweeps)
        for name in ("rpn.proposal_layer", "rpn"):
            sys.modules.pop(name, None)


def test_unknown_python_module_still_fails():
    from caffepy.errors import NetError
    with pytest.raises(NetError, match="rpn.debug_layer"):
        _py("rpn.debug_layer", "RPNDebugLayer", "")


def test_fork_proposal_type():
    layer = make_layer('type: "Proposal"')
    scores = np.zeros((1, 18, 2, 3))
    scores[0, 9:] = np.linspace(0, 1, 54).reshape(9, 2, 3)
    rois, = run_layer(layer, make_blobs([scores, np.zeros((1, 36, 2, 3)), [[64, 80, 1]]]),
                      make_blobs(1))
    assert rois.shape[1] == 5 and 1 <= len(rois) <= 54
    assert np.all(rois[:, 3] <= 79) and np.all(rois[:, 4] <= 63) and np.all(rois[:, 1:] >= 0)


def test_fork_proposal_reads_pvanet_proposal_param():
    """PVANet's ``proposal_param`` (sanghoon/caffe dev_pvanet #8266713) parses and sets the anchors
    and the NMS limits: one ratio x one scale = 1 anchor per cell, at most 2 RoIs kept."""
    layer = make_layer('type: "Proposal" proposal_param { ratio: 1.0 scale: 2 base_size: 16 '
                       'feat_stride: 16 pre_nms_topn: 6 post_nms_topn: 2 nms_thresh: 0.7 min_size: 4 }')
    scores = np.zeros((1, 2, 2, 3))
    scores[0, 1] = np.arange(6).reshape(2, 3)            # foreground scores, cell (1, 2) best
    rois, roi_scores = run_layer(layer, make_blobs([scores, np.zeros((1, 4, 2, 3)), [[64, 80, 1]]]),
                                 make_blobs(2))
    # anchor (-8, -8, 23, 23) (32 x 32 about 7.5); a zero delta maps it to centre 8 +- 16, i.e.
    # (-8, -8, 24, 24) (both forks' transform); shifted by 16 * (x, y), clipped to the image
    np.testing.assert_allclose(rois, [[0, 24, 8, 56, 40], [0, 8, 8, 40, 40]])
    np.testing.assert_allclose(roi_scores.ravel(), [5, 4])
