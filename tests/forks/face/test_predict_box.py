"""happynear's PredictBox (forks/face/predict_box.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer

TEXT = 'type: "PredictBox" predict_box_param { stride: 2 receptive_field: 12 %s }'


def _scores():
    s = np.zeros((1, 2, 3, 4))
    s[0, 1] = [[0.9, 0.1, 0.2, 0.6], [0.3, 0.95, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]]
    return s


def test_boxes_and_the_vector_of_kept_cells():
    s = _scores()
    d = np.zeros((1, 4, 3, 4))
    d[0, :, 1, 1] = [0.1, -0.2, np.log(2.0), 0.0]
    box, vec = run_layer(make_layer(TEXT % ""), make_blobs([s, d]), make_blobs(2))
    np.testing.assert_allclose(box[0, :, 1, 1], [2 + 1.2, 2 - 2.4, 24, 12, 0.95])
    np.testing.assert_allclose(box[0, :, 0, 3], [6, 0, 12, 12, 0.6])
    assert not box[0, :, 0, 1].any()
    # kept cells in x-major order: (0, 0), (1, 1), (0, 3), (2, 3)
    assert vec.shape == (1, 4, 5)
    np.testing.assert_allclose(vec[:, :, 4].ravel(), [0.9, 0.95, 0.6, 0.7])


def test_linear_regression_nms_and_stitch_modes():
    s = _scores()
    d = np.zeros((1, 4, 3, 4))
    d[0, :, 0, 0] = [0.1, 0.2, 0.5, 0.4]
    (box,) = run_layer(make_layer(TEXT % "bbreg_exp: false"), make_blobs([s, d]), make_blobs(1))
    np.testing.assert_allclose(box[0, :4, 0, 0], [0 + 0.2 * 12, 0 + 0.1 * 12, 12 + 0.2 * 12,
                                                 12 + 0.4 * 12])
    pooled = np.full((1, 2, 3, 4), 0.95)
    (box,) = run_layer(make_layer(TEXT % ""), make_blobs([s, d, pooled]), make_blobs(1))
    assert np.nonzero(box[0, 4])[0].tolist() == [1] and box[0, 4, 1, 1] == 0.95
    st = np.zeros((1, 3, 3, 4))
    st[0, :, 0, 0] = [1.0, 2.0, 24.0]                          # only cell (0, 0) has a field
    (box,) = run_layer(make_layer(TEXT % ""), make_blobs([s, d, st]), make_blobs(1))
    np.testing.assert_allclose(box[0, :2, 0, 0], [-1 / 12 * 24 + 0.1 * 24, -2 / 12 * 24 + 0.2 * 24])
    assert np.count_nonzero(box[0, 4]) == 1


def test_bad_scores_give_one_line():
    with pytest.raises(CaffeError, match="N x 2 x H x W"):
        run_layer(make_layer(TEXT % ""), make_blobs([np.zeros((1, 3, 2, 2))]), make_blobs(1))
