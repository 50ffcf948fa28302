import numpy as np
import pytest

from caffepy.errors import ShapeError
from caffepy.testing import make_blobs, make_layer, run_layer

DET = ('type: "DetectionOutput" bottom: "x" detection_output_param { num_classes: 2 side: 2 '
       'num_box: 1 nms_threshold: 0.5 %s biases: 1 biases: 1 }')


def _sig(t):
    return 1 / (1 + np.exp(-t))


def _map(cells):
    """cells[(j, i)] = 7 values (x, y, w, h, obj, c0, c1) -> 1 x 7 x 2 x 2, the rest far negative."""
    x = np.zeros((1, 7, 2, 2))
    x[0, 4] = -20
    for (j, i), v in cells.items():
        x[0, :, j, i] = v
    return x


def test_yolov2_detection_output_rows_and_nms():
    x = _map({(0, 0): [0, 0, 0, 0, 2, 1, 0],        # box at (0.25, 0.25), size 0.5
              (0, 1): [-9, 0, 0, 0, 3, 0, 2],       # at x = 0.5 + tiny: overlaps (0, 0) by ~0
              (1, 1): [0, 0, 0.1, 0, 1, 0, 0]})
    top = run_layer(make_layer(DET % ""), make_blobs([x]), make_blobs(1))[0]
    conf = lambda o, c: _sig(o) * np.exp(c).max() / np.exp(c).sum()
    want = [[0, 0, conf(2, [1, 0]), 0.25, 0.25, 0.5, 0.5],
            [0, 1, conf(3, [0, 2]), (1 + _sig(-9)) / 2, 0.25, 0.5, 0.5],
            [0, 0, conf(1, [0, 0]), 0.75, 0.75, np.exp(0.1) / 2, 0.5]]
    np.testing.assert_allclose(top[0, 0], want, rtol=1e-6)
    # raise x of the second box until it overlaps the first by >= 0.5: the first (in cell order,
    # whatever the confidence) suppresses it
    x[0, 0, 0, 1] = -3
    x[0, 0, 0, 0] = 3                                # first box at x = (0 + 0.95) / 2
    top = run_layer(make_layer(DET % ""), make_blobs([x]), make_blobs(1))[0]
    assert top.shape == (1, 1, 2, 7) and top[0, 0, 0, 1] == 0 and top[0, 0, 1, 4] == 0.75


def test_yolov2_detection_output_threshold_and_empty():
    x = _map({(0, 0): [0, 0, 0, 0, 0, 0, 0]})       # confidence 0.5 * 0.5
    top = run_layer(make_layer(DET % "confidence_threshold: 0.3"), make_blobs([x]),
                    make_blobs(1))[0]
    np.testing.assert_array_equal(top, [[[[0, -1, -1, -1, -1, -1, -1]]]])
    top = run_layer(make_layer(DET % ""), make_blobs([x]), make_blobs(1))[0]
    assert top.shape == (1, 1, 1, 7)                 # unset: the fork's default 0.01 keeps 0.25
    with pytest.raises(ShapeError, match="side"):
        run_layer(make_layer(DET % ""), make_blobs([np.zeros((1, 7, 3, 3))]), make_blobs(1))


REGION = ('type: "RegionLoss" region_loss_param { side: 2 num_class: 2 num: 1 thresh: 0.6 '
          'object_scale: 5 noobject_scale: 1 class_scale: 1 coord_scale: 1 rescore: 1 '
          'biases: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1] }')


def _region_expected(v, truth, warm):
    """The fork's deltas for N = 1, one anchor (1, 1) on a 2 x 2 grid and one truth."""
    S = 2
    D = np.zeros_like(v)
    label, tx, ty, tw, th = truth
    for j in range(S):
        for i in range(S):
            t = v[0, :, j, i]
            o = _sig(t[4])
            px, py, pw, ph = (i + _sig(t[0])) / S, (j + _sig(t[1])) / S, np.exp(t[2]) / S, np.exp(t[3]) / S
            # clipped IoU with the truth
            a = [max(px - pw / 2, 0), max(py - ph / 2, 0), min(px + pw / 2, 1), min(py + ph / 2, 1)]
            b = [max(tx - tw / 2, 0), max(ty - th / 2, 0), min(tx + tw / 2, 1), min(ty + th / 2, 1)]
            iw, ih = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
            inter = iw * ih if iw > 0 and ih > 0 else 0
            iou = inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
            D[0, 4, j, i] = 0 if iou > 0.6 else o * o * (1 - o)
            if warm:
                for k in (0, 1):
                    s = _sig(t[k])
                    D[0, k, j, i] = -0.01 * (0.5 - s) * s * (1 - s)
                D[0, 2:4, j, i] = 0.01 * t[2:4]
    i, j = int(tx * S), int(ty * S)
    t = v[0, :, j, i]
    sx, sy, o = _sig(t[0]), _sig(t[1]), _sig(t[4])
    D[0, 0, j, i] = -(tx * S - i - sx) * sx * (1 - sx)
    D[0, 1, j, i] = -(ty * S - j - sy) * sy * (1 - sy)
    D[0, 2, j, i] = -(np.log(tw * S) - t[2])
    D[0, 3, j, i] = -(np.log(th * S) - t[3])
    D[0, 4, j, i] = -5 * (1 - o) * o * (1 - o)
    p = np.exp(t[5:]) / np.exp(t[5:]).sum()
    D[0, 5:, j, i] = -(np.eye(2)[int(label)] - p)
    return D


@pytest.mark.parametrize("warm", [True, False])
def test_yolov2_region_loss_deltas_loss_and_backward(warm):
    v = np.random.default_rng(3).standard_normal((1, 7, 2, 2))
    labels = np.zeros((1, 150))
    truth = [1, 0.7, 0.3, 0.4, 0.5]
    labels[0, :5] = truth
    layer = make_layer(REGION)
    bottom, top = make_blobs([v, labels]), make_blobs(1)
    loss = run_layer(layer, bottom, top)[0]
    if not warm:                                  # after 12800 / N forwards
        layer.seen = 12800
        layer.forward(bottom, top)
        loss = top[0].data
    D = _region_expected(v, truth, warm)
    np.testing.assert_allclose(loss, np.square(D).sum(), rtol=1e-10)   # not divided by N
    top[0].diff[...] = 2.0
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, 2.0 * D, rtol=1e-10)
