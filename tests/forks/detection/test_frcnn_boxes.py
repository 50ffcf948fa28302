"""caffepy.forks.detection.frcnn.boxes against hand-computed cases."""
import numpy as np
import pytest

from caffepy.forks.detection.frcnn import boxes


def test_default_anchors_are_py_faster_rcnns():
    expected = [[-84, -40, 99, 55], [-176, -88, 191, 103], [-360, -184, 375, 199],
                [-56, -56, 71, 71], [-120, -120, 135, 135], [-248, -248, 263, 263],
                [-36, -80, 51, 95], [-80, -168, 95, 183], [-168, -344, 183, 359]]
    np.testing.assert_array_equal(boxes.generate_anchors(), expected)


def test_anchors_from_params():
    # base 16, ratio 1: 16 x 16 around (7.5, 7.5); scale 2 -> 32 x 32
    a = boxes.anchors_from_params({"scales": [2], "ratios": [1]})
    np.testing.assert_array_equal(a, [[-8, -8, 23, 23]])
    assert boxes.anchors_from_params({"scales": (4, 8, 16, 32)}).shape == (12, 4)


def test_shifted_anchors_order_is_h_w_anchor():
    a = np.array([[0, 0, 15, 15], [0, 0, 7, 7]], dtype=float)
    s = boxes.shifted_anchors(a, 2, 3, 16)
    assert s.shape == (12, 4)
    np.testing.assert_array_equal(s[1], [0, 0, 7, 7])
    np.testing.assert_array_equal(s[2], [16, 0, 31, 15])       # (h0, w1, a0)
    np.testing.assert_array_equal(s[6], [0, 16, 15, 31])       # (h1, w0, a0)


def test_bbox_transform_and_inverse():
    ex = np.array([[0, 0, 9, 9]], dtype=float)                  # 10 x 10, centre (5, 5)
    gt = np.array([[5, 5, 14, 14]], dtype=float)                # centre (10, 10)
    np.testing.assert_allclose(boxes.bbox_transform(ex, gt), [[0.5, 0.5, 0, 0]])
    wide = np.array([[0, 0, 19, 9]], dtype=float)               # twice as wide, same left edge
    np.testing.assert_allclose(boxes.bbox_transform(ex, wide), [[0.5, 0, np.log(2), 0]])
    # x2 = centre + w / 2 (py-faster-rcnn's convention, no -1)
    np.testing.assert_allclose(boxes.bbox_transform_inv(ex, [[0.5, 0.5, 0, 0]]), [[5, 5, 15, 15]])
    np.testing.assert_allclose(boxes.bbox_transform_inv(ex, [[0, 0, np.log(2), 0]]),
                               [[-5, 0, 15, 10]])
    two_class = boxes.bbox_transform_inv(ex, [[0, 0, 0, 0, 0.5, 0.5, 0, 0]])
    np.testing.assert_allclose(two_class, [[0, 0, 10, 10, 5, 5, 15, 15]])


def test_clip_boxes():
    out = boxes.clip_boxes([[-5, -5, 300, 300], [10, 20, 30, 40]], (100, 200))
    np.testing.assert_array_equal(out, [[0, 0, 199, 99], [10, 20, 30, 40]])


def test_bbox_overlaps():
    a = np.array([[0, 0, 9, 9], [100, 100, 109, 109]], dtype=float)
    b = np.array([[5, 0, 14, 9], [0, 0, 9, 9], [10, 0, 19, 9]], dtype=float)
    np.testing.assert_allclose(boxes.bbox_overlaps(a, b), [[50 / 150., 1, 0], [0, 0, 0]])


def test_nms():
    b = np.array([[0, 0, 9, 9], [1, 0, 10, 9], [20, 20, 29, 29]], dtype=float)
    s = np.array([0.8, 0.9, 0.7])
    # IoU(0, 1) = 90 / 110 = 0.818
    np.testing.assert_array_equal(boxes.nms(b, s, 0.7), [1, 2])
    np.testing.assert_array_equal(boxes.nms(b, s, 0.9), [1, 0, 2])
    assert boxes.nms(np.zeros((0, 4)), np.zeros(0), 0.7).size == 0


@pytest.mark.parametrize("text,expected", [
    ("'feat_stride': 16", {"feat_stride": 16}),
    ("{'feat_stride': 16, 'scales': [8, 16, 32]}", {"feat_stride": 16, "scales": [8, 16, 32]}),
    ("'feat_stride': 16 \n'scales': !!python/tuple [4, 8, 16, 32]",
     {"feat_stride": 16, "scales": [4, 8, 16, 32]}),
    ("num_classes: 21", {"num_classes": 21}),
    ("", {}),
    # UberNet's proposal layer: a bare word is a YAML string (yaml.load in the fork)
    ("{'feat_stride': 16, 'phase': TEST, 'scales': !!python/tuple [4, 8]}",
     {"feat_stride": 16, "phase": "TEST", "scales": [4, 8]}),
    ("{'a': True, 'b': None}", {"a": True, "b": None}),
])
def test_parse_param_str(text, expected):
    assert boxes.parse_param_str(text) == expected


def test_parse_param_str_error_names_text():
    with pytest.raises(ValueError, match="feat_stride 16"):
        boxes.parse_param_str("feat_stride 16")


def test_phase_key():
    assert boxes.phase_key(0) == "TRAIN" and boxes.phase_key(1) == "TEST"
    assert boxes.phase_key("train") == "TRAIN"
