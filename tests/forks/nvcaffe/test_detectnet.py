"""NVCaffe DetectNet's clustering Python layers (caffepy.forks.nvcaffe.detectnet), by hand."""
import math

import numpy as np
import pytest

from caffepy.forks.nvcaffe.detectnet import group_rectangles
from caffepy.net import Net


def test_group_rectangles_hand_case():
    rects = [[1, 2, 10, 10], [2, 2, 11, 10], [1, 3, 10, 9], [40, 40, 5, 5], [41, 40, 5, 5],
             [80, 80, 8, 8]]
    out, weights = group_rectangles(rects, 1, 0.2)
    # class means (1.33, 2.33, 10.33, 9.67) and (40.5 -> 40 half to even, 40, 5, 5); the lone
    # rectangle has 1 member, not more than the threshold: dropped
    assert out.tolist() == [[1, 2, 10, 10], [40, 40, 5, 5]] and weights.tolist() == [3, 2]
    inner, w = group_rectangles([[10, 10, 4, 4]] * 2 + [[0, 0, 40, 40]] * 4, 1, 0.2)
    assert inner.tolist() == [[0, 0, 40, 40]] and w.tolist() == [4]   # the small group is inside
    same, w = group_rectangles(rects[:2], 0, 0.2)
    assert same.tolist() == rects[:2] and w.tolist() == [1, 1]


def _clusters(rng, count):
    """``count`` rectangles jittered around a few centres (so classes have several members)."""
    centres = rng.integers(0, 80, (int(rng.integers(1, 10)), 4))
    rects = centres[rng.integers(0, len(centres), count)] + rng.integers(-4, 5, (count, 4))
    rects[:, 2:] = np.abs(rects[:, 2:]) + 1
    return rects


def test_group_rectangles_is_opencvs():
    """Same rectangles, weights and order as cv2.groupRectangles, including means that land
    on .5 only in float32 arithmetic (203 / 14) and eps-grown containment."""
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(7)
    for _ in range(400):
        rects = _clusters(rng, int(rng.integers(1, 150)))
        threshold, eps = int(rng.integers(1, 5)), float(rng.choice([0.05, 0.2, 0.3, 0.5]))
        out, weights = group_rectangles(rects, threshold, eps)
        ref, ref_weights = cv2.groupRectangles(rects.tolist(), threshold, eps)
        assert out.tolist() == np.asarray(ref).reshape(-1, 4).tolist()
        assert weights.tolist() == np.asarray(ref_weights).reshape(-1).tolist()


def test_group_rectangles_float32_mean():
    """x sums to 203 over 14 members: 203 * (1.f / 14) is 14.500001 in float32, so 15."""
    rects = [[14, 0, 10, 10]] * 7 + [[15, 0, 10, 10]] * 7
    rects[0] = [13, 0, 10, 10]
    rects[-1] = [16, 0, 10, 10]
    out, weights = group_rectangles(rects, 1, 0.2)
    assert sum(r[0] for r in rects) == 203
    assert out.tolist() == [[15, 0, 10, 10]] and weights.tolist() == [14]


@pytest.mark.slow
def test_group_rectangles_full_grid():
    """A 1280 x 1280 DetectNet grid: every one of 6,400 cells proposes a box (random weights);
    the pair tests run in blocks, and every rectangle lands in exactly one class."""
    rng = np.random.default_rng(0)
    rects = rng.integers(0, 1280, (6400, 4))
    rects[:, 2:] = rng.integers(1, 200, (6400, 2))
    rects[:100] = rects[0]                       # one class of 100 identical boxes
    out, weights = group_rectangles(rects, 1, 0.2)
    assert [100] == [w for w in weights.tolist() if w == 100]
    assert rects[0].tolist() in out.tolist()
    assert weights.sum() <= 6400 and (weights > 1).all()


DEPLOY = """name: "detectnet_head"
layer { name: "in" type: "Input" top: "coverage" top: "bboxes"
  input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } shape { dim: 1 dim: 4 dim: 4 dim: 4 } } }
layer { type: 'Python' name: 'cluster' bottom: 'coverage' bottom: 'bboxes' top: 'bbox-list'
  python_param { module: 'caffe.layers.detectnet.clustering' layer: 'ClusterDetections'
    param_str: '64, 64, 16, 0.6, 1, 0.2, 8, 1' } }
"""


def test_cluster_detections_in_a_net():
    net = Net(DEPLOY, phase=1)
    cvg = np.zeros((4, 4))
    cvg[1, 1] = cvg[1, 2] = 0.9              # two cells voting for one object
    cvg[3, 3] = 0.5                          # below the coverage threshold
    boxes = np.zeros((4, 4, 4))
    # each cell predicts the object (20, 18) - (44, 40) relative to its corner (x 16, y 16)
    for y, x in [(1, 1), (1, 2)]:
        boxes[:, y, x] = [20 - 16 * x, 18 - 16 * y, 44 - 16 * x, 40 - 16 * y]
    net.blobs["coverage"].data[0, 0] = cvg
    net.blobs["bboxes"].data[0] = boxes
    out = net.forward()["bbox-list"]
    assert out.shape == (1, 50, 5)
    np.testing.assert_allclose(out[0, 0], [20, 18, 44, 40, np.float16(math.log(2))], rtol=1e-6)
    assert not out[0, 1:].any()
