import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

MODES = {"FULL": 0, "VALID": 1, "BATCH_SIZE": 2, "NONE": 3}


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def per_position(p, axis):
    """(positions, C) rows in Caffe's label order (outer-major, inner-minor)."""
    return np.moveaxis(p, axis, -1).reshape(-1, p.shape[axis])


def normalizer_ref(mode, outer, inner, valid):
    return max(1.0, {"FULL": outer * inner, "VALID": valid, "BATCH_SIZE": outer, "NONE": 1}[mode])


def classification_case(shape, axis, seed=0, ignore=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2
    label_shape = shape[:axis] + shape[axis + 1:]
    labels = rng.integers(0, shape[axis], size=label_shape).astype(np.float64)
    if ignore is not None:
        labels.reshape(-1)[::3] = ignore
    return x, labels


# -- SoftmaxWithLoss ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["VALID", "FULL", "BATCH_SIZE", "NONE"])
def test_softmax_loss_forward(dtype, mode):
    x, labels = classification_case((2, 4, 3), axis=1, ignore=2)
    layer = make_layer('type: "SoftmaxWithLoss" loss_param { ignore_label: 2 normalization: %s }'
                       % mode, dtype=dtype)
    loss, prob = run_layer(layer, make_blobs([x, labels], dtype), make_blobs(2, dtype))
    p = per_position(softmax_ref(x, 1), 1)
    lab = labels.reshape(-1).astype(int)
    valid = lab != 2
    expected = -np.log(p[np.arange(lab.size), lab])[valid].sum() / normalizer_ref(mode, 2, 3,
                                                                                 valid.sum())
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(prob, softmax_ref(x, 1), rtol=1e-5)
    assert layer.loss_weights == [1.0, 0.0]


@pytest.mark.parametrize("normalize, expected_mode", [("true", "VALID"), ("false", "BATCH_SIZE")])
def test_softmax_loss_legacy_normalize(normalize, expected_mode):
    x, labels = classification_case((3, 5, 2), axis=1, seed=3)
    layer = make_layer('type: "SoftmaxWithLoss" loss_param { normalize: %s }' % normalize)
    (loss,) = run_layer(layer, make_blobs([x, labels]), make_blobs(1))
    p = per_position(softmax_ref(x, 1), 1)
    lab = labels.reshape(-1).astype(int)
    total = -np.log(p[np.arange(lab.size), lab]).sum()
    np.testing.assert_allclose(loss, total / normalizer_ref(expected_mode, 3, 2, 6), rtol=1e-10)


def test_softmax_loss_all_ignored_gives_zero():
    x = np.zeros((2, 3))
    layer = make_layer('type: "SoftmaxWithLoss" loss_param { ignore_label: 1 }')
    (loss,) = run_layer(layer, make_blobs([x, np.ones(2)]), make_blobs(1))
    assert loss == 0.0


@pytest.mark.parametrize("text, shape, axis", [
    ('', (3, 4), 1),
    ('softmax_param { axis: 2 } loss_param { ignore_label: 0 }', (2, 2, 3, 2), 2),
    ('loss_param { normalization: BATCH_SIZE ignore_label: 1 }', (2, 3, 2), 1),
])
def test_softmax_loss_gradient(text, shape, axis):
    x, labels = classification_case(shape, axis, seed=4)
    layer = make_layer('type: "SoftmaxWithLoss" ' + text)
    check_layer_gradient(layer, make_blobs([x, labels]), make_blobs(1), check_bottom=[0])


def test_softmax_loss_uses_top_diff_as_loss_weight():
    x, labels = classification_case((3, 4), 1, seed=5)
    layer = make_layer('type: "SoftmaxWithLoss" loss_weight: 2.5')
    bottom, top = make_blobs([x, labels]), make_blobs(1)
    layer.setup(bottom, top)
    loss = layer.forward(bottom, top)
    assert loss == pytest.approx(2.5 * float(top[0].data))
    layer.backward(top, [True, False], bottom)
    p = softmax_ref(x, 1)
    p[np.arange(3), labels.astype(int)] -= 1
    np.testing.assert_allclose(bottom[0].diff, 2.5 * p / 3, rtol=1e-10)


def test_softmax_loss_errors():
    x, labels = classification_case((3, 4), 1)
    with pytest.raises(CaffeError, match="number of labels"):
        run_layer(make_layer('type: "SoftmaxWithLoss"'),
                  make_blobs([np.zeros((3, 4, 2)), np.zeros((3, 3))]), make_blobs(1))
    with pytest.raises(CaffeError, match="out of range"):
        run_layer(make_layer('type: "SoftmaxWithLoss"'), make_blobs([x, np.array([0, 4, 1.0])]),
                  make_blobs(1))
    layer = make_layer('type: "SoftmaxWithLoss"')
    bottom, top = make_blobs([x, labels]), make_blobs(1)
    run_layer(layer, bottom, top)
    with pytest.raises(CaffeError, match="label"):
        layer.backward(top, [True, True], bottom)


# -- InfogainLoss -------------------------------------------------------------------------------
def infogain_ref(x, labels, h, axis, ignore=None):
    logp = np.log(np.maximum(per_position(softmax_ref(x, axis), axis), 1e-20))
    lab = labels.reshape(-1).astype(int)
    valid = lab != ignore if ignore is not None else np.ones(lab.size, bool)
    return -(h[lab] * logp)[valid].sum() / max(1, valid.sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infogain_forward_with_third_bottom(dtype):
    x, labels = classification_case((4, 5), 1, seed=6)
    h = np.random.default_rng(7).uniform(0, 1, (5, 5))
    layer = make_layer('type: "InfogainLoss"', dtype=dtype)
    loss, prob = run_layer(layer, make_blobs([x, labels, h.reshape(1, 1, 5, 5)], dtype),
                           make_blobs(2, dtype))
    np.testing.assert_allclose(loss, infogain_ref(x, labels, h, 1), rtol=1e-5)
    np.testing.assert_allclose(prob, softmax_ref(x, 1), rtol=1e-5)


def write_matrix(path, h):
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend([1, 1] + list(h.shape))
    bp.data.extend(h.ravel().tolist())
    path.write_bytes(bp.SerializeToString())


def test_infogain_from_source_with_axis_and_ignore(tmp_path):
    x, labels = classification_case((2, 3, 4), 2, seed=8, ignore=1)
    h = np.random.default_rng(9).uniform(0, 1, (4, 4)).astype(np.float32)
    write_matrix(tmp_path / "H.binaryproto", h)
    text = ('type: "InfogainLoss" infogain_loss_param { source: "%s" axis: 2 } '
            'loss_param { ignore_label: 1 }' % (tmp_path / "H.binaryproto"))
    (loss,) = run_layer(make_layer(text), make_blobs([x, labels]), make_blobs(1))
    np.testing.assert_allclose(loss, infogain_ref(x, labels, h.astype(np.float64), 2, ignore=1),
                               rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x, labels]), make_blobs(1), check_bottom=[0])


