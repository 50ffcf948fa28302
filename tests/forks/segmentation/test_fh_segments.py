import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.segmentation.fh_segments import fh_segment
from caffepy.testing import make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker


def _two_regions():
    img = np.zeros((1, 3, 6, 8))
    img[:, :, :, 4:] = 50.0
    return img


def test_two_regions_give_two_boxes_and_a_map():
    text = ('type: "Segmentation" bottom: "data" seg_param { method: 0 k: 10 min_size: 1 '
            'smoothing: 0 bbox_extension: 1 }')
    boxes, seg = run_layer(make_layer(text), make_blobs([_two_regions()]), make_blobs(2))
    np.testing.assert_array_equal(boxes.reshape(-1, 5), [[0, 0, 0, 4, 5], [0, 3, 0, 7, 5]])
    expect = np.zeros((1, 1, 6, 8))
    expect[..., 4:] = 1
    np.testing.assert_array_equal(seg, expect)


def test_labels_and_numbering_across_the_batch():
    img = np.concatenate([_two_regions(), _two_regions()[:, :, :, ::-1]])
    labels = np.zeros((2, 1, 6, 8))
    labels[:, :, :, 4:] = 7
    text = ('type: "Segmentation" bottom: "data" bottom: "label" seg_param { k: 10 min_size: 1 '
            'smoothing: 0 bbox_extension: 0 }')
    boxes, seg_labels, seg = run_layer(make_layer(text), make_blobs([img, labels]), make_blobs(3))
    assert boxes.shape == (4, 5, 1, 1)
    np.testing.assert_array_equal(boxes[:, 0].reshape(-1), [0, 0, 1, 1])
    # image 0's first segment, box [0, 0, 3, 5]: label rows 0..3, columns 0..1 (the fork cuts the
    # box's last row and column off): 0; image 1's first segment is its left (bright) half: 0
    np.testing.assert_array_equal(seg_labels, [0, 7, 0, 7])
    assert set(np.unique(seg[1])) == {2, 3}


def test_fh_merges_small_components_and_counts_segments():
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 255, (3, 12, 10))
    seg, count = fh_segment(img, 0.5, 200.0, 20)
    assert seg.shape == (12, 10) and seg.max() == count - 1
    sizes = np.bincount(seg.reshape(-1))
    assert sizes.min() >= 20 or count == 1
    # ids follow the raster order of each segment's first pixel
    firsts = [np.flatnonzero(seg.reshape(-1) == s)[0] for s in range(count)]
    assert firsts == sorted(firsts)


def test_segmentation_gradient_is_zero_and_slic_is_refused():
    text = 'type: "Segmentation" bottom: "data" seg_param { k: 10 min_size: 1 smoothing: 0 }'
    layer, bottom, top = make_layer(text), make_blobs([_two_regions()]), make_blobs(2)
    run_layer(layer, bottom, top)            # the tops take the segment count at a forward
    GradientChecker().check(layer, bottom, top, first_setup=False)
    with pytest.raises(NetError, match="method 0"):
        run_layer(make_layer('type: "Segmentation" seg_param { method: 1 }'),
                  make_blobs([_two_regions()]), make_blobs(1))
