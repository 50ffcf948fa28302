"""MSCNN / Cascade R-CNN train and test layers (forks/detection/mscnn_train.py, forks/detection/cascade_train.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker

LOSS = ('type: "DetectionLoss" detection_loss_param { cls_num: 2 coord_num: 4 field_w: 16 '
        'field_h: 16 downsample_rate: 8 bg_multiple: 1 sample_mode: "bootstrap" }')


class _ForkObjective(GradientChecker):
    """The checker with the objective the fork differentiates: top 0's first element only
    (DetectionLoss's top 0 also holds lambda coord; Cascade's SmoothL1Loss top 1 is a report)."""

    def _objective(self, layer, bottom, top, weights):
        weights[0].reshape(-1)[1:] = 0
        for w in weights[1:]:
            w[...] = 0
        return GradientChecker._objective(self, layer, bottom, top, weights)


def _labels(n_cells, boxes):
    lab = np.zeros((1, 6, 1, n_cells))
    for j, (c, x, y, w, h, o) in boxes.items():
        lab[0, :, 0, j] = [c, x, y, w, h, o]
    return lab


def test_mscnn_detection_loss_by_hand():
    layer = make_layer(LOSS)
    assert type(layer).__name__ == "MSCNNDetectionLossLayer"      # not caffe-yolo's
    # cell 0 (centre 4, 4) holds an object of class 1: g = (0.2, 0, 0.1, 0); cell 1 a negative
    lab = _labels(2, {0: (1, 4 + 16 * 0.2, 4, 16 * np.exp(0.1), 16, 0.9)})
    x = np.zeros((1, 6, 1, 2))
    bottom, top = make_blobs([x, lab]), make_blobs(1)
    out, = run_layer(layer, bottom, top)
    coord = 0.5 * (0.2 ** 2 + 0.1 ** 2) / 4                    # smooth L1, / (4 x 1 positive)
    np.testing.assert_allclose(out.ravel(), [np.log(2) + coord, coord])
    top[0].diff[...] = [[[[1.0, 0.0]]]]
    layer.backward(top, [True, False], bottom)
    g = bottom[0].diff[0, :, 0]
    np.testing.assert_allclose(g[:2], [[0.25, -0.25], [-0.25, 0.25]])   # (p - onehot) / 2 counted
    np.testing.assert_allclose(g[2:, 0], [-0.05, 0, -0.025, 0])
    np.testing.assert_allclose(g[2:, 1], 0)


def test_mscnn_detection_loss_gradient():
    rng = np.random.default_rng(3)
    lab = np.zeros((1, 6, 2, 3))
    lab[0, :, 0, 0] = [1, 6, 3, 20, 14, 0.8]
    lab[0, :, 1, 2] = [1, 18, 13, 12, 18, 0.7]
    x = rng.uniform(-0.3, 0.3, (1, 6, 2, 3))
    x[0, :2] += np.arange(6).reshape(2, 3)                 # distinct ranking scores
    layer = make_layer(LOSS.replace("bg_multiple: 1", "bg_multiple: 4 pos_neg_weighted: true"))
    _ForkObjective(stepsize=1e-4, threshold=1e-3).check(layer, *[make_blobs([x, lab]), make_blobs(1)],
                                                         check_bottom=[0])


def test_cascade_smooth_l1_per_instance():
    a = np.array([[0.5, 2.0], [0.0, -0.2]])
    b = np.zeros((2, 2))
    win, wout = np.ones((2, 2)), np.array([[1.0, 2.0], [1.0, 1.0]])
    layer = make_layer('type: "SmoothL1Loss"', name="s")
    layer.layer_param.bottom.extend(["a", "b", "i", "o"])
    layer.layer_param.top.extend(["l", "per"])
    from caffepy.layers.base import create_layer
    from caffepy.proto import caffe_pb2
    layer = create_layer(layer.layer_param, phase=caffe_pb2.TEST, dtype=np.float64)
    assert type(layer).__name__ == "CascadeSmoothL1LossLayer"
    bottom, top = make_blobs([a, b, win, wout]), make_blobs(2)
    loss, per = run_layer(layer, bottom, top)
    # f(0.5) = 0.125, f(2) = 1.5 (x 2 outside), f(0) = 0, f(0.2) = 0.02
    np.testing.assert_allclose(per.ravel(), [0.125 + 3.0, 0.02])
    np.testing.assert_allclose(float(loss), (3.125 + 0.02) / 2)
    _ForkObjective().check(layer, bottom, top, check_bottom=[0])


def test_hard_mining_by_hand():
    layer = make_layer('type: "HardMining" hard_mining_param { num_roi_per_image: 1 num_image: 2 }')
    score = np.array([0.1, 0.9, 0.5, 0.3]).reshape(4, 1, 1, 1)
    rois = np.array([[0, 0, 0, 1, 1], [0, 1, 1, 2, 2], [0, 2, 2, 3, 3], [0, 3, 3, 4, 4.]])
    top_rois, = run_layer(layer, make_blobs([score, rois]), make_blobs(1))
    # image 0 keeps its best (row 1); image 1 has none, so the best left-over (row 2) fills in
    np.testing.assert_allclose(top_rois, rois[[1, 2]])


def test_bbox_accuracy_by_hand():
    layer = make_layer('type: "BboxAccuracy"')
    pred = np.zeros((2, 8))
    pred[0, 4] = 0.1                       # shift x by 0.1 w = 1 pixel
    rois = np.array([[0, 0, 0, 9, 9], [0, 0, 0, 9, 9.]])
    gt = np.array([[1, 1, 0, 10, 9, 0.8], [0, 0, 0, 0, 0, 0.]])
    after, before = run_layer(layer, make_blobs([pred, rois, gt]), make_blobs(2))
    assert after.item() == pytest.approx(1.0)              # shifted onto the gt
    assert before.item() == pytest.approx(90 / 110)        # roi vs gt: 9 x 10 over 110


def test_build_only_layers_shape_and_refuse_forward():
    gl = make_layer('type: "DetectionGroupLoss" detection_group_loss_param { cls_num: 2 '
                    'field_h: 16 field_w: 16 stride: 8 }')
    bottom = make_blobs([np.zeros((2, 2, 3, 3)), np.zeros((2, 4, 3, 3)), np.zeros((2, 6, 3, 3))])
    top = make_blobs(1)
    gl.setup(bottom, top)
    assert tuple(top[0].shape) == (1, 1, 1, 2)
    with pytest.raises(CaffeError, match="not implemented"):
        gl.forward(bottom, top)


def test_frcnn_output_by_hand():
    layer = make_layer('type: "FrcnnOutput" frcnn_output_param { conf_thr: 0.3 iou_thr: 0.5 } '
                       'bbox_reg_param { cls_aware: false }')
    prob = np.array([[0.1, 0.9], [0.2, 0.8], [0.6, 0.4], [0.9, 0.1]])
    off = np.zeros((4, 8))                            # boxes are the rois themselves
    rois = np.array([[0, 0, 0, 9, 9], [0, 1, 0, 10, 9], [0, 20, 20, 39, 39], [0, 0, 0, 5, 5.]])
    size = np.array([[30.0, 50.0]])                   # height 30, width 50
    out, = run_layer(layer, make_blobs([prob, off, rois, size]), make_blobs(1))
    # roi 1 overlaps roi 0 by 90 / 110 > 0.5 and goes; roi 2 is clipped to y2 = 30; roi 3 < conf
    np.testing.assert_allclose(out.reshape(-1, 7), [[0, -1, -1, -1, -1, -1, -1],
                                                    [0, 0, 0, 9, 9, 1, 0.9],
                                                    [0, 20, 20, 39, 30, 1, 0.4]])


def test_proposal_target_by_hand():
    layer = make_layer('type: "ProposalTarget" proposal_target_param { cls_num: 3 batch_size: 4 '
                       'fg_fraction: 0.5 } bbox_reg_param { bbox_mean: 0 bbox_mean: 0 bbox_mean: 0 '
                       'bbox_mean: 0 bbox_std: 0.1 bbox_std: 0.1 bbox_std: 0.2 bbox_std: 0.2 }')
    # gt: image 0, class 2, x 10..29, y 10..29 (20 x 20); rois: a shifted copy (IoU 0.6), a
    # background (IoU 0.2), one with no overlap (discarded, picked up to fill the batch)
    gt = np.array([[0, 10, 10, 29, 29, 2, 0, 0.]])
    rois = np.array([[0, 15, 10, 34, 29], [0, 24, 10, 43, 29], [0, 60, 60, 79, 79.]])
    bottom, top = make_blobs([rois, gt]), make_blobs(7)
    out = run_layer(layer, bottom, top)
    r, lab, tgt, win, wout, match, sw = [o.reshape(len(o), -1) for o in out]
    # foregrounds: the appended gt (IoU 1) and roi 0 (IoU 0.6); backgrounds: roi 1, then roi 2
    assert sorted(map(tuple, r[:2, 1:])) == [(10, 10, 29, 29), (15, 10, 34, 29)]
    np.testing.assert_allclose(r[2:, 1:], [[24, 10, 43, 29], [60, 60, 79, 79]])
    np.testing.assert_allclose(lab.ravel(), [2, 2, 0, 0])
    i = [tuple(x) for x in r[:, 1:]].index((15, 10, 34, 29))
    np.testing.assert_allclose(tgt[i, 8:12], [-5 / 20 / 0.1, 0, 0, 0])     # (gx - rx) / rw / std
    np.testing.assert_allclose(win[i], [0] * 8 + [1] * 4)
    np.testing.assert_allclose(match[i], [2, 10, 10, 29, 29, 300 / 500])
    np.testing.assert_allclose(sw.ravel(), [1, 1, 1, 1])                  # 0.5 x 4 / 2 each


def test_mscnn_detection_accuracy_by_hand():
    layer = make_layer('type: "DetectionAccuracy" detection_accuracy_param { cls_num: 2 '
                       'field_w: 16 field_h: 16 downsample_rate: 8 }')
    # cells: 0 positive, scored right, box offsets 0 -> the 16 x 16 field at centre (4, 4);
    # 1 negative scored right; 2 negative scored wrong; 3 negative with overlap 0.6 (ignored)
    lab = _labels(4, {0: (1, 4, 4, 16, 8, 0.9), 3: (0, 0, 0, 0, 0, 0.6)})
    x = np.zeros((1, 6, 1, 4))
    x[0, 1, 0] = [1.0, -1.0, 1.0, 5.0]
    acc, iou = run_layer(layer, make_blobs([x, lab]), make_blobs(2))
    np.testing.assert_allclose(acc.ravel(), [2 / 3, 1.0])
    assert iou.item() == pytest.approx(0.5)        # 16 x 8 label box inside the 16 x 16 field


def test_cascade_jaccard_is_inclusive():
    from caffepy.forks.detection.cascade_target import jaccard_xywh
    from caffepy.forks.detection.mscnn import box_iou
    a, b = (0, 0, 10, 10), (9.5, 0, 10, 10)
    assert jaccard_xywh(a, b) == 0.0                     # 9.5 > min(x + w - 1) = 9
    assert box_iou(a, b) == pytest.approx(5 / 195)       # MSCNN's: 0.5 x 10 overlap
    assert jaccard_xywh((0, 0, 10, 10), (5, 0, 10, 10)) == pytest.approx(50 / 150)


def test_cascade_detection_evaluate_by_hand(tmp_path):
    sizes = tmp_path / "sizes.txt"
    sizes.write_text("img0 60 100\n")                # original image: twice the net input
    text = ('type: "DetectionEvaluate" bottom: "d" bottom: "g" bottom: "s" '
            'detection_evaluate_param { num_classes: 3 overlap_threshold: 0.5 '
            'name_size_file: "%s" }' % sizes)
    layer = make_layer(text)
    assert type(layer).__name__ == "CascadeDetectionEvaluateLayer"
    det = np.array([[0, -1, -1, -1, -1, -1, -1],        # FrcnnOutput's header row
                    [0, 0, 0, 9, 9, 1, 0.5],            # duplicate of the gt: fp
                    [0, 0, 0, 9, 9, 1, 0.9],            # best score, on the gt: tp
                    [0, 20, 20, 29, 29, 2, 0.7]])       # class 2 has no gt: fp
    gt = np.array([[0, 0, 0, 9, 9, 1, 0, 0.]])
    out, = run_layer(layer, make_blobs([det, gt, np.array([[30.0, 50.0]])]), make_blobs(1))
    np.testing.assert_allclose(out.reshape(-1, 5), [[-1, 1, 1, -1, -1], [-1, 2, 0, -1, -1],
                                                    [0, 1, 0.9, 1, 0], [0, 1, 0.5, 0, 1],
                                                    [0, 2, 0.7, 0, 1]])
