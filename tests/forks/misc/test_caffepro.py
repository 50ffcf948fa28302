"""yihui-he/caffe-pro's channel-selecting Filter (``filter_param``; forks/misc/caffepro.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.forks.misc.caffepro import ChannelFilterLayer
from caffepy.layers.indexing import FilterLayer
from caffepy.testing import make_blobs, make_layer, run_layer
from caffepy.testing.gradient_check import GradientChecker

TEXT = 'type: "Filter" filter_param { num_output: 2 }'


def _layer(selector):
    layer = make_layer(TEXT)
    x = np.arange(2 * 4 * 2 * 3, dtype=float).reshape(2, 4, 2, 3)
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = selector
    return layer, x, bottom, top


def test_variant_and_numbers():
    assert isinstance(make_layer(TEXT), ChannelFilterLayer)
    assert isinstance(make_layer('type: "Filter"'), FilterLayer)        # BVLC's: selector bottom
    layer, x, bottom, top = _layer([0, 1, 0, 1])
    assert top[0].shape == (2, 2, 2, 3)
    layer.forward(bottom, top)
    np.testing.assert_array_equal(top[0].data, x[:, [1, 3]])
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff.sum(axis=(0, 2, 3)), [0, 12, 0, 12])


def test_gradient():
    layer, x, bottom, top = _layer([1, 0, 0, 2])
    # the selector is not a differentiable parameter (a perturbed 0 would select a channel)
    GradientChecker().check(layer, bottom, top, check_params=False, first_setup=False)


def test_selector_must_keep_num_output_channels():
    layer, x, bottom, top = _layer([1, 1, 1, 1])      # a new layer keeps all 4; num_output is 2
    with pytest.raises(NetError, match="keeps 4 channels"):
        layer.forward(bottom, top)
    with pytest.raises(NetError, match="axis 1 of 4-D"):
        run_layer(make_layer(TEXT), make_blobs([np.zeros((2, 4))]), make_blobs(1))
