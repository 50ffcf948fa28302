"""Cascade R-CNN's BoxGroupOutput (zhaoweicai/cascade-rcnn; forks/detection/cascade_rcnn.py)."""
import numpy as np

from caffepy.forks.detection.cascade_rcnn import jaccard
from caffepy.testing import make_blobs, make_layer, run_layer

TEXT = ('type: "BoxGroupOutput" box_group_output_param { iou_thr: %s min_size: 4 '
        'box_group_param { field_w: 16 field_h: 16 stride: 8 } }')


def _bottoms():
    prob = np.zeros((1, 2, 1, 2))
    prob[0, 0, 0] = [0.1, 0.3]                       # background: scores 0.9 and 0.7
    return make_blobs([prob, np.zeros((1, 4, 1, 2))])


def test_box_group_output_by_hand():
    # cell w: centre ((w + 0.5) 8, 4), 16 x 16 -> [c - 8, c - 8 + 15], clipped to [0, 16] x [0, 8]:
    # [0, 0, 11, 8] (0.9) and [4, 0, 16, 8] (0.7); overlap 8 x 9 = 72 of 108 + 117 - 72 = 153
    assert abs(jaccard([0, 0, 11, 8], [4, 0, 16, 8]) - 72 / 153.0) < 1e-12
    rois, scored = run_layer(make_layer(TEXT % 0.5), _bottoms(), make_blobs(2))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 0, 0, 11, 8], [0, 4, 0, 16, 8]])
    np.testing.assert_allclose(scored.reshape(-1, 6)[:, 5], [0.9, 0.7])
    rois, = run_layer(make_layer(TEXT % 0.4), _bottoms(), make_blobs(1))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 0, 0, 11, 8]])
    none = make_layer(TEXT.replace("iou_thr: %s", "fg_thr: 0.95 iou_thr: 0.5"))
    rois, scored = run_layer(none, _bottoms(), make_blobs(2))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 1, 1, 10, 10]])
    np.testing.assert_allclose(scored, 0)


def test_scale_route():
    rois = np.array([[0, 0, 0, 9, 9], [0, 0, 0, 99, 99], [0, 0, 0, 299, 299]], float)   # scales 10, 100, 300
    feats = np.arange(3.0).reshape(3, 1)
    out, f = run_layer(make_layer('type: "ScaleRoute" scale_route_param { low_scale: 50 high_scale: 200 }'),
                       make_blobs([rois, feats]), make_blobs(2))
    np.testing.assert_array_equal(out, rois[1:2])
    np.testing.assert_array_equal(f, [[1.0]])
    out, = run_layer(make_layer('type: "ScaleRoute" scale_route_param { low_scale: 400 high_scale: 800 }'),
                     make_blobs([rois]), make_blobs(1))
    np.testing.assert_array_equal(out, rois[2:3])         # none in range: the closest to sqrt(400 * 800)


def test_roi_align_numbers_and_gradient():
    from caffepy.testing import check_layer_gradient
    x = np.arange(16.0).reshape(1, 1, 4, 4)                # value = 4 h + w: bilinear is exact
    roi = np.array([[0, 0.5, 0.5, 2.5, 2.5]])             # map coordinates -0.5 shifted: [0, 2]
    y, = run_layer(make_layer('type: "ROIAlign" roi_pooling_param { pooled_h: 2 pooled_w: 2 }'),
                   make_blobs([x, roi]), make_blobs(1))
    grid = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(y[0, 0], 4 * grid[:, None] + grid[None, :])
    xs = np.random.default_rng(6).standard_normal((1, 2, 5, 5))
    rois = np.array([[0, 0.3, 0.7, 3.1, 2.6], [0, 1.2, 0.4, 4.4, 3.3]])
    check_layer_gradient(make_layer('type: "ROIAlign" roi_pooling_param { pooled_h: 2 pooled_w: 3 '
                                    'spatial_scale: 0.9 }'), make_blobs([xs, rois]), make_blobs(1),
                         check_bottom=[0])
