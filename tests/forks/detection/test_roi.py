import math

import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _round(v):
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def roi_pool_ref(x, rois, ph, pw, scale):
    N, C, H, W = x.shape
    out = np.zeros((len(rois), C, ph, pw))
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        sw, sh, ew, eh = (_round(v * scale) for v in (x1, y1, x2, y2))
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        for i in range(ph):
            for j in range(pw):
                hs = min(max(int(math.floor(i * rh / ph)) + sh, 0), H)
                he = min(max(int(math.ceil((i + 1) * rh / ph)) + sh, 0), H)
                ws = min(max(int(math.floor(j * rw / pw)) + sw, 0), W)
                we = min(max(int(math.ceil((j + 1) * rw / pw)) + sw, 0), W)
                if he > hs and we > ws:
                    out[r, :, i, j] = x[int(b), :, hs:he, ws:we].max(axis=(1, 2))
    return out


def psroi_ref(x, rois, dim, G, scale):
    N, C, H, W = x.shape
    out = np.zeros((len(rois), dim, G, G))
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        sw, sh = _round(x1) * scale, _round(y1) * scale
        ew, eh = (_round(x2) + 1) * scale, (_round(y2) + 1) * scale
        bh, bw = max(eh - sh, 0.1) / G, max(ew - sw, 0.1) / G
        for c in range(dim):
            for i in range(G):
                for j in range(G):
                    hs = min(max(math.floor(i * bh + sh), 0), H)
                    he = min(max(math.ceil((i + 1) * bh + sh), 0), H)
                    ws = min(max(math.floor(j * bw + sw), 0), W)
                    we = min(max(math.ceil((j + 1) * bw + sw), 0), W)
                    if he > hs and we > ws:
                        out[r, c, i, j] = x[int(b), (c * G + i) * G + j, hs:he, ws:we].mean()
    return out


ROIS = np.array([[0, 1, 2, 30, 25], [1, 0, 0, 15, 15], [0, 10, 12, 11, 12], [1, -8, -4, 60, 50]], float)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roi_pooling_forward(dtype):
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 9))
    layer = make_layer('type: "ROIPooling" roi_pooling_param { pooled_h: 3 pooled_w: 2 spatial_scale: 0.25 }',
                       dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x, ROIS], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, roi_pool_ref(x.astype(dtype), ROIS, 3, 2, 0.25), rtol=1e-6)


def test_roi_pooling_gradient():
    x = np.random.default_rng(1).standard_normal((2, 2, 6, 6))
    layer = make_layer('type: "ROIPooling" roi_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.25 }')
    check_layer_gradient(layer, make_blobs([x, ROIS]), make_blobs(1), check_bottom=[0])


@pytest.mark.parametrize("spec", [
    'type: "ROIPooling" roi_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.25 }',
    'type: "PSROIPooling" psroi_pooling_param { spatial_scale: 0.25 output_dim: 2 group_size: 1 }'])
def test_roi_layers_give_the_rois_no_gradient(spec):
    """py-faster-rcnn's end-to-end nets ask for a rois gradient (their rois come from Python layers
    below the RPN): the forks' kernels give none and still fill the features' gradient."""
    x = np.random.default_rng(4).standard_normal((2, 2, 6, 6))
    layer = make_layer(spec)
    bottom, top = make_blobs([x, ROIS]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    bottom[1].diff[...] = 7.0
    layer.backward(top, [True, False], bottom)
    features_only = bottom[0].diff.copy()
    layer.backward(top, [True, True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, features_only)
    assert np.abs(features_only).sum() > 0 and not bottom[1].diff.any()


def test_roi_pooling_rejects_bad_batch_index():
    layer = make_layer('type: "ROIPooling" roi_pooling_param { pooled_h: 2 pooled_w: 2 }')
    with pytest.raises(NetError, match="batch index"):
        run_layer(layer, make_blobs([np.zeros((1, 1, 4, 4)), [[3, 0, 0, 1, 1]]]), make_blobs(1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_psroi_pooling_forward(dtype):
    x = np.random.default_rng(2).standard_normal((2, 2 * 9, 8, 9))
    layer = make_layer('type: "PSROIPooling" psroi_pooling_param { spatial_scale: 0.25 output_dim: 2 group_size: 3 }',
                       dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x, ROIS], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(y, psroi_ref(x, ROIS, 2, 3, 0.25), rtol=1e-5, atol=1e-6)


def test_psroi_pooling_gradient():
    x = np.random.default_rng(3).standard_normal((2, 8, 5, 5))
    layer = make_layer('type: "PSROIPooling" psroi_pooling_param { spatial_scale: 0.25 output_dim: 2 group_size: 2 }')
    check_layer_gradient(layer, make_blobs([x, ROIS]), make_blobs(1), check_bottom=[0])


def test_psroi_pooling_checks_channels():
    layer = make_layer('type: "PSROIPooling" psroi_pooling_param { spatial_scale: 1 output_dim: 2 group_size: 2 }')
    with pytest.raises(NetError, match="output_dim"):
        run_layer(layer, make_blobs([np.zeros((1, 7, 4, 4)), ROIS[:1]]), make_blobs(1))
