import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_triver_loss_values_and_gradient():
    f = np.array([[0.0, 0.0], [1.0, 0.0],        # anchors
                  [0.0, 1.0], [1.0, 0.5],        # positives
                  [2.0, 0.0], [1.0, 0.2]])       # negatives
    lab = np.array([0, 1, 0, 1, 2, 3.0])
    layer = make_layer('type: "TriVerLoss" triver_loss_param { k: 2 lamda: 1 }')
    (loss,) = run_layer(layer, make_blobs([f, lab]), make_blobs(1))
    # ap = (1, 0.25), an = (4, 0.04); first an > ap: triplet 0 -> M = 2 * 1
    assert float(loss) == pytest.approx((1 + 0 + 0.25 + (2 - 0.04)) / 6 / 2)
    bottom, top = make_blobs([f, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    a, p, n = f[:2], f[2:4], f[4:]
    want = np.concatenate([[a[0] - p[0], n[1] - p[1]], p - a, [[0, 0], a[1] - n[1]]]) / 6
    np.testing.assert_allclose(bottom[0].diff, want)       # M held fixed, as the fork
    # with every hinge inactive M does not enter: the gradient is the loss's
    rng = np.random.default_rng(22)
    f = rng.standard_normal((6, 3))
    check_layer_gradient(make_layer('type: "TriVerLoss" triver_loss_param { k: 0.001 lamda: 1 }'),
                         make_blobs([f, lab]), make_blobs(1), check_bottom=[0])
