import numpy as np
import pytest

import caffepy
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

CONV = ('type: "Convolution" convolution_param { num_output: 3 kernel_size: 2 %s '
        'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.1 } }')


def test_partial_conv_lower_is_the_same_convolution():
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 4))
    caffepy.set_random_seed(1)
    (plain,) = run_layer(make_layer(CONV % ""), make_blobs([x]), make_blobs(1))
    caffepy.set_random_seed(1)
    layer = make_layer(CONV % "partial_conv_lower: true")
    (partial,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(plain, partial)
    # one input channel at a time, summed (the fork's partial GEMMs), by hand
    w, b = layer.blobs[0].data, layer.blobs[1].data
    ref = np.zeros((2, 3, 3, 3))
    for c in range(2):
        for i in range(3):
            for j in range(3):
                ref[:, :, i, j] += np.einsum("nab,oab->no", x[:, c, i:i + 2, j:j + 2], w[:, c])
    np.testing.assert_allclose(partial, ref + b[None, :, None, None])
    check_layer_gradient(make_layer(CONV % "partial_conv_lower: true"), make_blobs([x]),
                         make_blobs(1))


def test_partial_conv_lower_refuses_groups():
    x = np.zeros((1, 2, 4, 4))
    with pytest.raises(Exception, match="group 1 only"):
        run_layer(make_layer(CONV.replace("num_output: 3", "num_output: 2 group: 2")
                             % "partial_conv_lower: 1"), make_blobs([x]), make_blobs(1))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 3 partial_conv_lower: 1
                            weight_filler { type: "xavier" } engine: CAFFE } }
layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
        convolution_param { num_output: 3 kernel_size: 3 partial_conv_lower: 1
                            weight_filler { type: "xavier" } } }
layer { name: "ip" type: "InnerProduct" bottom: "conv2" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
'''


def test_small_net():
    forward(NET, labels=3)
    train_step(NET, labels=3)
