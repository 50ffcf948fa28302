"""makefile/frcnn's C++ Faster R-CNN layers (FrcnnProposal, FrcnnAnchorTarget,
FrcnnProposalTarget) on small hand-computed cases."""
import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.forks.detection import frcnn_cpp
from caffepy.testing import make_blobs, make_layer, run_layer


@pytest.fixture
def cfg(monkeypatch):
    """A fresh default config with one 16 x 16 anchor per cell, restored after the test."""
    c = frcnn_cpp.default_config()
    c["anchors"] = [0, 0, 15, 15]
    monkeypatch.setattr(frcnn_cpp, "CONFIG", c)
    return c


def test_parse_config_reads_the_forks_quasi_json():
    text = '{"scales": "600",\n "eps": "0.00000000000001",\n "anchors": "-84, -40, 99, 55,\n' \
           '      -176,  -88,  191,   103",\n "snapshot_infix": ""}'
    c = frcnn_cpp.parse_config(text)
    assert c["scales"] == 600.0 and c["eps"] == 1e-14 and c["snapshot_infix"] == ""
    assert c["anchors"] == [-84, -40, 99, 55, -176, -88, 191, 103]


def _proposal(scores_fg, deltas, im_info, phase=caffepy.TEST):
    scores = np.concatenate([1 - scores_fg, scores_fg]).reshape(1, 2, 1, 2)
    layer = make_layer('type: "FrcnnProposal"', phase=phase)
    return run_layer(layer, make_blobs([scores, deltas.reshape(1, 4, 1, 2), [im_info]]),
                     make_blobs(2))


def test_proposal_orders_suppresses_and_drops_small(cfg):
    # zero deltas: width 16, centre x1 + 8, corners centre -+ 8: [0, 16] and [16, 32]
    rois, scores = _proposal(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 1])
    np.testing.assert_array_equal(rois.reshape(-1, 5), [[0, 16, 0, 32, 16], [0, 0, 0, 16, 16]])
    np.testing.assert_allclose(scores.ravel(), [0.9, 0.2])
    assert rois.shape == (2, 5, 1, 1)
    deltas = np.zeros((4, 2))
    deltas[0, 1] = -1.0                        # cell 1 moves a width left: cell 0's box
    rois, scores = _proposal(np.array([0.2, 0.9]), deltas, [100, 100, 1])
    np.testing.assert_array_equal(rois.reshape(-1, 5), [[0, 0, 0, 16, 16]])
    # image 20 wide: [16, 32] clips to [16, 19], 4 < test_rpn_min_size 16
    rois, _ = _proposal(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 20, 1])
    np.testing.assert_array_equal(rois.reshape(-1, 5), [[0, 0, 0, 16, 16]])
    cfg["test_rpn_post_nms_top_n"] = 1
    rois, _ = _proposal(np.array([0.2, 0.9]), np.zeros((4, 2)), [100, 100, 1])
    np.testing.assert_array_equal(rois.reshape(-1, 5), [[0, 16, 0, 32, 16]])


def test_proposal_test_score_threshold_skips_anchors_after_the_first(cfg):
    cfg["anchors"] = [0, 0, 15, 15, 0, 0, 31, 31]
    cfg["test_rpn_score_thresh"] = 0.5
    scores = np.array([0.5, 0.5, 0.1, 0.3]).reshape(1, 4, 1, 1)    # fg: anchor 0 0.1, 1 0.3
    layer = make_layer('type: "FrcnnProposal"')
    rois, sc = run_layer(layer, make_blobs([scores, np.zeros((1, 8, 1, 1)), [[100, 100, 1]]]),
                         make_blobs(2))
    np.testing.assert_array_equal(rois.reshape(-1, 5), [[0, 0, 0, 16, 16]])   # k = 0 kept
    np.testing.assert_allclose(sc.ravel(), [0.1])


def test_proposal_shape_errors(cfg):
    layer = make_layer('type: "FrcnnProposal"')
    with pytest.raises(NetError, match="1 anchors need 2 score and 4 delta channels"):
        layer.setup(make_blobs([np.zeros((1, 2, 1, 2)), np.zeros((1, 8, 1, 2)),
                                [[10, 10, 1]]]), make_blobs(1))


