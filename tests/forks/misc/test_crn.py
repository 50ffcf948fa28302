import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

VLAD = ('type: "Netvlad" netvlad_param { cluster_num: 3 local_dim: 2 vlad_dim: 6 '
        'weight_filler { type: "gaussian" } }')


def test_netvlad_values_and_gradient():
    rng = np.random.default_rng(18)
    a = rng.uniform(0, 1, (2, 3, 2, 2))
    x = rng.standard_normal((2, 2, 2, 2))
    layer = make_layer(VLAD)
    (v,) = run_layer(layer, make_blobs([a, x]), make_blobs(1))
    c = layer.blobs[0].data
    ref = np.zeros((2, 3, 2))
    for n in range(2):
        for k in range(3):
            for p in range(4):
                ref[n, k] += a[n, k].ravel()[p] * (x[n, :].reshape(2, -1)[:, p] + c[k])
    np.testing.assert_allclose(v, ref.reshape(2, 6))
    check_layer_gradient(make_layer(VLAD), make_blobs([a, x]), make_blobs(1))


def test_intranorm_values_and_gradient():
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 6))
    text = 'type: "Intranorm" intranorm_param { cluster_num: 2 }'
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(np.linalg.norm(y.reshape(2, 2, 3), axis=2), 1, rtol=1e-6)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_spfilter_values_and_gradient():
    rng = np.random.default_rng(20)
    b1, b2 = rng.standard_normal((2, 3, 2, 2)), rng.standard_normal((2, 1, 2, 2))
    w = rng.standard_normal((2, 4))
    layer = make_layer('type: "Spfilter"')
    y1, y2 = run_layer(layer, make_blobs([b1, b2, w]), make_blobs(2))
    np.testing.assert_allclose(y1, b1 * w.reshape(2, 1, 2, 2))
    check_layer_gradient(make_layer('type: "Spfilter"'), make_blobs([b1, b2, w]),
                         make_blobs(2))
