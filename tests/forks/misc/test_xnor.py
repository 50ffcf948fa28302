import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import make_blobs, make_layer, run_layer

RNG = np.random.default_rng(8)
BINACTIV = ('type: "BinActiv" convolution_param { num_output: 1 pad: 1 kernel_size: 3 stride: 1 '
            'weight_filler { type: "constant" value: 1 } bias_term: false }')


def test_sign_and_the_box_average_of_the_channel_mean():
    x = RNG.standard_normal((2, 3, 4, 5))
    x[0, 0, 0, 0] = 0.0
    layer = make_layer(BINACTIV)
    b, k = run_layer(layer, make_blobs([x]), make_blobs(2))
    assert not layer.blobs                    # the inner convolution's weights are not params
    np.testing.assert_array_equal(b, np.where(x >= 0, 1.0, -1.0))
    assert b[0, 0, 0, 0] == 1.0
    a = np.pad(x.mean(axis=1), [(0, 0), (1, 1), (1, 1)])
    want = np.zeros((2, 1, 4, 5))
    for i in range(4):
        for j in range(5):
            want[:, 0, i, j] = a[:, i:i + 3, j:j + 3].sum(axis=(1, 2)) / 9.0
    np.testing.assert_allclose(k, want, rtol=1e-12)


def test_straight_through_gradient_of_the_sign_only():
    x = RNG.standard_normal((2, 3, 4, 4)) * 1.5
    layer = make_layer(BINACTIV)
    bottom, top = make_blobs([x]), make_blobs(2)
    run_layer(layer, bottom, top)
    top[0].diff[...] = RNG.standard_normal(x.shape)
    top[1].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, np.where(np.abs(x) <= 1, top[0].diff, 0.0))


def test_k_must_have_one_value_per_position():
    with pytest.raises(NetError, match="H x W of them"):
        run_layer(make_layer(BINACTIV.replace("pad: 1", "pad: 0")),
                  make_blobs([np.zeros((1, 2, 4, 4))]), make_blobs(2))
    with pytest.raises(NetError, match="kernel_size"):
        make_layer('type: "BinActiv" convolution_param { num_output: 1 }').setup(
            make_blobs([np.zeros((1, 2, 4, 4))]), make_blobs(2))
