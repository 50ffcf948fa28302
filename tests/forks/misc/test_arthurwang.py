"""ArthurWang123/caffe's 2014 SubspacePooling, Im2perPixel, SoftmaxMultilabelLoss
(forks/misc/arthurwang.py)."""
import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_subspace_max_pooling_with_mask_and_gradient():
    x = np.random.default_rng(0).permutation(2 * 5 * 2 * 2).astype(float).reshape(2, 5, 2, 2)
    layer = make_layer('type: "SubspacePooling" pooling_param { pool: MAX kernel_size: 2 '
                       'stride: 2 }')
    y, mask = run_layer(layer, make_blobs([x]), make_blobs(2))
    assert y.shape == (2, 3, 2, 2)                      # ceil((5 - 2) / 2) + 1 = 3
    np.testing.assert_array_equal(y[:, 0], x[:, 0:2].max(axis=1))
    np.testing.assert_array_equal(y[:, 2], x[:, 4])     # the last window holds channel 4 only
    np.testing.assert_array_equal(x.ravel()[mask.astype(int)], y)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_subspace_ave_pooling_and_gradient():
    x = np.random.default_rng(1).standard_normal((1, 4, 2, 3))
    layer = make_layer('type: "SubspacePooling" pooling_param { pool: AVE kernel_size: 3 }')
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y[:, 1], x[:, 1:4].mean(axis=1))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_im2perpixel():
    x = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2)
    layer = make_layer('type: "Im2perPixel"')
    y, = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (8, 3, 1, 1)
    np.testing.assert_array_equal(y[5, :, 0, 0], x[1, :, 0, 1])     # item (n 1, h 0, w 1)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_softmax_multilabel_loss():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 1, 1))
    t = rng.random((3, 4, 1, 1))
    t /= t.sum(axis=1, keepdims=True)                   # rows summing to 1
    layer = make_layer('type: "SoftmaxMultilabelLoss"')
    loss, = run_layer(layer, make_blobs([x, t]), make_blobs(1))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(float(loss), -np.sum(t * np.log(p)) / 3)
    check_layer_gradient(layer, make_blobs([x, t]), make_blobs(1), check_bottom=[0])


def test_softmax_condition_loss_counts_only_labels_in_range():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 1, 1))
    lab = np.array([0.0, 2.0, 1.0, 2.0]).reshape(4, 1, 1, 1)
    layer = make_layer('type: "SoftmaxConditionWithLoss" condition_param { ge_than: 1 '
                       'le_than: 2 } loss_param { coeff: 2 }')
    loss, = run_layer(layer, make_blobs([x, lab]), make_blobs(1))
    e = np.exp(x.reshape(4, 3))
    p = e / e.sum(axis=1, keepdims=True)
    want = -2 * (np.log(p[1, 2]) + np.log(p[2, 1]) + np.log(p[3, 2])) / 4
    np.testing.assert_allclose(float(loss), want)
    check_layer_gradient(layer, make_blobs([x, lab]), make_blobs(1), check_bottom=[0])
    loss, = run_layer(make_layer('type: "SoftmaxConditionWithLoss"'), make_blobs([x, lab]),
                      make_blobs(1))                       # no condition_param: all items
    np.testing.assert_allclose(float(loss), -np.log(p[np.arange(4), [0, 2, 1, 2]]).sum() / 4)