def test_infogain_gradient_with_third_bottom():
    x, labels = classification_case((3, 4), 1, seed=10)
    h = np.random.default_rng(11).uniform(0, 2, (4, 4))
    check_layer_gradient(make_layer('type: "InfogainLoss"'), make_blobs([x, labels, h]),
                         make_blobs(1), check_bottom=[0])


def test_infogain_errors(tmp_path):
    x, labels = classification_case((3, 4), 1)
    with pytest.raises(CaffeError, match="source"):
        run_layer(make_layer('type: "InfogainLoss"'), make_blobs([x, labels]), make_blobs(1))
    with pytest.raises(CaffeError, match="4x4"):
        run_layer(make_layer('type: "InfogainLoss"'), make_blobs([x, labels, np.eye(3)]),
                  make_blobs(1))
    with pytest.raises(CaffeError, match="deprecated"):
        run_layer(make_layer('type: "InfogainLoss" loss_param { normalize: true }'),
                  make_blobs([x, labels, np.eye(4)]), make_blobs(1))
    with pytest.raises(CaffeError, match="cannot read"):
        run_layer(make_layer('type: "InfogainLoss" infogain_loss_param { source: "%s" }'
                             % (tmp_path / "missing")), make_blobs([x, labels]), make_blobs(1))


def test_infogain_absent_source_in_a_shapes_only_build(tmp_path):
    """A build for shapes only (caffepy summary) goes on without an absent matrix file (only the
    loss's value needs it); a third-bottom H of the wrong size names the shape that passes."""
    from caffepy.errors import ShapeError
    from caffepy.layers.base import shapes_only
    x, labels = classification_case((3, 4), 1)
    layer = make_layer('type: "InfogainLoss" infogain_loss_param { source: "%s" }'
                       % (tmp_path / "missing"))
    tops = make_blobs(1)
    with shapes_only():
        layer.setup(make_blobs([x, labels]), tops)
    assert tops[0].shape == ()
    with pytest.raises(ShapeError) as e:
        run_layer(make_layer('type: "InfogainLoss"'), make_blobs([x, labels, np.eye(3)]),
                  make_blobs(1))
    assert e.value.fits == [(2, (1, 1, 4, 4), None)]


