"""R*CNN's RoIDataLayer stand-in (caffepy.forks.detection.rstar_data): context-box sampling, the
blobs of a two-image minibatch, and the choice between it and py-faster-rcnn's layer."""
import numpy as np
import pytest

import caffepy
from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.forks.detection import rstar_data
from caffepy.forks.detection.frcnn import roi_data
from caffepy.testing import make_blobs, make_layer

# boxes: 0 and 1 overlap by IoU 0.5 (1 is the only context of 0 and 0 of 1); 2 overlaps nothing
BOXES = np.array([[0, 0, 9, 9], [0, 0, 9, 19], [30, 30, 39, 39]], dtype=np.float64)


def _entry(path, overlaps):
    return dict(image=path, flipped=False, boxes=BOXES.copy(), max_classes=np.array([1, 2, 3]),
                max_overlaps=np.asarray(overlaps, dtype=np.float64), width=40, height=40)


def _layer(tops=4):
    layer = make_layer('type: "Python" python_param { module: "roi_data_layer.layer" '
                       'layer: "RoIDataLayer" param_str: "\'num_classes\': 4" }',
                       dtype=np.float32, phase=caffepy.TRAIN)
    top = make_blobs(tops)
    layer.setup([], top)
    return layer, top


def test_context_sampling_draws_n_boxes_in_the_iou_band():
    rng = np.random.default_rng(0)
    train = dict(rstar_data.CFG["TRAIN"], CONTEXT_NUM_ROIS=3)
    labels, regions, context = rstar_data.sample_regions(
        _entry("x", [0.9, 0.8, 0.7]), BOXES, 80, train, rng)
    # region 2 has no box with IoU in [0.2, 0.75] and is dropped
    order = np.argsort(labels)
    np.testing.assert_array_equal(labels[order], [1, 2])
    np.testing.assert_array_equal(regions[order], BOXES[:2])
    ctx = context.reshape(2, 3, 4)[order]
    assert (ctx[0] == BOXES[1]).all() and (ctx[1] == BOXES[0]).all()


def test_setup_shapes_and_minibatch_blobs(tmp_path):
    path = tmp_path / "im.png"
    path.write_bytes(encode_image(np.full((40, 40, 3), 100, np.uint8), "png"))
    layer, top = _layer()
    assert [t.shape for t in top] == [(1, 3, 100, 100), (1, 5), (10, 5), (1,)]
    layer.set_roidb([_entry(str(path), [0.9, 0.6, 0.1])] * 3)
    layer.forward([], top)
    data, rois, context, labels = (t.data for t in top)
    assert data.shape == (2, 3, 600, 600)          # 40 x 40 scaled to 600: s = 15
    assert rois.shape == (4, 5) and context.shape == (40, 5) and labels.shape == (4,)
    assert sorted(rois[:, 0]) == [0, 0, 1, 1] and sorted(labels) == [1, 1, 2, 2]
    for r in range(4):                             # each region's context is the other box
        np.testing.assert_allclose(rois[r, 1:], BOXES[int(labels[r]) - 1] * 15)
        other = BOXES[1] if labels[r] == 1 else BOXES[0]
        np.testing.assert_allclose(context[10 * r:10 * r + 10, 1:], np.tile(other * 15, (10, 1)))
        assert (context[10 * r:10 * r + 10, 0] == rois[r, 0]).all()


def test_forward_without_roidb_and_the_other_forms():
    layer, top = _layer()
    with pytest.raises(CaffeError, match="set_roidb"):
        layer.forward([], top)
    frcnn, _ = _layer(tops=len(roi_data.top_names(roi_data.config.cfg.TRAIN)))
    assert type(frcnn.py_layer) is roi_data.RoIDataLayer
    assert type(layer.py_layer) is rstar_data.RStarRoIDataLayer
