import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_outer_product_and_its_backward():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    layer = make_layer('type: "OuterProduct"')
    bottom, top = make_blobs([a, b]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    assert y.shape == (2, 1, 3, 4)
    np.testing.assert_allclose(y[:, 0], np.einsum("ni,nj->nij", a, b))
    check_layer_gradient(make_layer('type: "OuterProduct"'), make_blobs([a, b]), make_blobs(1),
                         check_bottom=[1])
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, 0)       # the fork scales it by 0 / 256


def test_random_maclaurin_projects_and_redraws_per_epoch():
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
    text = ('type: "RandomMaclaurin" random_maclaurin_param { num_output: 6 '
            'distribution_type: "gaussian" std1: 0.5 std2: 2 epoch_size: 2 }')
    layer = make_layer(text)
    bottom, top = make_blobs([x1, x2]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    w1, w2 = (b.data.copy() for b in layer.blobs)
    np.testing.assert_allclose(y, (x1 @ w1) * (x2 @ w2) / (6 * 0.5 * 2))
    layer.forward(bottom, top)                  # drawn at setup; kept for epoch_size reshapes
    np.testing.assert_array_equal(layer.blobs[0].data, w1)
    layer.forward(bottom, top)                  # the third reshape after the draw draws again
    assert not np.array_equal(layer.blobs[0].data, w1)
    bern = make_layer('type: "RandomMaclaurin" random_maclaurin_param { num_output: 6 '
                      'epoch_size: 100000 }')
    run_layer(bern, make_blobs([x1, x2]), make_blobs(1))
    assert set(np.unique(bern.blobs[0].data)) <= {0.0, 1.0}
    check_layer_gradient(bern, make_blobs([x1, x2]), make_blobs(1), check_bottom=[1],
                         check_params=False)
