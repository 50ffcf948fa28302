"""MSCNN's BoxOutput and ROIPooling pad_ratio (zhaoweicai/mscnn; forks/detection/mscnn.py, forks/detection/roi.py)."""
import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer

BOX = ('type: "BoxOutput" box_output_param { fg_thr: %s iou_thr: %s field_w: 16 field_h: 16 '
       'downsample_rate: 8 min_size: 4 }')


def _scores():
    x = np.zeros((1, 6, 1, 2))              # background, one class, 4 offsets (all 0); 1 x 2 map
    x[0, 1, 0] = [2.0, 1.0]
    return x


def test_box_output_by_hand():
    # cell w: centre ((w + 0.5) 8, 4), 16 x 16 field -> x = max(c - 8, 0), clipped to the 16 x 8 image:
    # cell 0 [0, 0, 16, 8] score 2, cell 1 [4, 0, 12, 8] score 1; their IoU is 96 / 128 = 0.75
    rois, scored = run_layer(make_layer(BOX % (0, 0.8)), make_blobs([_scores()]), make_blobs(2))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 0, 0, 16, 8], [0, 4, 0, 16, 8]])
    np.testing.assert_allclose(scored.reshape(-1, 6)[:, 5], [2, 1])
    rois, = run_layer(make_layer(BOX % (0, 0.5)), make_blobs([_scores()]), make_blobs(1))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 0, 0, 16, 8]])        # NMS drops cell 1
    rois, = run_layer(make_layer(BOX % (5, 0.5)), make_blobs([_scores()]), make_blobs(1))
    np.testing.assert_allclose(rois.reshape(-1, 5), [[0, 1, 1, 10, 10]])       # none: the dummy roi


def test_roi_pooling_pad_ratio():
    x = np.arange(36.0).reshape(1, 1, 6, 6)
    roi = np.array([[0, 2, 2, 3, 3]], float)
    plain, = run_layer(make_layer('type: "ROIPooling" roi_pooling_param { pooled_h: 1 pooled_w: 1 }'),
                       make_blobs([x, roi]), make_blobs(1))
    assert plain.ravel()[0] == x[0, 0, 3, 3]
    # pad 0.5 * (3 - 2 + 1) = 1 on each side: the roi becomes [1, 1, 4, 4]
    padded, = run_layer(make_layer('type: "ROIPooling" roi_pooling_param { pooled_h: 1 pooled_w: 1 '
                                   'pad_ratio: 0.5 }'), make_blobs([x, roi]), make_blobs(1))
    assert padded.ravel()[0] == x[0, 0, 4, 4]


def test_decode_bbox_by_hand():
    rois = np.array([[0, 10, 20, 29, 59]], float)               # w = 20, h = 40, centre (19.5, 39.5)
    off = np.array([[9, 9, 9, 9, 0.5, -0.25, np.log(2), 0.0]])   # background offsets are not read
    out, = run_layer(make_layer('type: "DecodeBBox"'), make_blobs([off, rois]), make_blobs(1))
    # cx' = 0.5 * 20 + 19.5 = 29.5, bw = 40: x1 = 29.5 - 19.5 = 10, x2 = 49;
    # cy' = -0.25 * 40 + 39.5 = 29.5, bh = 40: y1 = 29.5 - 19.5 = 10, y2 = 49
    np.testing.assert_allclose(out, [[0, 10, 10, 49, 49]])
    scaled = off.copy()
    scaled[0, 4:] = [5.0, -2.5, np.log(2) * 5, 0.0]
    out, = run_layer(make_layer('type: "DecodeBBox" bbox_reg_param { bbox_mean: 0 bbox_mean: 0 '
                                'bbox_mean: 0 bbox_mean: 0 bbox_std: 0.1 bbox_std: 0.1 bbox_std: 0.2 '
                                'bbox_std: 0.2 }'), make_blobs([scaled, rois]), make_blobs(1))
    np.testing.assert_allclose(out, [[0, 10, 10, 49, 49]], atol=1e-9)
