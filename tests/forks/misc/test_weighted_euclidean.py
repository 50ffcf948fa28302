import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _inputs(seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(3, 4), rng.randn(3, 4), rng.rand(3, 4)


def test_forward_matches_numpy():
    x, t, w = _inputs()
    (loss,) = run_layer(make_layer('type: "WeightedEuclideanLoss"'), make_blobs([x, t, w]),
                        make_blobs(1))
    ref = sum(w[n, k] * (x[n, k] - t[n, k]) ** 2 for n in range(3) for k in range(4)) / 3 / 2
    assert float(loss) == pytest.approx(ref)


def test_gradient():
    x, t, w = _inputs(1)
    layer = make_layer('type: "WeightedEuclideanLoss" loss_weight: 2')
    check_layer_gradient(layer, make_blobs([x, t, w]), make_blobs(1), check_bottom=[0, 1])


def test_no_gradient_for_weights():
    x, t, w = _inputs()
    layer = make_layer('type: "WeightedEuclideanLoss"')
    bottom, top = make_blobs([x, t, w]), make_blobs(1)
    run_layer(layer, bottom, top)
    with pytest.raises(CaffeError, match="weight input"):
        layer.backward(top, [True, False, True], bottom)


def test_precision_matrix_form_of_dementrock_caffe():
    import numpy as np
    import pytest
    from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
    rng = np.random.default_rng(4)
    x, t = rng.standard_normal((3, 4, 1, 1)), rng.standard_normal((3, 4))
    a = rng.standard_normal((3, 4, 4))
    p = (a @ a.transpose(0, 2, 1)).reshape(3, 4, 4, 1)      # symmetric, as precisions are
    (loss,) = run_layer(make_layer('type: "WeightedEuclideanLoss"'), make_blobs([x, t, p]),
                        make_blobs(1))
    d = x.reshape(3, 4) - t
    want = sum(d[n] @ p[n, :, :, 0] @ d[n] for n in range(3)) / 3 / 2
    assert float(loss) == pytest.approx(want)
    check_layer_gradient(make_layer('type: "WeightedEuclideanLoss"'), make_blobs([x, t, p]),
                         make_blobs(1), check_bottom=[0, 1])
