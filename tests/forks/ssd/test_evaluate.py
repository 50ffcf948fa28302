"""SSD's DetectionEvaluate: the 5-column TP / FP rows, checked against a hand-made case."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.ssd.evaluate import jaccard
from caffepy.testing import make_blobs, make_layer, run_layer

LAYER = 'type: "DetectionEvaluate" detection_evaluate_param { num_classes: 3 %s }'


def _case():
    det = np.array([
        [0, 1, 0.9, 0.1, 0.1, 0.5, 0.5],    # matches gt A (IoU 1): TP
        [0, 1, 0.6, 0.1, 0.1, 0.5, 0.5],    # A again, already taken: FP
        [0, 1, 0.8, 0.6, 0.6, 0.9, 0.9],    # overlaps nothing: FP
        [0, 2, 0.7, 0.0, 0.0, 0.2, 0.2],    # class 2 has no gt in image 0: FP
        [1, -1, -1, -1, -1, -1, -1],        # image 1: no detection (not counted)
        [2, 2, 0.5, 0.5, 0.5, 1.0, 1.0],    # matches the difficult gt of image 2
    ])[None, None]
    gt = np.array([
        [0, 1, 0, 0.1, 0.1, 0.5, 0.5, 0],
        [0, 1, 1, 0.55, 0.0, 0.6, 0.05, 0],
        [2, 2, 0, 0.5, 0.5, 1.0, 1.0, 1],
        [-1, 0, 0, 0, 0, 0, 0, 0],           # end of the list
        [3, 1, 0, 0, 0, 1, 1, 0],            # after the end: ignored
    ])[None, None]
    return det, gt


@pytest.mark.parametrize("difficult,last", [("true", [2, 2, 0.5, 1, 0]),
                                            ("false", [2, 2, 0.5, 0, 0])])
def test_detection_evaluate_rows(difficult, last):
    det, gt = _case()
    layer = make_layer(LAYER % ("evaluate_difficult_gt: %s" % difficult))
    (out,) = run_layer(layer, make_blobs([det, gt]), make_blobs(1))
    n2 = 1 if difficult == "true" else 0
    want = [[-1, 1, 2, -1, -1], [-1, 2, n2, -1, -1],
            [0, 1, 0.9, 1, 0], [0, 1, 0.8, 0, 1], [0, 1, 0.6, 0, 1],   # by descending score
            [0, 2, 0.7, 0, 1], last]
    assert out.shape == (1, 1, 7, 5)
    np.testing.assert_allclose(out[0, 0], want)


def test_jaccard_pixel_quirk_and_errors():
    a = np.array([0.0, 0.0, 9.0, 9.0])
    far = np.array([[20.0, 20.0, 29.0, 29.0]])
    assert jaccard(a, far, normalized=True)[0] == 0
    np.testing.assert_allclose(jaccard(a, far, normalized=False), [1.0 / (100 + 100 - 1)])
    det, gt = _case()
    gt[0, 0, 0, 1] = 0                       # the background label in the ground truth
    with pytest.raises(NetError, match="background"):
        run_layer(make_layer(LAYER % ""), make_blobs([det, gt]), make_blobs(1))


def test_name_size_file_pixels(tmp_path):
    sizes = tmp_path / "sizes.txt"
    sizes.write_text("img0 100 200\n")
    det = np.array([[0, 1, 0.9, 0.0, 0.0, 0.5, 0.5]])[None, None]
    gt = np.array([[0, 1, 0, 0.0, 0.0, 0.5, 0.52, 0]])[None, None]
    layer = make_layer(LAYER % ('overlap_threshold: 0.97 name_size_file: "%s"' % sizes))
    (out,) = run_layer(layer, make_blobs([det, gt]), make_blobs(1))
    # pixels: det 0..100 x 0..50 -> 101 x 51; gt 0..100 x 0..52 -> 101 x 53; IoU 51/53 < 0.97
    np.testing.assert_allclose(out[0, 0, -1], [0, 1, 0.9, 0, 1])
    layer = make_layer(LAYER % ('overlap_threshold: 0.96 name_size_file: "%s"' % sizes))
    (out,) = run_layer(layer, make_blobs([det, gt]), make_blobs(1))
    np.testing.assert_allclose(out[0, 0, -1], [0, 1, 0.9, 1, 0])
