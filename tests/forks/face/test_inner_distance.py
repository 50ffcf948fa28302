"""happynear/caffe-windows: InnerDistance (forks/face/inner_distance.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.array([[1.0, 2.0], [0.0, -1.0]])
C = np.array([[1.0, 0.0], [2.0, 2.0], [0.0, 0.0]])


def test_inner_distance_by_hand():
    y, = run_layer(make_layer('type: "InnerDistance"'), make_blobs([X, C]), make_blobs(1))
    # row 0: (0 + 4, 1 + 0, 1 + 4); row 1: (1 + 1, 4 + 9, 0 + 1)
    np.testing.assert_array_equal(y, [[4, 1, 5], [2, 13, 1]])
    y, = run_layer(make_layer('type: "InnerDistance" inner_distance_param { distance_type: "L1" }'),
                   make_blobs([X, C]), make_blobs(1))
    np.testing.assert_array_equal(y, [[2, 1, 3], [2, 5, 1]])
    layer = make_layer('type: "InnerDistance" inner_distance_param { num_output: 3 normalize: true '
                       'weight_filler { type: "constant" value: 3 } }')
    y, = run_layer(layer, make_blobs([X.reshape(2, 2, 1, 1)]), make_blobs(1))
    w = 3 / np.sqrt(18 + 1e-6)                                    # each row rescaled to norm 1
    np.testing.assert_allclose(layer.blobs[0].data, w, rtol=1e-6)
    np.testing.assert_allclose(y[0], [(1 - w) ** 2 + (2 - w) ** 2] * 3, rtol=1e-5)
    with pytest.raises(NetError, match="three bottoms"):
        run_layer(make_layer('type: "InnerDistance" inner_distance_param { update_center_only: true }'),
                  make_blobs([X, C]), make_blobs(1))


@pytest.mark.parametrize("kind", ["L2", "L1"])
def test_inner_distance_gradients(kind):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 2))
    param = 'type: "InnerDistance" inner_distance_param { distance_type: "%s" %%s }' % kind
    check_layer_gradient(make_layer(param % 'num_output: 4 weight_filler { type: "gaussian" }'),
                         make_blobs([x]), make_blobs(1))
    check_layer_gradient(make_layer(param % ""), make_blobs([x, rng.standard_normal((4, 4))]),
                         make_blobs(1))
    # update_center_only: only each row's own centre gets a gradient
    label = np.array([0.0, 2.0, 2.0])
    layer = make_layer(param % "update_center_only: true")
    bottom = make_blobs([x, rng.standard_normal((4, 4)), label])
    check_layer_gradient(layer, bottom, make_blobs(1), check_bottom=[0])
    top = make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True, False], bottom)
    assert np.all(bottom[1].diff[[1, 3]] == 0) and np.any(bottom[1].diff[[0, 2]] != 0)
