import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

PROTO = 'type: "CropCenter" crop_center_param { crop_size: 0 crop_size: 1 crop_size: 2 crop_size: 1 }'


def test_crop_center_values_and_gradient():
    x = np.arange(2 * 3 * 5 * 4, dtype=np.float64).reshape(2, 3, 5, 4)
    (y,) = run_layer(make_layer(PROTO, dtype=np.float64), make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 1, 1, 2)
    # element (n, 1, 2, 1 + j): n*60 + 1*20 + 2*4 + 1 + j
    np.testing.assert_array_equal(y[:, 0, 0], [[29, 30], [89, 90]])
    check_layer_gradient(make_layer(PROTO, dtype=np.float64),
                         make_blobs([np.random.default_rng(0).standard_normal((2, 3, 5, 4))]),
                         make_blobs(1))


def test_crop_center_shape_errors():
    with pytest.raises(NetError, match="one per axis"):
        run_layer(make_layer('type: "CropCenter" crop_center_param { crop_size: 1 }'),
                  make_blobs([np.zeros((1, 1, 4, 4))]), make_blobs(1))
    with pytest.raises(NetError, match="leaves nothing"):
        run_layer(make_layer(PROTO), make_blobs([np.zeros((1, 3, 4, 4))]), make_blobs(1))
