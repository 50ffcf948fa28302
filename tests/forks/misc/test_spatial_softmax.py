import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _reference(x, t):
    """The fork's GPU forward, map by map: subtract the max, divide by T, exponentiate,
    normalise over the H x W pixels."""
    y = np.empty_like(x)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            m = x[n, c] - x[n, c].max()
            e = np.exp(m / t)
            y[n, c] = e / e.sum()
    return y


@pytest.mark.parametrize("t", [1.0, 0.25])
def test_spatial_softmax_normalises_each_map_over_its_pixels(t):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)) * 3
    (y,) = run_layer(make_layer('type: "SpatialSoftmax" spatial_softmax_param { temperature: %g '
                                'engine: CAFFE }' % t), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, _reference(x, t), rtol=1e-12)
    np.testing.assert_allclose(y.sum(axis=(2, 3)), 1.0)


def test_spatial_softmax_gradient_with_a_temperature():
    x = np.random.default_rng(1).standard_normal((2, 2, 3, 3))
    check_layer_gradient(make_layer('type: "SpatialSoftmax" spatial_softmax_param { '
                                    'temperature: 0.5 }'), make_blobs([x]), make_blobs(1))


def test_spatial_softmax_in_place_as_the_pose_nets_use_it():
    from caffepy.net import Net
    from caffepy.proto import io as proto_io
    net = Net(proto_io.read_net(
        'input: "x" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 } '
        'layer { name: "s" type: "SpatialSoftmax" bottom: "x" top: "x" '
        'spatial_softmax_param { temperature: 2 } }'), phase=1, dtype=np.float64)
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 3))
    net.blobs["x"].data[...] = x
    net.forward()
    np.testing.assert_allclose(net.blobs["x"].data, _reference(x, 2.0), rtol=1e-12)


def test_spatial_softmax_refuses_a_non_positive_temperature():
    with pytest.raises(CaffeError, match="temperature"):
        run_layer(make_layer('type: "SpatialSoftmax" spatial_softmax_param { temperature: 0 }'),
                  make_blobs([np.ones((1, 1, 2, 2))]), make_blobs(1))
