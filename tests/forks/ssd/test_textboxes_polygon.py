"""TextBoxes++'s DetectionOutput with use_polygon (forks/ssd/textboxes_polygon.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import make_blobs, make_layer, run_layer

PARAM = ('type: "DetectionOutput" detection_output_param { num_classes: 2 code_type: CENTER_SIZE '
         'nms_param { nms_threshold: 0.45 } %s }')


def test_polygon_detection_output_by_hand():
    priors = np.array([[0.1, 0.1, 0.3, 0.3], [0.5, 0.5, 0.9, 0.7]])
    var = np.tile([0.1, 0.1, 0.2, 0.2], (2, 1))
    loc = np.zeros((1, 2, 12))
    loc[0, 0, 4], loc[0, 0, 11] = 1.0, -1.0          # x1 + 0.1 * 1 * 0.2, y4 - 0.1 * 1 * 0.2
    conf = np.array([[[0.1, 0.9], [0.4, 0.6]]])
    out, = run_layer(make_layer(PARAM % "use_polygon: true"),
                     make_blobs([loc.reshape(1, -1), conf.reshape(1, -1),
                                 np.stack([priors.ravel(), var.ravel()])[None]]), make_blobs(1))
    assert out.shape == (1, 1, 2, 15)
    np.testing.assert_allclose(out[0, 0], [
        [0, 1, 0.9, 0.1, 0.1, 0.3, 0.3, 0.12, 0.1, 0.3, 0.1, 0.3, 0.3, 0.1, 0.28],
        [0, 1, 0.6, 0.5, 0.5, 0.9, 0.7, 0.5, 0.5, 0.9, 0.5, 0.9, 0.7, 0.5, 0.7]], atol=1e-6)
    # SSD's 4-value loc does not fit the polygon layout
    with pytest.raises(NetError, match="x 12"):
        run_layer(make_layer(PARAM % "use_polygon: true"),
                  make_blobs([np.zeros((1, 8)), conf.reshape(1, -1),
                              np.stack([priors.ravel(), var.ravel()])[None]]), make_blobs(1))
    with pytest.raises(NetError, match="use_polygon: false"):
        run_layer(make_layer(PARAM % "use_polygon: false"),
                  make_blobs([loc.reshape(1, -1), conf.reshape(1, -1),
                              np.stack([priors.ravel(), var.ravel()])[None]]), make_blobs(1))
