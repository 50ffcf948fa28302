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


def _flagged(seed=0):
    rng = np.random.RandomState(seed)
    x, t = rng.randn(4, 3, 1, 1), rng.randn(4, 4, 1, 1)
    t[:, 3] = np.array([1.0, 0.0, 1.0, 2.0])[:, None, None]     # rows 0 and 2 count
    return x, t


def test_with_ignore_counts_flagged_rows_only():
    x, t = _flagged()
    (loss,) = run_layer(make_layer('type: "EuclideanLossWithIgnore"'), make_blobs([x, t]),
                        make_blobs(1))
    ref = sum(np.sum((x[n, :, 0, 0] - t[n, :3, 0, 0]) ** 2) for n in (0, 2)) / 2 / 2
    assert float(loss) == pytest.approx(ref)
    t[:, 3] = 0
    (loss,) = run_layer(make_layer('type: "EuclideanLossWithIgnore"'), make_blobs([x, t]),
                        make_blobs(1))
    assert float(loss) == 0


def test_with_ignore_gradient():
    x, t = _flagged(1)
    layer = make_layer('type: "EuclideanLossWithIgnore" loss_weight: 3')
    check_layer_gradient(layer, make_blobs([x, t]), make_blobs(1), check_bottom=[0])
    bottom, top = make_blobs([x, t]), make_blobs(1)
    layer = make_layer('type: "EuclideanLossWithIgnore"')
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, True], bottom)
    assert np.all(bottom[0].diff[[1, 3]] == 0)
    np.testing.assert_allclose(bottom[1].diff[:, :3], -bottom[0].diff)
    assert np.all(bottom[1].diff[:, 3] == 0)


def test_with_ignore_refusals():
    x, t = _flagged()
    with pytest.raises(CaffeError, match="one more channel"):
        run_layer(make_layer('type: "EuclideanLossWithIgnore"'), make_blobs([x, t[:, :3]]),
                  make_blobs(1))
    with pytest.raises(CaffeError, match="is_normalized"):
        run_layer(make_layer('type: "EuclideanLossWithIgnore" '
                             'euclideanloss_param { is_normalized: true }'),
                  make_blobs([x, t]), make_blobs(1))
