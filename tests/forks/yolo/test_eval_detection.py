"""EvalDetection: caffe-yolo's YOLOv1 form and intel/caffe's YOLOv2 form (forks/yolo/eval_detection.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer

V1 = ('type: "EvalDetection" eval_detection_param { side: 2 num_class: 3 num_object: 1 '
      'threshold: 0.5 sqrt: false constriant: true score_type: MULTIPLY %s }')


def _v1_inputs():
    K, C = 4, 3
    x = np.zeros((1, C + 5, K))
    x[0, :C] = [[0.1, 0.7, 0.2, 0.3], [0.8, 0.2, 0.3, 0.3], [0.1, 0.1, 0.5, 0.2]]
    x[0, C] = [0.9, 0.5, 0.4, 0.2]                          # confidences
    x[0, C + 1:] = np.array([[0.5, 0.5, 0.2, 0.2]] * 4).T   # centred boxes, 0.2 x 0.2
    lab = np.zeros((1, 7 * K))
    lab[0, K + 0], lab[0, 2 * K + 0] = 1, 1                  # cell 0: class 1
    lab[0, 3 * K:3 * K + 4] = [0.25, 0.25, 0.2, 0.2]
    lab[0, K + 1], lab[0, 2 * K + 1] = 1, 0                  # cell 1: class 0, difficult
    lab[0, 1] = 1
    lab[0, 3 * K + 4:3 * K + 8] = [0.75, 0.25, 0.2, 0.2]
    return x.reshape(1, -1), lab


def test_v1_records_per_label_in_score_order():
    x, lab = _v1_inputs()
    (y,) = run_layer(make_layer(V1 % ""), make_blobs([x, lab]), make_blobs(1))
    assert y.shape == (1, 3 + 4 * 1 * 4)
    np.testing.assert_allclose(y[0, :3], [0, 1, 0])          # the difficult truth is not counted
    rec = y[0, 3:].reshape(-1, 4)
    # cell labels: 1, 0, 2, 0 (first largest); scores 0.72, 0.35, 0.2, 0.06
    # label 0: cell 1 (matches the difficult truth: 0 0), cell 3 (IoU 0: fp)
    # label 1: cell 0 matches its truth; label 2: no truth
    np.testing.assert_allclose(rec, [[0, 0.35, 0, 0], [0, 0.06, 0, 1], [1, 0.72, 1, 0],
                                     [2, 0.2, 0, 1]], rtol=1e-6)


def test_v1_nms_drops_overlapping_boxes_across_classes():
    x, lab = _v1_inputs()
    x = x.reshape(1, 8, 4)
    x[0, 4:] = np.array([[0.5, 0.5, 1.5, 1.5]] * 4).T        # large boxes overlapping each other
    (y,) = run_layer(make_layer(V1 % "nms: 0.25"), make_blobs([x.reshape(1, -1), lab]),
                     make_blobs(1))
    rec = y[0, 3:].reshape(-1, 4)
    # cell 0 (score 0.72) has IoU 0.5 with cells 1 and 2 and 1 / 3.5 with cell 3: only it stays,
    # an fp against its small truth
    np.testing.assert_allclose(rec[0], [1, 0.72, 0, 1], rtol=1e-6)
    assert not rec[1:].any()


INTEL = ('type: "EvalDetection" eval_detection_param { side: 1 num_class: 2 num_object: 5 '
         'threshold: 0.5 score_type: MULTIPLY nms: 0.45 %s }')


def test_intel_form_decodes_anchors_and_label_rows():
    biases = " ".join("biases: %g" % v for v in [1, 1, 0.5, 0.5, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05])
    v = np.full((5, 7), -20.0)                               # five anchors, almost nothing
    v[0] = [0, 0, np.log(0.5), np.log(0.5), 3, 0, 2]         # anchor 0: 0.5 box at the centre
    x = v.reshape(1, 35, 1, 1)
    rows = np.array([[0, 2, 0, 0.25, 0.25, 0.75, 0.75, 0], [-1, 0, 0, 0, 0, 0, 0, 0]])
    (y,) = run_layer(make_layer(INTEL % biases), make_blobs([x, rows.reshape(1, 1, 2, 8)]),
                     make_blobs(1))
    assert y.shape == (1, 2 + 5 * 4)
    np.testing.assert_allclose(y[0, :2], [0, 1])
    p = np.exp(2) / (1 + np.exp(2))
    obj = 1 / (1 + np.exp(-3))
    np.testing.assert_allclose(y[0, 2:6], [1, obj * p, 1, 0], rtol=1e-6)
    assert not y[0, 6:].any()                                 # the rest fall under 0.005
    with pytest.raises(CaffeError, match="5 anchors"):
        run_layer(make_layer(INTEL.replace("num_object: 5", "num_object: 4") % biases),
                  make_blobs([np.zeros((1, 28, 1, 1)), rows]), make_blobs(1))


def test_v1_rejects_wrong_sizes():
    with pytest.raises(CaffeError, match="per image"):
        run_layer(make_layer(V1 % ""), make_blobs([np.zeros((1, 10)), np.zeros((1, 28))]),
                  make_blobs(1))