def test_anchor_target_labels_targets_and_weights(cfg):
    layer = make_layer('type: "FrcnnAnchorTarget"', phase=caffepy.TRAIN)
    gt = np.array([[0, 0, 15, 15, 1]], dtype=float)
    labels, targets, inside, outside = run_layer(
        layer, make_blobs([np.zeros((1, 2, 1, 2)), gt, [[32, 32, 1]]]), make_blobs(4))
    # anchor 0 = the gt box (IoU 1: object); anchor 1 [16, 31] has IoU 0 < 0.3: background
    np.testing.assert_array_equal(labels, [[[[1, 0]]]])
    # targets to the best gt box for every inside anchor: anchor 1 dx = (8 - 24) / 16
    np.testing.assert_array_equal(targets[0, :, 0], [[0, -1], [0, 0], [0, 0], [0, 0]])
    np.testing.assert_array_equal(inside[0, :, 0], [[1, 0]] * 4)
    np.testing.assert_allclose(outside[0, :, 0], [[0.5, 0.5]] * 4)      # 1 / 2 labelled
    # outside the image (32 wide: anchor 1 ends at 31, 24 wide it does not fit): label -1
    labels, _, _, outside = run_layer(
        make_layer('type: "FrcnnAnchorTarget"', phase=caffepy.TRAIN),
        make_blobs([np.zeros((1, 2, 1, 2)), gt, [[32, 24, 1]]]), make_blobs(4))
    np.testing.assert_array_equal(labels, [[[[1, -1]]]])
    np.testing.assert_allclose(outside[0, :, 0], [[1, 0]] * 4)


def test_anchor_target_rejects_batches(cfg):
    layer = make_layer('type: "FrcnnAnchorTarget"', phase=caffepy.TRAIN)
    with pytest.raises(NetError, match="only single item batches"):
        layer.setup(make_blobs([np.zeros((2, 2, 1, 2)), np.zeros((1, 5)), [[32, 32, 1]]]),
                    make_blobs(4))


def test_proposal_target_samples_and_fills_with_background(cfg):
    cfg.update(n_classes=3, batch_size=4, fg_fraction=0.5)
    gt = np.array([[0, 0, 15, 15, 2]], dtype=float)
    rois = np.array([[0, 0, 0, 15, 15],           # IoU 1: foreground
                     [0, 8, 0, 23, 15],           # IoU 128 / 384 = 1/3: background
                     [0, 100, 100, 115, 115]],    # IoU 0 < bg_thresh_lo 0.1: unused
                    dtype=float)
    layer = make_layer('type: "FrcnnProposalTarget"', phase=caffepy.TRAIN)
    out_rois, labels, targets, inside, outside = run_layer(layer, make_blobs([rois, gt]),
                                                           make_blobs(5))
    assert out_rois.shape == (4, 5, 1, 1) and targets.shape == (4, 12, 1, 1)
    out_rois = out_rois.reshape(4, 5)
    # two foreground (the roi and the gt box itself), one background repeated to fill 4
    np.testing.assert_array_equal(out_rois[:2], [[0, 0, 0, 15, 15]] * 2)
    np.testing.assert_array_equal(out_rois[2:], [[0, 8, 0, 23, 15]] * 2)
    np.testing.assert_array_equal(labels.ravel(), [2, 2, 0, 0])
    np.testing.assert_array_equal(targets, 0)               # identical boxes: zero deltas
    w = np.zeros((4, 12))
    w[:2, 8:12] = 1
    np.testing.assert_array_equal(inside.reshape(4, 12), w)
    np.testing.assert_array_equal(outside.reshape(4, 12), w)


def test_proposal_target_normalised_targets(cfg):
    cfg.update(n_classes=2, batch_size=2, fg_fraction=1.0)
    gt = np.array([[0, 0, 15, 15, 1]], dtype=float)
    rois = np.array([[0, 0, 0, 15, 17]], dtype=float)      # IoU 256 / 288 = 0.89
    out = run_layer(make_layer('type: "FrcnnProposalTarget"', phase=caffepy.TRAIN),
                    make_blobs([rois, gt]), make_blobs(5))
    labels, targets = out[1].ravel(), out[2].reshape(-1, 8)
    np.testing.assert_array_equal(labels, [1, 1])               # the roi and the gt box
    (i,) = np.where(out[0].reshape(-1, 5)[:, 4] == 17)[0]
    # dy = (8 - 9) / 18, dh = log(16 / 18), divided by the stds 0.1 / 0.2
    np.testing.assert_allclose(targets[i, 4:], [0, -1 / 18 / 0.1, 0, np.log(16 / 18) / 0.2],
                               atol=1e-6)
    np.testing.assert_array_equal(targets[i, :4], 0)
    with pytest.raises(NetError, match="greater than 0"):
        run_layer(make_layer('type: "FrcnnProposalTarget"', phase=caffepy.TRAIN),
                  make_blobs([rois, np.array([[0, 0, 15, 15, 0.0]])]), make_blobs(5))
