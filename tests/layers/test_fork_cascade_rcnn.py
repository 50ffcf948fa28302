"""Cascade R-CNN's BoxGroupOutput (zhaoweicai/cascade-rcnn; fork_cascade_rcnn.py)."""
import numpy as np

from caffepy.layers.fork_cascade_rcnn import jaccard
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
