"""RotateROIPooling of CRPN and RRPN (forks/detection/rotated_roi.py)."""
import numpy as np
import pytest

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


ALIGN = 'type: "RotateROIAlign" rotate_roi_align_param { pooled_h: 2 pooled_w: 2 }'


def _corners_ref(img, rw, rh):
    H, W = img.shape
    xl, xr, yb, yt = int(np.floor(rw)), int(np.ceil(rw)), int(np.floor(rh)), int(np.ceil(rh))
    v = 0.0
    for xx, yy, wt in ((xl, yt, (1 - rw + xl) * (1 - yt + rh)), (xr, yt, (1 - xr + rw) * (1 - yt + rh)),
                       (xl, yb, (1 - rw + xl) * (1 - rh + yb)), (xr, yb, (1 - xr + rw) * (1 - rh + yb))):
        if 0 <= xx < W and 0 <= yy < H:
            v += wt * img[yy, xx]
    return v


def test_crpn_align_max_of_rotated_samples():
    x = np.random.default_rng(4).random((1, 1, 8, 8)) + 0.1
    rois = np.array([[0, 1.5, 1.0, 4.5, 4.0, 30.0]])
    (y,) = run_layer(make_layer(ALIGN), make_blobs([x, rois]), make_blobs(1))
    # size 4 x 4, centre (3.5, 3), bins 2 x 2, samples 1 apart from each bin start
    t = 30.0 / 180.0 * 3.1415926
    c, s = np.cos(t), np.sin(t)
    for i in range(2):
        for j in range(2):
            vals = []
            for hh in (1.0 + 2 * i, 2.0 + 2 * i):
                for ww in (1.5 + 2 * j, 2.5 + 2 * j):
                    rw = (ww - 3.5) * c + (hh - 3.0) * s + 3.5
                    rh = -(ww - 3.5) * s + (hh - 3.0) * c + 3.0
                    vals.append(_corners_ref(x[0, 0], rw, rh))
            assert y[0, 0, i, j] == pytest.approx(max(vals))


def test_crpn_align_integer_points_count_twice_and_route_to_their_pixel():
    x = np.zeros((1, 1, 6, 6))
    x[0, 0, 2, 3] = 1.0
    rois = np.array([[0, 3.0, 2.0, 3.0, 2.0, 0.0]])     # one point, at (3, 2) exactly
    layer, bottom, top = make_layer(ALIGN.replace("2 pooled_w: 2", "1 pooled_w: 1")), \
        make_blobs([x, rois]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert y[0, 0, 0, 0] == pytest.approx(4.0)           # floor = ceil in both axes
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    assert bottom[0].diff[0, 0, 2, 3] == 1.0 and bottom[0].diff.sum() == 1.0


RRPN_ALIGN = ('type: "RotateROIAlign" bottom: "x" bottom: "r" bottom: "i" '
              'rotate_align_param { pooled_h: 1 pooled_w: 1 spatial_scale: 0.25 }')


def test_rrpn_align_reads_points_of_the_quadrilateral():
    x = np.random.default_rng(5).random((1, 1, 8, 8)).astype(np.float32) + 0.1
    quad = np.array([[0, 4.0, 4.0, 10.0, 4.0, 10.0, 8.0, 4.0, 8.0]])     # map: x 2..5, y 2..4
    info = np.array([[16.0, 16.0, 1.0]])
    layer, bottom, top = make_layer(RRPN_ALIGN, dtype=np.float32), \
        make_blobs([x, quad, info], dtype=np.float32), make_blobs(1, dtype=np.float32)
    (y,) = run_layer(layer, bottom, top)
    # integer points: fx = 0 and fy = y - floor(x) = y - x (the kernel's), clipped corners
    vals = []
    for hh in range(2, 5):
        for ww in range(2, 6):
            fy = hh - ww
            v = ((1 - fy) * x[0, 0, hh, ww] + fy * x[0, 0, min(hh + 1, 7), min(ww + 1, 7)])
            vals.append(v)
    assert y[0, 0, 0, 0] == pytest.approx(max(max(vals), 0), rel=1e-5)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    kw, kh = layer._kept[0, 0, 0, 0]
    assert bottom[0].diff[0, 0, int(kh), int(kw)] == pytest.approx(1.0)
    assert bottom[0].diff.sum() == pytest.approx(1.0)
