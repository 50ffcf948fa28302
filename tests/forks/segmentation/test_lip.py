import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def test_parse_output_and_evaluate():
    x = np.zeros((1, 3, 1, 4))
    x[0, :, 0, 0] = [0.1, 0.7, 0.2]
    x[0, :, 0, 1] = [0.5, 0.5, 0.0]
    x[0, :, 0, 2] = [0.0, 0.1, 0.9]
    x[0, :, 0, 3] = [0.3, 0.2, 0.1]
    lab, best = run_layer(make_layer('type: "ParseOutput"'), make_blobs([x]), make_blobs(2))
    np.testing.assert_allclose(lab.ravel(), [1, 0, 2, 0])
    np.testing.assert_allclose(best.ravel(), [0.7, 0.5, 0.9, 0.3])
    gt = np.array([1.0, 1.0, 255.0, 0.0]).reshape(1, 1, 1, 4)
    layer = make_layer('type: "ParseEvaluate" parse_evaluate_param { num_labels: 3 '
                       'ignore_label: 255 }')
    (counts,) = run_layer(layer, make_blobs([lab, gt]), make_blobs(1))
    np.testing.assert_allclose(counts[0, :, 0], [[1, 1, 2], [1, 2, 1], [0, 0, 0]])


def test_pca_get_coord_values_and_gradient():
    from caffepy.testing import check_layer_gradient
    rng = np.random.default_rng(23)
    u = rng.standard_normal((3, 4, 2))
    b = rng.standard_normal((2, 3))
    q = rng.standard_normal((4, 2))
    t = rng.standard_normal((2, 6))
    layer = make_layer('type: "PcaGetCoord"')
    (y,) = run_layer(layer, make_blobs([u, b, q, t]), make_blobs(1))
    s = q[None] + np.einsum("nt,tpc->npc", b, u)
    aff = t.reshape(2, 2, 3)
    ref = np.einsum("nij,npj->npi", aff[:, :, :2], s) + aff[:, None, :, 2]
    np.testing.assert_allclose(y, ref)
    check_layer_gradient(make_layer('type: "PcaGetCoord"'), make_blobs([u, b, q, t]),
                         make_blobs(1), check_bottom=[1, 3], check_params=False)
