import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

CROP = 'type: "Crop" bottom: "x" crop_param { axis: %d height: 3 weight: 2 %s }'


def test_one_bottom_crop_takes_height_and_weight():
    x = np.arange(2 * 3 * 6 * 5, dtype=np.float64).reshape(2, 3, 6, 5)
    (y,) = run_layer(make_layer(CROP % (2, "offset: 2 offset: 1")), make_blobs([x]),
                     make_blobs(1))
    np.testing.assert_array_equal(y, x[:, :, 2:5, 1:3])
    (y,) = run_layer(make_layer(CROP % (2, "offset: 1")), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x[:, :, 1:4, 1:3])
    # axis 1: every cropped axis but 2 takes weight, as the fork
    (y,) = run_layer(make_layer(CROP % (1, "")), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x[:, :2, :3, :2])


def test_one_bottom_crop_gradient_and_refusals():
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 4))
    check_layer_gradient(make_layer(CROP % (2, "offset: 1")), make_blobs([x]), make_blobs(1))
    with pytest.raises(CaffeError, match="exceeds"):
        run_layer(make_layer(CROP % (2, "offset: 3")), make_blobs([x]), make_blobs(1))
    with pytest.raises(CaffeError, match="give the crop size"):
        run_layer(make_layer('type: "Crop" bottom: "x" crop_param { height: 2 }'),
                  make_blobs([x]), make_blobs(1))
