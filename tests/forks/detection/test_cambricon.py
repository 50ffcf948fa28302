import numpy as np
import pytest

from caffepy.testing import make_blobs, make_layer, run_layer

TEXT = ('type: "ImageDetect" image_detect_param { num_class: 2 im_h: 100 im_w: 100 '
        'nms_thresh: 0.5 score_thresh: 0.3 }')


def test_image_detect_decodes_and_suppresses():
    rois = np.array([[0, 10, 10, 29, 29], [0, 12, 12, 31, 31], [0, 60, 60, 79, 79.0]])
    deltas = np.zeros((3, 8))
    deltas[2, 4] = 0.5                       # class 1 of ROI 2 moves right by half its width
    scores = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.6]])
    (out,) = run_layer(make_layer(TEXT), make_blobs([deltas, scores, rois]), make_blobs(1))
    assert out.shape == (1, 6, 1, 6)
    rows = out.reshape(6, 6)
    # class 0: ROIs 0 and 1 overlap (IoU > 0.5): 0 (0.9) kept, 1 dropped; ROI 2 kept
    np.testing.assert_allclose(rows[0], [10, 10, 30, 30, 0, 0.9], rtol=1e-6)
    np.testing.assert_allclose(rows[1], [60, 60, 80, 80, 0, 0.7], rtol=1e-6)
    # class 1: only ROI 2 scores above 0.3; its box is shifted by 10
    np.testing.assert_allclose(rows[2], [70, 60, 90, 80, 1, 0.6], rtol=1e-6)
    assert not rows[3:].any()


def test_detection_out_boxes_and_suppression():
    s, nb, k = 2, 2, 2
    x = np.full((1, nb, 5 + k, s, s), -20.0)           # objectness ~0 everywhere
    x[0, :, 5:] = 0.0
    # cell (row 0, col 1), box 0: a confident class-1 box; box 1 the same place, less confident
    x[0, 0, :, 0, 1] = [0, 0, 0, 0, 3.0, 0, 2.0]
    x[0, 1, :, 0, 1] = [0, 0, 0, 0, 1.0, 0, 2.0]
    text = ('type: "DetectionOut" detection_out_param { side: 2 num_classes: 2 num_box: 2 '
            'confidence_threshold: 0.1 nms_threshold: 0.45 biases: 1 biases: 1 biases: 1 '
            'biases: 1 }')
    (out,) = run_layer(make_layer(text), make_blobs([x.reshape(1, nb * 7, s, s)]), make_blobs(1))
    p1 = np.exp(2) / (1 + np.exp(2))
    conf = 1 / (1 + np.exp(-3.0)) * p1
    # the two boxes coincide: the second is suppressed; class 0 (p = 0.12) scores 0.95 * 0.12
    rows = out.reshape(-1, 7)
    assert rows.shape[0] == 2
    np.testing.assert_allclose(rows[1], [0, 1, conf, 0.75, 0.25, 0.5, 0.5], rtol=1e-5)
    assert rows[0][1] == 0 and rows[0][2] == pytest.approx(conf / p1 * (1 - p1), rel=1e-5)


def test_detection_pose_output():
    # 3 priors (corner boxes), CORNER decoding with zero offsets: the priors themselves
    prior = np.array([[0.1, 0.1, 0.5, 0.5], [0.12, 0.12, 0.5, 0.5], [0.6, 0.6, 0.9, 1.2]])
    priors = np.stack([prior.ravel(), np.full(12, 0.1)])[None]       # 1 x 2 x 12
    loc = np.zeros((1, 12))
    conf = np.array([[0.1, 0.9, 0.0, 0.2, 0.8, 0.0, 0.3, 0.0, 0.7]])    # 3 priors x 3 classes
    pose = np.array([[0.1, 0.7, 0.2, 0.5, 0.4, 0.1, 0.0, 0.0, 0.9]])   # 3 priors x 3 poses
    text = ('type: "DetectionPoseOutput" detection_pose_output_param { num_classes: 3 '
            'num_poses: 3 code_type: CORNER nms_param { nms_threshold: 0.5 } }')
    (out,) = run_layer(make_layer(text), make_blobs([loc, conf, pose, priors]), make_blobs(1))
    rows = out.reshape(-1, 9)
    # no score threshold (as the fork): per class the priors 0 and 1 overlap, 1 goes; prior 2
    # stays whatever its score
    assert rows.shape == (4, 9)
    np.testing.assert_allclose(rows[0], [0, 1, 0.9, 0.1, 0.1, 0.5, 0.5, 1, 0.7])
    np.testing.assert_allclose(rows[1], [0, 1, 0.0, 0.6, 0.6, 0.9, 1.0, 2, 0.9])
    np.testing.assert_allclose(rows[2], [0, 2, 0.7, 0.6, 0.6, 0.9, 1.0, 2, 0.9])
    np.testing.assert_allclose(rows[3], [0, 2, 0.0, 0.1, 0.1, 0.5, 0.5, 1, 0.7])
    text = text.replace("code_type", "keep_top_k: 2 code_type")
    (out,) = run_layer(make_layer(text), make_blobs([loc, conf, pose, priors]), make_blobs(1))
    np.testing.assert_allclose(out.reshape(-1, 9)[:, :3], [[0, 1, 0.9], [0, 2, 0.7]])