# -- MultinomialLogisticLoss --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multinomial_logistic_forward(dtype):
    rng = np.random.default_rng(12)
    p = rng.uniform(0.05, 1, (4, 5))
    labels = np.array([0, 4, 2, 2.0])
    p[1, 4] = 0.0                                       # clamped at 1e-20
    (loss,) = run_layer(make_layer('type: "MultinomialLogisticLoss"', dtype=dtype),
                        make_blobs([p, labels], dtype), make_blobs(1, dtype))
    picked = np.maximum(p[np.arange(4), labels.astype(int)], 1e-20)
    np.testing.assert_allclose(loss, -np.log(picked).sum() / 4, rtol=1e-5)


def test_multinomial_logistic_gradient():
    p = np.random.default_rng(13).uniform(0.2, 1, (3, 4, 1, 1))
    check_layer_gradient(make_layer('type: "MultinomialLogisticLoss"'),
                         make_blobs([p, np.array([3, 0, 1.0])]), make_blobs(1), check_bottom=[0])


# -- SigmoidCrossEntropyLoss --------------------------------------------------------------------
def sigmoid_ce_ref(x, t, valid, norm):
    p = 1 / (1 + np.exp(-x))
    return -(t * np.log(p) + (1 - t) * np.log(1 - p))[valid].sum() / norm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_ce_forward_default_batch_size(dtype):
    rng = np.random.default_rng(14)
    x, t = rng.standard_normal((3, 4)) * 3, rng.integers(0, 2, (3, 4)).astype(float)
    (loss,) = run_layer(make_layer('type: "SigmoidCrossEntropyLoss"', dtype=dtype),
                        make_blobs([x, t], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(loss, sigmoid_ce_ref(x, t, np.ones(t.shape, bool), 3), rtol=1e-5)


def test_sigmoid_ce_ignore_label_and_valid_normalization():
    rng = np.random.default_rng(15)
    x, t = rng.standard_normal((2, 6)), rng.integers(0, 2, (2, 6)).astype(float)
    t[0, :2] = -1
    text = 'type: "SigmoidCrossEntropyLoss" loss_param { ignore_label: -1 normalization: VALID }'
    (loss,) = run_layer(make_layer(text), make_blobs([x, t]), make_blobs(1))
    valid = t != -1
    np.testing.assert_allclose(loss, sigmoid_ce_ref(x, t, valid, valid.sum()), rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x, t]), make_blobs(1), check_bottom=[0])


def test_sigmoid_ce_gradient_soft_targets():
    rng = np.random.default_rng(16)
    x, t = rng.standard_normal((2, 3, 2)) * 2, rng.uniform(0, 1, (2, 3, 2))
    check_layer_gradient(make_layer('type: "SigmoidCrossEntropyLoss"'), make_blobs([x, t]),
                         make_blobs(1), check_bottom=[0])


def test_sigmoid_ce_is_stable_for_large_logits():
    x, t = np.array([[800.0, -800.0]]), np.array([[0.0, 1.0]])
    (loss,) = run_layer(make_layer('type: "SigmoidCrossEntropyLoss"', dtype=np.float32),
                        make_blobs([x, t], np.float32), make_blobs(1, np.float32))
    np.testing.assert_allclose(loss, 1600.0, rtol=1e-6)


# -- HingeLoss ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm", ["L1", "L2"])
def test_hinge_forward(dtype, norm):
    rng = np.random.default_rng(17)
    x, labels = rng.standard_normal((4, 5)), np.array([1, 0, 4, 4.0])
    layer = make_layer('type: "HingeLoss" hinge_loss_param { norm: %s }' % norm, dtype=dtype)
    (loss,) = run_layer(layer, make_blobs([x, labels], dtype), make_blobs(1, dtype))
    sign = np.ones_like(x)
    sign[np.arange(4), labels.astype(int)] = -1
    m = np.maximum(0, 1 + sign * x)
    expected = (m.sum() if norm == "L1" else (m * m).sum()) / 4
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.parametrize("norm", ["L1", "L2"])
def test_hinge_gradient(norm):
    x = np.random.default_rng(18).standard_normal((3, 4))
    layer = make_layer('type: "HingeLoss" hinge_loss_param { norm: %s }' % norm)
    check_layer_gradient(layer, make_blobs([x, np.array([0, 3, 1.0])]), make_blobs(1),
                         check_bottom=[0], kink=1.0, kink_range=1e-2)
