import math

import numpy as np
import pytest

from caffepy.forks.ssd.detection import decode_boxes
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_permute(dtype):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    layer = make_layer('type: "Permute" permute_param { order: 0 order: 2 order: 3 }', dtype=dtype)
    (y,) = run_layer(layer, make_blobs([x], dtype), make_blobs(1, dtype))
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1).astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def prior_ref(H, W, img, mins, maxs, ars, flip, clip, var, offset=0.5):
    all_ars = [1.0]
    for r in ars:
        if all(abs(r - a) >= 1e-6 for a in all_ars):
            all_ars.append(r)
            if flip:
                all_ars.append(1 / r)
    boxes = []
    step_h, step_w = img[0] / H, img[1] / W
    for h in range(H):
        for w in range(W):
            cx, cy = (w + offset) * step_w, (h + offset) * step_h
            for i, s in enumerate(mins):
                sizes = [(s, s)] + ([(math.sqrt(s * maxs[i]),) * 2] if maxs else [])
                sizes += [(s * math.sqrt(r), s / math.sqrt(r)) for r in all_ars if abs(r - 1) >= 1e-6]
                for bw, bh in sizes:
                    boxes.append([(cx - bw / 2) / img[1], (cy - bh / 2) / img[0],
                                  (cx + bw / 2) / img[1], (cy + bh / 2) / img[0]])
    boxes = np.array(boxes)
    if clip:
        boxes = boxes.clip(0, 1)
    return np.stack([boxes.ravel(), np.tile(var, len(boxes))])[None]


