"""RotateROIPooling of CRPN and RRPN (forks/detection/rotated_roi.py)."""
import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

CRPN = 'type: "RotateROIPooling" rotate_roi_pooling_param { pooled_h: 2 pooled_w: 2 }'
RRPN = ('type: "RotateROIPooling" bottom: "x" bottom: "r" bottom: "i" '
        'rotate_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.5 }')


def test_crpn_at_zero_angle_is_roi_max_pooling_from_zero():
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 7))
    rois = np.array([[0, 1.0, 0.0, 4.0, 3.0, 0.0]])
    (y,) = run_layer(make_layer(CRPN), make_blobs([x, rois]), make_blobs(1))
    # x 1..4, y 0..3: 4 x 4 in 2 x 2 bins
    for i in range(2):
        for j in range(2):
            ref = x[0, :, 2 * i:2 * i + 2, 1 + 2 * j:3 + 2 * j].max(axis=(1, 2))
            np.testing.assert_allclose(y[0, :, i, j], np.maximum(ref, 0))
    check_layer_gradient(make_layer(CRPN), make_blobs([x + 3.0, rois]), make_blobs(1),
                         check_bottom=[0])


def test_crpn_quarter_turn_reads_the_rotated_pixels():
    x = np.arange(49.0).reshape(1, 1, 7, 7)
    rois = np.array([[0, 1.0, 1.0, 4.0, 4.0, 90.0]])
    (y,) = run_layer(make_layer(CRPN), make_blobs([x, rois]), make_blobs(1))
    # centre (3, 3); p -> c + round(R (p - c)) with R = [[0, 1], [-1, 0]]: (x, y) -> (y, 6 - x)
    ref = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            vals = [x[0, 0, 6 - xx, yy] for yy in range(1 + 2 * i, 3 + 2 * i)
                    for xx in range(1 + 2 * j, 3 + 2 * j)]
            ref[i, j] = max(vals)
    np.testing.assert_allclose(y[0, 0], ref)


def test_rrpn_axis_aligned_box():
    x = np.random.default_rng(1).random((1, 2, 8, 8)) + 0.1
    rois = np.array([[0, 8.0, 6.0, 8.0, 8.0, 0.0]])         # cx cy h w angle; map: 4, 3, 4 x 4
    info = np.array([[16.0, 16.0, 1.0]])
    (y,) = run_layer(make_layer(RRPN), make_blobs([x, rois, info]), make_blobs(1))
    # corners at x = 2 + 2 j, y = 1 + 2 i; pixels with 0 <= offset < 2 in both axes
    for i in range(2):
        for j in range(2):
            ref = x[0, :, 1 + 2 * i:3 + 2 * i, 2 + 2 * j:4 + 2 * j].max(axis=(1, 2))
            np.testing.assert_allclose(y[0, :, i, j], ref)
    check_layer_gradient(make_layer(RRPN), make_blobs([x, rois, info]), make_blobs(1),
                         check_bottom=[0])
