import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import strict_excerpt

RNG = np.random.default_rng(7)


def _conv(kind, fields):
    return make_layer('type: "%s" convolution_param { num_output: 1 kernel_size: 2 bias_term: false '
                      'weight_filler { type: "constant" value: 1 } %s }' % (kind, fields))


def test_convolution_dilation_h_w_by_hand():
    x = np.arange(25, dtype=float).reshape(1, 1, 5, 5)
    y = run_layer(_conv("Convolution", "dilation_h: 2 dilation_w: 1"), make_blobs([x]),
                  make_blobs(1))[0]
    a = x[0, 0]
    want = a[:3, :4] + a[:3, 1:] + a[2:, :4] + a[2:, 1:]     # taps (0, 0) (0, 1) (2, 0) (2, 1)
    assert y.shape == (1, 1, 3, 4)
    np.testing.assert_allclose(y[0, 0], want)


@pytest.mark.parametrize("kind", ["Convolution", "Deconvolution"])
def test_same_as_the_repeated_dilation(kind):
    x = RNG.standard_normal((2, 1, 4, 5))
    hw = _conv(kind, "dilation_h: 3 dilation_w: 2")
    rep = _conv(kind, "dilation: 3 dilation: 2")
    got = run_layer(hw, make_blobs([x]), make_blobs(1))[0]
    np.testing.assert_allclose(got, run_layer(rep, make_blobs([x]), make_blobs(1))[0])
    assert hw.dilation == (3, 2)


@pytest.mark.parametrize("fields", ["dilation: 2 dilation_h: 2 dilation_w: 2", "dilation_h: 2"])
def test_refusals(fields):
    with pytest.raises(CaffeError, match="dilation"):
        run_layer(_conv("Convolution", fields), make_blobs([np.zeros((1, 1, 6, 6))]),
                  make_blobs(1))


@pytest.mark.parametrize("kind", ["Convolution", "Deconvolution"])
def test_gradient(kind):
    layer = make_layer('type: "%s" convolution_param { num_output: 2 kernel_size: 2 '
                       'dilation_h: 2 dilation_w: 1 weight_filler { type: "gaussian" } '
                       'bias_filler { type: "gaussian" } }' % kind)
    check_layer_gradient(layer, make_blobs([RNG.standard_normal((2, 2, 5, 4))]), make_blobs(1))


NET = '''name: "dilated"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 9 dim: 9 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 pad_h: 2 pad_w: 1 dilation_h: 2 dilation_w: 1
    weight_filler { type: "xavier" } } }
'''


def test_excerpt_summary_strict(tmp_path):
    net = strict_excerpt(tmp_path, NET)
    assert net.blobs["conv"].shape == (1, 4, 9, 9)
