"""bogger/caffe-multigpu's SoftmaxLossWithInvalid (forks/misc/bogger_multigpu.py)."""
import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.misc.bogger_multigpu import SoftmaxLossWithInvalidLayer
from caffepy.proto.io import read_net
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = 'type: "SoftmaxLossWithInvalid"'


def _reference(x, labels):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    valid = labels >= 0
    picked = p[np.arange(len(labels)), np.where(valid, labels, 0).astype(int)]
    return -np.log(picked[valid]).sum() / valid.sum()


def test_v1_type_and_values():
    net = read_net('layers { name: "loss3_c" type: SOFTMAX_LOSS_WITH_INVALID bottom: "x" '
                   'bottom: "label" top: "loss" loss_weight: 0.1 }')
    assert net.layer[0].type == "SoftmaxLossWithInvalid"
    assert isinstance(make_layer(TEXT), SoftmaxLossWithInvalidLayer)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4))
    labels = np.array([2, -1, 0, 3, -1], dtype=float)
    (loss,) = run_layer(make_layer(TEXT), make_blobs([x, labels]), make_blobs(1))
    np.testing.assert_allclose(loss, _reference(x, labels))
    # an ignore_label of loss_param is not the fork's: only negative labels are invalid
    (loss,) = run_layer(make_layer(TEXT + " loss_param { ignore_label: 2 }"),
                        make_blobs([x, labels]), make_blobs(1))
    np.testing.assert_allclose(loss, _reference(x, labels))


def test_gradient_is_zero_at_invalid_items():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 2, 2))
    labels = rng.integers(-1, 3, (4, 1, 2, 2)).astype(float)
    labels[0, 0, 0, 0] = 1
    check_layer_gradient(make_layer(TEXT), make_blobs([x, labels]), make_blobs(1), check_bottom=[0])
    layer, bottom, top = make_layer(TEXT), make_blobs([x, labels]), make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    top[0].diff[...] = 1.0
    layer.backward(top, [True, False], bottom)
    invalid = np.broadcast_to(labels < 0, x.shape)
    assert np.all(bottom[0].diff[invalid] == 0) and np.any(bottom[0].diff[~invalid] != 0)


def test_no_valid_label_is_nan_and_a_large_label_an_error():
    x = np.zeros((2, 3))
    (loss,) = run_layer(make_layer(TEXT), make_blobs([x, np.array([-1.0, -2.0])]), make_blobs(1))
    assert np.isnan(loss)
    with pytest.raises(CaffeError, match=r"label 3 out of range \[0, 3\)"):
        run_layer(make_layer(TEXT), make_blobs([x, np.array([3.0, 0.0])]), make_blobs(1))
