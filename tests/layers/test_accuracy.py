import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer


def accuracy_ref(x, labels, top_k, axis=1, ignore=None):
    scores = np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
    lab = labels.reshape(-1).astype(int)
    hits, counts = np.zeros(x.shape[axis]), np.zeros(x.shape[axis])
    for row, l in zip(scores, lab):
        if l == ignore:
            continue
        counts[l] += 1
        hits[l] += np.sum(row >= row[l]) - 1 < top_k
    per_class = np.where(counts > 0, hits / np.maximum(counts, 1), 0)
    return hits.sum() / max(counts.sum(), 1), per_class


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_accuracy_top_k_and_per_class(dtype, top_k):
    rng = np.random.default_rng(top_k)
    x, labels = rng.standard_normal((20, 5)), rng.integers(0, 5, 20).astype(float)
    layer = make_layer('type: "Accuracy" accuracy_param { top_k: %d }' % top_k, dtype=dtype)
    acc, per_class = run_layer(layer, make_blobs([x, labels], dtype), make_blobs(2, dtype))
    ref_acc, ref_pc = accuracy_ref(x.astype(dtype), labels, top_k)
    np.testing.assert_allclose(acc, ref_acc, rtol=1e-6)
    np.testing.assert_allclose(per_class, ref_pc, rtol=1e-6)
    assert layer.loss_weights == [0.0, 0.0]


def test_accuracy_axis_and_ignore_label():
    rng = np.random.default_rng(7)
    x, labels = rng.standard_normal((2, 3, 4)), rng.integers(0, 4, (2, 3)).astype(float)
    labels[0, 0] = labels[1, 2] = 1
    layer = make_layer('type: "Accuracy" accuracy_param { axis: 2 ignore_label: 1 }')
    (acc,) = run_layer(layer, make_blobs([x, labels]), make_blobs(1))
    assert acc == pytest.approx(accuracy_ref(x, labels, 1, axis=2, ignore=1)[0])


def test_accuracy_ties_count_against_the_true_class():
    x = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    (acc,) = run_layer(make_layer('type: "Accuracy"'), make_blobs([x, np.array([0, 2.0])]),
                       make_blobs(1))
    assert acc == 0.0


def test_accuracy_everything_ignored_is_zero():
    layer = make_layer('type: "Accuracy" accuracy_param { ignore_label: 0 }')
    (acc,) = run_layer(layer, make_blobs([np.ones((2, 3)), np.zeros(2)]), make_blobs(1))
    assert acc == 0.0


def test_accuracy_errors():
    with pytest.raises(CaffeError, match="top_k"):
        run_layer(make_layer('type: "Accuracy" accuracy_param { top_k: 4 }'),
                  make_blobs([np.ones((2, 3)), np.zeros(2)]), make_blobs(1))
    with pytest.raises(CaffeError, match="number of labels"):
        run_layer(make_layer('type: "Accuracy"'), make_blobs([np.ones((2, 3, 2)), np.zeros((2, 3))]),
                  make_blobs(1))
    layer = make_layer('type: "Accuracy"')
    assert not layer.allow_force_backward(0)
