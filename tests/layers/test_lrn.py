import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.oracle import STRICT, check_layer
from tests.conftest import shared_path

LRN = 'type: "LRN" lrn_param { local_size: %d alpha: 0.5 beta: 0.75 k: 2 norm_region: %s }'


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lrn_across_channels_forward(dtype):
    x = np.random.default_rng(0).standard_normal((2, 7, 3, 3))
    (y,) = run_layer(make_layer(LRN % (5, "ACROSS_CHANNELS"), dtype=dtype), make_blobs([x], dtype),
                     make_blobs(1, dtype))
    ref = np.empty_like(x)
    for c in range(7):
        window = x[:, max(c - 2, 0):c + 3]
        ref[:, c] = x[:, c] * (2 + 0.5 / 5 * (window ** 2).sum(axis=1)) ** -0.75
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_lrn_within_channel_forward():
    x = np.random.default_rng(1).standard_normal((2, 2, 5, 4))
    (y,) = run_layer(make_layer(LRN % (3, "WITHIN_CHANNEL")), make_blobs([x]), make_blobs(1))
    xp = np.pad(x ** 2, [(0, 0), (0, 0), (1, 1), (1, 1)])
    avg = sum(xp[:, :, i:i + 5, j:j + 4] for i in range(3) for j in range(3)) / 9.0
    np.testing.assert_allclose(y, x * (1 + 0.5 * avg) ** -0.75, rtol=1e-10)


@pytest.mark.parametrize("size,region", [(3, "ACROSS_CHANNELS"), (5, "ACROSS_CHANNELS"),
                                         (3, "WITHIN_CHANNEL")])
def test_lrn_gradient(size, region):
    x = np.random.default_rng(2).standard_normal((2, 6, 4, 3))
    check_layer_gradient(make_layer(LRN % (size, region)), make_blobs([x]), make_blobs(1))


def test_lrn_rejects_even_size():
    layer = make_layer(LRN % (4, "ACROSS_CHANNELS"))
    with pytest.raises(NetError, match="odd"):
        layer.setup(make_blobs([np.zeros((1, 4, 2, 2))]), make_blobs(1))


@pytest.mark.parametrize("case", ["lrn_across", "lrn_within"])
def test_lrn_matches_caffe(case):
    check_layer(shared_path("caffe-reference", case), STRICT)
