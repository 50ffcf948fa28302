import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_crelu_values_and_gradient():
    x = np.array([[[1.0, -2.0]], [[-0.5, 3.0]]])                 # 2 x 1 x 2
    (y,) = run_layer(make_layer('type: "CReLU"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, [[[1, 0], [0, 2]], [[0, 3], [0.5, 0]]])
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 2))
    for text in ('crelu_param { negative_slope: 0.2 }', 'crelu_param { concat_axis: 2 }'):
        check_layer_gradient(make_layer('type: "CReLU" ' + text), make_blobs([x]),
                             make_blobs(1), kink_range=1e-2)
    (y,) = run_layer(make_layer('type: "CReLU" crelu_param { concat_axis: 2 }'),
                     make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 3, 4)
    np.testing.assert_allclose(y[..., 2:], np.maximum(-x, 0))


def test_trunc_and_quant_trun():
    x = np.array([[-5.0, -1.5, 0.5, 2.9, 7.0]])
    (y,) = run_layer(make_layer('type: "Trunc" trunc_param { scale: 2 }'), make_blobs([x]),
                     make_blobs(1))
    np.testing.assert_allclose(y, [[-2, -1.5, 0.5, 2, 2]])
    x = np.random.default_rng(13).uniform(-3, 3, (2, 5))
    check_layer_gradient(make_layer('type: "Trunc" trunc_param { scale: 2 }'),
                         make_blobs([x]), make_blobs(1), kink=2.0, kink_range=1e-2)
    x = np.array([[-20.0, -3.5, -0.4, 0.4, 5.5, 30.0]])
    (y,) = run_layer(make_layer('type: "Quant_Trun" quant_trun_param { quant: 1.5 }'),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, [[-4, -2, 0, 0, 3, 4]])


def test_blackhole_takes_a_bottom_and_leaves_its_diff():
    layer = make_layer('type: "BlackHole"')
    bottom = make_blobs([np.ones((2, 3))])
    bottom[0].diff[...] = 7
    layer.setup(bottom, [])
    layer.forward(bottom, [])
    layer.backward([], [True], bottom)
    assert (bottom[0].diff == 7).all()


def test_get_data_dim():
    (d,) = run_layer(make_layer('type: "GetDataDim"'), make_blobs([np.zeros((3, 2, 5, 7))]),
                     make_blobs(1))
    assert d.shape == (3, 1, 1, 2)
    np.testing.assert_allclose(d[:, 0, 0], [[5, 7]] * 3)


def test_gating_inner_product():
    rng = np.random.default_rng(27)
    e = rng.standard_normal((3, 2 * 4))
    g = rng.uniform(0, 1, (3, 2))
    lab = np.array([1.0, 0.0, 2.0])
    text = 'type: "GatingInnerProduct" inner_product_param { num_output: 4 }'
    layer = make_layer(text)
    (y,) = run_layer(layer, make_blobs([e, g, lab, lab]), make_blobs(1))
    np.testing.assert_allclose(y, np.einsum("mk,mkn->mn", g, e.reshape(3, 2, 4)))
    assert [b.shape for b in layer.blobs] == [(4, 2), (4,)]
    check_layer_gradient(make_layer(text), make_blobs([e, g, lab, lab]), make_blobs(1),
                         check_bottom=[1], check_params=False)
