import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_truncation_and_soft_truncation():
    x = np.array([[-3.0, -0.4, 0.7, 2.5, 6.0]])
    (y,) = run_layer(make_layer('type: "Truncation" truncation_param { lower_bound: -0.5 '
                                'upper_bound: 2 }'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, [[-0.5, -0.4, 0.7, 2.0, 2.0]])
    (y,) = run_layer(make_layer('type: "Truncation"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, [[0, 0, 0.7, 2.5, 5.0]])         # defaults [0, 5]
    (y,) = run_layer(make_layer('type: "SoftTruncation"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, 1 - np.exp(-x / 2.0), rtol=1e-14)
    xs = np.array([[-3.0, -0.4, 0.7, 1.4, 2.5, 6.0]])
    check_layer_gradient(make_layer('type: "Truncation" truncation_param { lower_bound: -0.5 '
                                    'upper_bound: 2 }'), make_blobs([xs]), make_blobs(1))
    check_layer_gradient(make_layer('type: "SoftTruncation" soft_truncation_param { c: 1.5 }'),
                         make_blobs([xs]), make_blobs(1))
    # in place: the backward reads the clamped value, 0 at the bounds as the fork gives
    layer = make_layer('type: "Truncation" truncation_param { lower_bound: -0.5 upper_bound: 2 }')
    blob = make_blobs([x])
    run_layer(layer, blob, blob)
    blob[0].diff[...] = 1
    layer.backward(blob, [True], blob)
    np.testing.assert_array_equal(blob[0].diff, [[0, 1, 1, 0, 0]])
