import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = ('type: "LiftedStructSimilaritySoftmaxLoss" '
        'lifted_struct_sim_softmax_loss_param { margin: 1.5 }')


def _loss_ref(x, lab, m):
    """The fork's loops over positive pairs, written out with plain sums."""
    n = len(x)
    d = np.array([[np.linalg.norm(x[a] - x[b]) for b in range(n)] for a in range(n)])
    total, pairs = 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            if lab[i] != lab[j]:
                continue
            s = sum(np.exp(m - d[i, k]) for k in range(n) if lab[k] != lab[i])
            s += sum(np.exp(m - d[j, k]) for k in range(n) if lab[k] != lab[j])
            total += max(np.log(s) + d[i, j], 0.0) ** 2
            pairs += 1
    return total / pairs / 2


def test_lifted_struct_loss_and_gradient():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4))
    lab = np.array([0, 1, 0, 2, 1, 0], dtype=float)
    (loss,) = run_layer(make_layer(TEXT), make_blobs([x, lab]), make_blobs(1))
    np.testing.assert_allclose(loss, _loss_ref(x, lab, 1.5), rtol=1e-12)
    check_layer_gradient(make_layer(TEXT), make_blobs([x.reshape(6, 4, 1, 1), lab]),
                         make_blobs(1), check_bottom=[0])


def test_lifted_struct_hinge_inactive_gives_zero():
    x = np.array([[0.0, 0.0], [0.1, 0.0], [50.0, 0.0], [50.1, 0.0]])
    lab = np.array([0, 0, 1, 1], dtype=float)
    layer, bottom, top = make_layer(TEXT), make_blobs([x, lab]), make_blobs(1)
    assert run_layer(layer, bottom, top)[0] == 0
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    assert not bottom[0].diff.any()
