"""Structured sparsity learning's Sparsify and SymmetricRectify (wenwei202/caffe; forks/misc/ssl.py)."""
import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_sparsify_numbers_and_backward():
    x = np.array([[-2.0, -0.3, 0.0, 0.4, 1.5]])
    y, = run_layer(make_layer('type: "Sparsify" sparsify_param { thre: 0.5 }'), make_blobs([x]),
                   make_blobs(1))
    np.testing.assert_allclose(y, [[-1.5, 0, 0, 0, 1.0]])
    layer = make_layer('type: "Sparsify" sparsify_param { thre: 0.5 coef: 0.1 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, [[0.9, 0, 0, 0, 1.1]])   # (dy + coef sign(y)) [y != 0]
    xs = np.random.default_rng(0).standard_normal((2, 3, 4)) * 2
    check_layer_gradient(make_layer('type: "Sparsify" sparsify_param { thre: 0.3 }'), make_blobs([xs]),
                         make_blobs(1), kink_range=1e-2)


def test_symmetric_rectify_numbers_and_gradient():
    x = np.array([[[1.0, -0.2], [0.5, -3.0]], [[0.05, 0.3], [-0.6, 2.0]]])   # N=2, C=2, 2 values
    layer = make_layer('type: "SymmetricRectify" symmetric_rectify_param { filler { type: "constant" '
                       'value: 0.25 } thre_decay: 0.01 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.blobs[0].data[...] = [0.25, 1.0]
    layer.forward(bottom, top)
    np.testing.assert_allclose(top[0].data, [[[0.75, 0], [0, -2.0]], [[0, 0.05], [0, 1.0]]])
    top[0].diff[...] = 1.0
    layer.blobs[0].diff[...] = 0
    layer.backward(top, [True], bottom)
    # channel 0 kept: y = 0.75, 0.05 -> -2; channel 1 kept: -2.0, 1.0 -> 0; minus thre_decay each
    np.testing.assert_allclose(layer.blobs[0].diff, [-2.01, -0.01])
    np.testing.assert_allclose(bottom[0].diff, (top[0].data != 0).astype(float))
    xs = np.random.default_rng(1).standard_normal((2, 3, 4)) * 2
    check_layer_gradient(make_layer('type: "SymmetricRectify" symmetric_rectify_param { filler { '
                                    'type: "constant" value: 0.3 } }'), make_blobs([xs]), make_blobs(1),
                         kink_range=1e-2)
