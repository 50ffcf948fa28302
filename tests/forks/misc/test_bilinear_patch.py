import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

TEXT = 'type: "BilinearPatch" bilinear_patch_param { patch_h: 2 patch_w: 3 }'


def test_forward_sums_outer_products_per_cell():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 3, 3, 4))
    (y,) = run_layer(make_layer(TEXT), make_blobs([a, b]), make_blobs(1))
    assert y.shape == (2, 6, 2, 2)          # ceil(3 / 2) x ceil(4 / 3) cells
    for n in range(2):
        for c1 in range(2):
            for c2 in range(3):
                for u, rows in enumerate((slice(0, 2), slice(2, 3))):
                    for v, cols in enumerate((slice(0, 3), slice(3, 4))):
                        ref = np.sum(a[n, c1, rows, cols] * b[n, c2, rows, cols])
                        assert np.isclose(y[n, c1 * 3 + c2, u, v], ref)


def test_gradient():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 3, 4))
    check_layer_gradient(make_layer(TEXT), make_blobs([a, b]), make_blobs(1))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv2" type: "Convolution" bottom: "data" top: "conv2"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "xavier" } } }
layer { name: "slice" type: "Slice" bottom: "conv2" top: "conv2_1" top: "conv2_2"
        slice_param { axis: 1 } }
layer { name: "bilinear" type: "BilinearPatch" bottom: "conv2_1" bottom: "conv2_2"
        top: "bilinear1" bilinear_patch_param { patch_h: 4 patch_w: 4 } }
layer { name: "ip" type: "InnerProduct" bottom: "bilinear1" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
'''


def test_small_net():
    forward(NET, labels=3)
    train_step(NET, labels=3)
