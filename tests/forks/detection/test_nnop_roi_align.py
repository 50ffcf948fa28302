"""nnop/caffe's ROIAlign (roi_align_param), as nnop/mtnet's nets use it."""
import numpy as np
import pytest

from caffepy.forks.detection.cascade_rcnn import ROIAlignLayer
from caffepy.forks.detection.nnop_roi_align import NnopROIAlignLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

LAYER = 'type: "ROIAlign" roi_align_param { pooled_h: %d pooled_w: %d spatial_scale: %r }'


def test_variant_is_chosen_by_roi_align_param():
    assert isinstance(make_layer(LAYER % (2, 2, 1.0)), NnopROIAlignLayer)
    assert isinstance(make_layer('type: "ROIAlign" roi_pooling_param { pooled_h: 2 pooled_w: 2 }'),
                      ROIAlignLayer)


def test_setup_warns_which_forks_function_is_computed(caplog):
    layer = make_layer(LAYER % (2, 2, 1.0))
    layer.setup(make_blobs([np.zeros((1, 1, 4, 4)), np.array([[0, 0, 0, 3, 3]])]), make_blobs(1))
    assert any("nnop/caffe's ROIAlign" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)


def test_forward_by_hand_with_the_forks_reads_past_a_row():
    # x[c, h, w] = 16 c + 4 h + w: linear in the memory offset, so a read one row or one plane
    # further (the fork's unclipped high neighbour) continues the same ramp; past the blob it is 0
    x = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)
    layer = make_layer(LAYER % (2, 2, 1.0))
    bottom, top = make_blobs([x, [[0, 0, 0, 3, 3]]]), make_blobs(1)
    run_layer(layer, bottom, top)
    # bins 2 x 2 wide; samples at 2i + 2/3 and 2i + 4/3; the largest is the second in each axis
    third = 1.0 / 3.0
    ch0 = [[4 * 4 * third + 4 * third, 4 * 4 * third + 2 + 4 * third],
           [4 * (2 + 4 * third) + 4 * third, 4 * (2 + 4 * third) + 2 + 4 * third]]
    np.testing.assert_allclose(top[0].data[0, 0], ch0)
    # channel 1, bottom bins: row 4 is past the blob, so the samples at y = 3 1/3 lose 1/3 of
    # their value and the winner is at y = 2 2/3; in the last bin the sample at x = 3 1/3 also
    # loses its (row 3, column 4) tap, the past-the-end offset 16: the one at x = 2 2/3 wins
    ch1 = [[16 + ch0[0][0], 16 + ch0[0][1]],
           [16 + 4 * 8 * third + 4 * third, 16 + 4 * 8 * third + 8 * third]]
    np.testing.assert_allclose(top[0].data[0, 1], ch1)
    np.testing.assert_array_equal(layer._argmax[0, 0], [[4, 4], [4, 4]])
    np.testing.assert_array_equal(layer._argmax[0, 1], [[4, 4], [2, 1]])


def test_empty_bins_and_negative_batch_index():
    x = -np.ones((1, 1, 4, 4))
    layer = make_layer(LAYER % (1, 1, 1.0))
    bottom, top = make_blobs([x, [[0, 10, 10, 12, 12], [-1, 0, 0, 2, 2]]]), make_blobs(1)
    run_layer(layer, bottom, top)
    # a roi past the map: its bins are empty, they start from 0 and every sample is below it
    np.testing.assert_array_equal(top[0].data.ravel(), [0.0, 0.0])


def test_gradient_for_whole_number_rois():
    """For rois whose scaled corners are whole numbers the fork's backward is the derivative."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 9))
    rois = np.array([[0, 2, 2, 10, 12], [1, 0, 4, 8, 8], [0, 4, 0, 6, 10]], dtype=np.float64)
    layer = make_layer(LAYER % (2, 3, 0.5))
    check_layer_gradient(layer, make_blobs([x, rois]), make_blobs(1), check_bottom=[0])


def test_backward_places_samples_from_truncated_rois():
    """The fork's backward rebuilds the bins from trunc(x1 s) ...: a roi at 0.9 takes its
    gradient where one at 0 would."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 6, 6))
    grads = []
    for roi in ([0, 0.0, 0.0, 3.0, 3.0], [0, 0.9, 0.9, 3.5, 3.5]):
        layer = make_layer(LAYER % (2, 2, 1.0))
        bottom, top = make_blobs([x, [roi]]), make_blobs(1)
        run_layer(layer, bottom, top)
        layer._argmax[...] = 4
        top[0].diff[...] = 1.0
        layer.backward(top, [True, False], bottom)
        grads.append(bottom[0].diff.copy())
    np.testing.assert_allclose(grads[0], grads[1])


MTNET_EXCERPT = """name: "mtnet_roialign"
layer { name: "input" type: "Input" top: "conv5_3" top: "rois-body"
  input_param { shape { dim: 1 dim: 8 dim: 14 dim: 14 } shape { dim: 4 dim: 5 } } }
# body ROI pooling feature layer {{{
layer {
  name: "roi_pool-body"
  type: "ROIAlign"
  bottom: "conv5_3"
  bottom: "rois-body"
  top: "pool5-body"
  roi_align_param {
    pooled_w: 7
    pooled_h: 7
    spatial_scale: 0.0625 # 1/16
  }
}
layer {
  name: "fc6"
  type: "InnerProduct"
  bottom: "pool5-body"
  top: "fc6-body"
  param { name: "fc6_w" lr_mult: 1 }
  param { name: "fc6_b" lr_mult: 2 }
  inner_product_param {
    num_output: 16
    weight_filler { type: "gaussian" std: 0.01 }
    bias_filler { type: "constant" }
  }
}
"""


def test_mtnet_excerpt_builds_strict(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "deploy.prototxt"
    path.write_text(MTNET_EXCERPT)
    assert main(["summary", "--strict", str(path)]) in (0, None)
    assert "roi_pool-body" in capsys.readouterr().out


def _random_case(rng):
    n, c, h, w = rng.integers(1, 3), rng.integers(1, 6), rng.integers(2, 9), rng.integers(2, 9)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    corners = rng.uniform(-4, max(h, w) / scale + 4, (12, 4))
    rois = np.zeros((12, 5))
    rois[:, 0] = rng.integers(-1, n, 12)
    rois[:, 1:3] = np.minimum(corners[:, :2], corners[:, 2:])
    rois[:, 3:] = np.maximum(corners[:, :2], corners[:, 2:])
    if rng.integers(2):
        rois[:, 1:] = np.round(rois[:, 1:])       # whole corners: samples on the map's last row
    if rng.integers(4) == 0:
        x[0, 0, 0, 0] = np.nan
    return x, rois, LAYER % (rng.integers(1, 5), rng.integers(1, 5), scale)


def test_kernel_and_numpy_paths_agree_to_the_bit():
    """The numba kernel and the numpy path: the same values and winning samples, reads past a
    row and past the blob's end, empty bins, negative batch indices and a NaN included."""
    from caffepy.math import kernels
    if kernels.get() is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(11)
    for _ in range(40):
        x, rois, text = _random_case(rng)
        runs = []
        for numpy_only in (False, True):
            layer = make_layer(text)
            bottom, top = make_blobs([x, rois]), make_blobs(1)
            if numpy_only:
                with kernels.disabled():
                    run_layer(layer, bottom, top)
            else:
                run_layer(layer, bottom, top)
            runs.append((top[0].data.copy(), layer._argmax.copy()))
        np.testing.assert_array_equal(runs[0][0], runs[1][0])
        np.testing.assert_array_equal(runs[0][1], runs[1][1])
