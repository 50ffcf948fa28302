import numpy as np

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