@pytest.mark.parametrize("dtype", DTYPES)
def test_prior_box(dtype):
    layer = make_layer('type: "PriorBox" prior_box_param { min_size: 30 min_size: 60 max_size: 60 '
                       'max_size: 111 aspect_ratio: 2 aspect_ratio: 2 aspect_ratio: 3 flip: true clip: true '
                       'variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 }', dtype=dtype)
    feat, img = np.zeros((1, 4, 3, 2)), np.zeros((1, 3, 96, 64))
    (y,) = run_layer(layer, make_blobs([feat, img], dtype), make_blobs(1, dtype))
    ref = prior_ref(3, 2, (96, 64), [30, 60], [60, 111], [2, 2, 3], True, True, [.1, .1, .2, .2])
    assert y.shape == (1, 2, 3 * 2 * 12 * 4)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_decode_center_size():
    prior = np.array([[0.1, 0.2, 0.5, 0.6]])
    var = np.array([[0.1, 0.1, 0.2, 0.2]])
    loc = np.array([[1.0, -1.0, 0.5, 0.0]])
    b = decode_boxes(prior, var, loc, 2)
    cx, cy, w, h = 0.3 + 0.1 * 0.4, 0.4 - 0.1 * 0.4, 0.4 * math.exp(0.1), 0.4
    np.testing.assert_allclose(b[0], [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
    np.testing.assert_allclose(decode_boxes(prior, var, loc, 1)[0], prior[0] + loc[0] * var[0])


def _det_layer(extra="", dtype=np.float64):
    return make_layer('type: "DetectionOutput" detection_output_param { num_classes: 3 '
                      'background_label_id: 0 code_type: CORNER nms_param { nms_threshold: 0.5 } %s }'
                      % extra, dtype=dtype)


PRIORS = np.array([[0.1, 0.1, 0.5, 0.5], [0.12, 0.1, 0.52, 0.5], [0.6, 0.6, 0.9, 0.9]])


def _det_inputs(conf):
    loc = np.zeros((1, 3 * 4))
    prior = np.stack([PRIORS.ravel(), np.full(12, 0.1)])[None]
    return [loc, np.asarray(conf, float).reshape(1, -1), prior]


@pytest.mark.parametrize("dtype", DTYPES)
def test_detection_output_nms(dtype):
    conf = [[0.1, 0.8, 0.1], [0.1, 0.7, 0.2], [0.2, 0.3, 0.5]]   # prior x class
    (y,) = run_layer(_det_layer("confidence_threshold: 0.15", dtype), make_blobs(_det_inputs(conf), dtype),
                     make_blobs(1, dtype))
    rows = y.reshape(-1, 7)
    # class 1: prior 0 (0.8) suppresses prior 1 (IoU ~0.9); prior 2 (0.3) stays.
    # class 2: prior 2 (0.5), prior 1 (0.2); the background class 0 is skipped.
    expect = [[0, 1, 0.8] + list(PRIORS[0]), [0, 1, 0.3] + list(PRIORS[2]),
              [0, 2, 0.5] + list(PRIORS[2]), [0, 2, 0.2] + list(PRIORS[1])]
    np.testing.assert_allclose(rows, expect, rtol=1e-5)


@pytest.mark.parametrize("field", ["nms_threshold: 0.4", "side: 13", "num_box: 5", "biases: 1"])
def test_ssd_detection_output_refuses_caffe_yolov2_fields(field):
    from caffepy.errors import NetError
    conf = [[0.1, 0.8, 0.1], [0.1, 0.7, 0.2], [0.2, 0.3, 0.5]]
    with pytest.raises(NetError, match="caffe-yolov2"):
        run_layer(_det_layer(field), make_blobs(_det_inputs(conf)), make_blobs(1))


def test_detection_output_keep_top_k_and_empty():
    conf = [[0.1, 0.8, 0.1], [0.1, 0.7, 0.2], [0.2, 0.3, 0.5]]
    (y,) = run_layer(_det_layer("keep_top_k: 2 confidence_threshold: 0.15"), make_blobs(_det_inputs(conf)),
                     make_blobs(1))
    np.testing.assert_allclose(y.reshape(-1, 7)[:, :3], [[0, 1, 0.8], [0, 2, 0.5]])
    (y,) = run_layer(_det_layer("confidence_threshold: 0.95"), make_blobs(_det_inputs(conf)), make_blobs(1))
    np.testing.assert_array_equal(y.reshape(-1, 7), [[0, -1, -1, -1, -1, -1, -1]])


def test_detection_output_per_class_locations():
    conf = [[0.1, 0.9, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    loc = np.zeros((1, 3, 3, 4))
    loc[0, 0, 1] = [1, 1, 1, 1]           # class 1's offsets of prior 0
    inputs = _det_inputs(conf)
    inputs[0] = loc.reshape(1, -1)
    (y,) = run_layer(_det_layer("share_location: false confidence_threshold: 0.5"), make_blobs(inputs),
                     make_blobs(1))
    np.testing.assert_allclose(y.reshape(-1, 7), [[0, 1, 0.9] + list(PRIORS[0] + 0.1)])


def test_detection_output_clip_clamps_decoded_boxes_before_nms():
    """OpenCV's ``clip`` (its face detector's deploy.prototxt sets ``clip: 1``)."""
    loc = np.zeros((1, 12))
    loc[0, :4] = [-0.3, -0.2, 0.8, 0.9]          # prior 0 decodes past both borders
    prior = np.stack([PRIORS.ravel(), np.ones(12)])[None]
    conf = np.array([[0.1, 0.8, 0.1], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]]).reshape(1, -1)
    inputs = [loc, conf, prior]
    (plain,) = run_layer(_det_layer("confidence_threshold: 0.5"), make_blobs(inputs), make_blobs(1))
    np.testing.assert_allclose(plain.reshape(-1, 7)[0, 3:], [-0.2, -0.1, 1.3, 1.4], atol=1e-12)
    (clipped,) = run_layer(_det_layer("confidence_threshold: 0.5 clip: true"), make_blobs(inputs),
                           make_blobs(1))
    np.testing.assert_allclose(clipped.reshape(-1, 7), [[0, 1, 0.8, 0.0, 0.0, 1.0, 1.0]])
    # NMS sees the clipped boxes: two priors that overlap only once clipped
    loc2 = np.zeros((1, 12))
    loc2[0, :4] = [-0.6, -0.6, 0.5, 0.5]         # prior 0 -> [-0.5, -0.5, 1, 1]: clipped [0, 0, 1, 1]
    loc2[0, 8:] = [-0.6, -0.6, 0.1, 0.1]         # prior 2 -> [0, 0, 1, 1]
    conf2 = np.array([[0.1, 0.8, 0.1], [0.1, 0.1, 0.1], [0.1, 0.7, 0.1]]).reshape(1, -1)
    rows = [run_layer(_det_layer("confidence_threshold: 0.5 " + extra),     # IoU 0.44, then 1
                      make_blobs([loc2, conf2, prior]), make_blobs(1))[0]
            for extra in ("", "clip: true")]
    assert rows[0].reshape(-1, 7).shape[0] == 2 and rows[1].reshape(-1, 7).shape[0] == 1
