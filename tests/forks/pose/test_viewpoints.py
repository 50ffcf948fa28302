"""Viewpoints and Keypoints' 2014 layers (forks/pose/viewpoints.py)."""
import numpy as np

from caffepy.proto import io
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_euclidean_weighted_loss_value_and_gradient_on_binary_targets():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 2))
    t = (rng.random((2, 3, 2, 2)) > 0.5).astype(float)
    layer = make_layer('type: "EuclideanWeightedLoss" euclidean_weight_param { lambda: 3 }')
    loss, = run_layer(layer, make_blobs([x, t]), make_blobs(1))
    d = x - t
    np.testing.assert_allclose(float(loss), (np.sum(d ** 2) + 3 * np.sum((d * t) ** 2)) / 2 / 2)
    check_layer_gradient(layer, make_blobs([x, t]), make_blobs(1), check_bottom=[0])
    loss, = run_layer(make_layer('type: "EuclideanWeightedLoss"'), make_blobs([x, t]),
                      make_blobs(1))                                   # lambda 100
    np.testing.assert_allclose(float(loss), (np.sum(d ** 2) + 100 * np.sum((d * t) ** 2)) / 4)


def test_mask_outputs_picks_each_items_channel_group():
    x = np.random.default_rng(1).standard_normal((2, 6, 2, 3))
    start = np.array([2.0, 0.0]).reshape(2, 1, 1, 1)
    layer = make_layer('type: "MaskOutputs" mask_outputs_param { kernel_size: 2 }')
    y, = run_layer(layer, make_blobs([x, start]), make_blobs(1))
    np.testing.assert_array_equal(y[0], x[0, 4:6])
    np.testing.assert_array_equal(y[1], x[1, 0:2])
    check_layer_gradient(layer, make_blobs([x, start]), make_blobs(1), check_bottom=[0])


def test_v1_file_reads():
    net = io.read_net('layers { name: "m" type: MASK_OUTPUTS bottom: "a" bottom: "b" top: "c" '
                      'mask_outputs_param { kernel_size: 4 } } '
                      'layers { name: "l" type: EUCLIDEAN_WEIGHTED_LOSS bottom: "c" bottom: "t" '
                      'top: "loss" euclidean_weight_param { lambda: 5 } }')
    assert [l.type for l in net.layer] == ["MaskOutputs", "EuclideanWeightedLoss"]
    assert net.layer[0].mask_outputs_param.kernel_size == 4
    assert getattr(net.layer[1].euclidean_weight_param, "lambda") == 5
