import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step

TEXT = ('type: "InnerProductDropout" inner_product_dropout_param { num_output: 3 '
        'seq_addr: "/nonexistent/seq.txt" weight_filler { type: "gaussian" std: 0.5 } '
        'bias_filler { type: "constant" value: 0.25 } }')


def test_forward_is_the_cpu_inner_product():
    x = np.random.default_rng(0).standard_normal((2, 2, 2, 2))
    layer = make_layer(TEXT)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    w, b = layer.blobs[0].data, layer.blobs[1].data
    assert w.shape == (3, 8) and y.shape == (2, 3)
    np.testing.assert_allclose(y, x.reshape(2, 8) @ w.T + b)
    np.testing.assert_allclose(b, 0.25)


def test_gradient():
    x = np.random.default_rng(1).standard_normal((3, 4))
    check_layer_gradient(make_layer(TEXT.replace("num_output: 3", "num_output: 3 transpose: true")),
                         make_blobs([x]), make_blobs(1))
    check_layer_gradient(make_layer(TEXT), make_blobs([x]), make_blobs(1))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 1 dim: 3 dim: 3 } shape { dim: 2 } } }
layer { name: "ipd1" type: "InnerProductDropout" bottom: "data" top: "ipd1"
        inner_product_dropout_param { seq_addr: "seq_in9.txt" num_output: 4
                                      weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ipd1" bottom: "label" top: "loss" }
'''


def test_small_net():
    forward(NET, labels=4)
    train_step(NET, labels=4)
