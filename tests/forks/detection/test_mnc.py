"""MNC's layers (forks/detection/mnc.py; GT9505/MONet's copy of the fork)."""
import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt


def test_inner_product_blob_multiplies_by_the_second_bottom():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    layer = make_layer('type: "InnerProductBlob"')
    bottom, top = make_blobs([x, w]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    assert y.shape == (3, 5, 1, 1)
    np.testing.assert_allclose(y[:, :, 0, 0], x @ w.T)


def test_inner_product_blob_by_hand_reads_the_first_m_k_values():
    # bottom 0 is 2 x 2 x 2 (M = 2, K = 2): X is its first 4 values; W is 1 x 2 of bottom 1
    x = np.arange(8, dtype=float).reshape(2, 2, 2)
    w = np.array([[1.0, -1.0, 5.0]])[:, :2].copy()
    (y,) = run_layer(make_layer('type: "InnerProductBlob" inner_product_blob_param '
                                '{ transpose: false }'), make_blobs([x, w]), make_blobs(1))
    # X = [[0, 1], [2, 3]]: rows times (1, -1)
    np.testing.assert_allclose(y.reshape(-1), [-1.0, -1.0])


@pytest.mark.parametrize("shape", [(3, 4), (1, 4), (3, 2, 2)])
def test_inner_product_blob_gradient_to_both_bottoms(shape):
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(shape), rng.standard_normal((5, shape[1]))
    check_layer_gradient(make_layer('type: "InnerProductBlob"'), make_blobs([x, w]),
                         make_blobs(1))


def test_inner_product_blob_param_changes_nothing():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    got = [run_layer(make_layer('type: "InnerProductBlob" ' + extra), make_blobs([x, w]),
                     make_blobs(1))[0]
           for extra in ("", "inner_product_blob_param { transpose: false }",
                         "inner_product_blob_param { transpose: true }")]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


IPB_NET = '''name: "rfcn_excerpt"
layer { name: "feat" type: "Input" top: "feat" input_param { shape { dim: 6 dim: 8 } } }
layer { name: "cls_w" type: "Input" top: "cls_w" input_param { shape { dim: 3 dim: 8 } } }
layer { name: "cls_score" type: "InnerProductBlob" bottom: "feat" bottom: "cls_w"
  top: "cls_score" inner_product_blob_param { transpose: false } }
'''


def test_inner_product_blob_excerpt_summary_strict(tmp_path):
    net = strict_excerpt(tmp_path, IPB_NET)
    assert net.blobs["cls_score"].shape == (6, 3, 1, 1)


def test_mask_pooling_forward_and_gradient():
    rng = np.random.default_rng(1)
    x, m = rng.standard_normal((2, 3, 4, 5)), rng.random((2, 1, 4, 5))
    (y,) = run_layer(make_layer('type: "MaskPooling"'), make_blobs([x, m]), make_blobs(1))
    np.testing.assert_allclose(y, x * m)
    check_layer_gradient(make_layer('type: "MaskPooling"'), make_blobs([x, m]), make_blobs(1))


def _bilinear_ref(img, y, x):
    H, W = img.shape
    if y < -0.5 or y > H - 0.5 or x < -0.5 or x > W - 0.5:
        return 0.0
    y, x = min(max(y, 0.0), H - 1), min(max(x, 0.0), W - 1)
    h0, w0 = int(y), int(x)
    h1, w1 = min(h0 + 1, H - 1), min(w0 + 1, W - 1)
    ly, lx = y - h0, x - w0
    return ((1 - ly) * (1 - lx) * img[h0, w0] + (1 - ly) * lx * img[h0, w1]
            + ly * (1 - lx) * img[h1, w0] + ly * lx * img[h1, w1])


def test_mask_resize_samples_and_shrinking_gradient_is_exact():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 6, 9))
    text = 'type: "MaskResize" mask_resize_param { output_height: 4 output_width: 5 }'
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    for h in range(4):
        for w in range(5):
            assert y[0, 1, h, w] == pytest.approx(_bilinear_ref(x[0, 1], h * 6 / 4, w * 9 / 5))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_mask_resize_enlarging_keeps_the_forks_two_output_window():
    x = np.random.default_rng(3).standard_normal((1, 1, 2, 2))
    layer = make_layer('type: "MaskResize" mask_resize_param { output_height: 8 output_width: 8 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    # pixel (0, 0): outputs 0..1 in each axis (floor(0 / 0.25) = 0, +1) with weights 1, 0.75
    assert bottom[0].diff[0, 0, 0, 0] == pytest.approx((1 + 0.75) ** 2)


ROIS = np.array([[0, 2.0, 1.0, 10.0, 7.0], [1, 0.0, 3.0, 6.0, 11.0]])


def test_roi_warping_samples_and_feature_gradient():
    x = np.random.default_rng(4).standard_normal((2, 2, 8, 8))
    text = 'type: "ROIWarping" roi_warping_param { pooled_h: 1 pooled_w: 1 spatial_scale: 0.5 }'
    (y,) = run_layer(make_layer(text), make_blobs([x, ROIS]), make_blobs(1))
    assert y.shape == (2, 2, 1, 1)
    assert y[0, 1, 0, 0] == pytest.approx(_bilinear_ref(x[0, 1], 1.0, 1.0))
    assert y[1, 0, 0, 0] == pytest.approx(_bilinear_ref(x[1, 0], 2.0, 0.0))
    check_layer_gradient(make_layer(text), make_blobs([x, ROIS]), make_blobs(1),
                         check_bottom=[0])
    text = 'type: "ROIWarping" roi_warping_param { pooled_h: 3 pooled_w: 2 spatial_scale: 0.5 }'
    (y,) = run_layer(make_layer(text), make_blobs([x, ROIS]), make_blobs(1))
    # ROI 0 on the map: x 1..5, y 1..4 (round(3.5) = 4); bins 4/2 and 3/3
    assert y[0, 0, 2, 1] == pytest.approx(_bilinear_ref(x[0, 0], 1 + 2 * 1.0, 1 + 2.0))


def test_roi_warping_roi_gradient_is_the_forks_formula():
    x = np.arange(64.0).reshape(1, 1, 8, 8)       # f = 8 y + x: d/dx 1, d/dy 8 at every sample
    rois = np.array([[0, 2.0, 2.0, 6.0, 6.0]])
    layer = make_layer('type: "ROIWarping" roi_warping_param { pooled_h: 1 pooled_w: 1 }')
    bottom, top = make_blobs([x, rois]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [False, True], bottom)
    # sample (2, 2), map ratios 0: dxc = 19 - 18, dyc = 26 - 18, dw = (18 - 19) / 2,
    # dh = (18 - 26) / 2; columns 0.5 dxc - dw, 0.5 dyc - dh, 0.5 dxc + dw, 0.5 dyc + dh
    np.testing.assert_allclose(bottom[1].diff[0], [0, 1, 8, 0, 0])


def test_roi_mask_pooling_masks_the_centre():
    x = np.random.default_rng(5).random((1, 2, 6, 6)) + 1.0
    x[0, 0, 2, 2] = 9.0                   # inside the mask: compares as 0, never taken
    rois = np.array([[0, 0.0, 0.0, 5.0, 5.0]])
    text = ('type: "ROIMaskPooling" roi_mask_pooling_param { pooled_h: 1 pooled_w: 1 '
            'mask_scale: 0.5 }')
    (y,) = run_layer(make_layer(text), make_blobs([x, rois]), make_blobs(1))
    # mask box: 2.5 -+ 1.25 -> round 1 .. 4 in both axes
    keep = np.ones((6, 6), bool)
    keep[1:5, 1:5] = False
    np.testing.assert_allclose(y[0, :, 0, 0], [x[0, c][keep].max() for c in range(2)])
    half = ('type: "ROIMaskPooling" roi_mask_pooling_param { pooled_h: 2 pooled_w: 3 '
            'half_part: 2 roi_scale: 1.2 }')
    rois = np.array([[0, 1.0, 0.0, 4.0, 5.0]])
    (y,) = run_layer(make_layer(half), make_blobs([x, rois]), make_blobs(1))
    # right half: x from 2.5 (round 3) to 2.5 + 1.8 (round 4), y -0.5 .. 5.5 (-1 .. 6)
    np.testing.assert_allclose(y[0, 1, 0, 0], x[0, 1, 0:3, 3:4].max())
    check_layer_gradient(make_layer(half), make_blobs([x, rois]), make_blobs(1), check_bottom=[0])
