import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

HAS_SMOOTH_L1_PARAM = "smooth_l1_loss_param" in caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name


# -- EuclideanLoss ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_euclidean_forward(dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 3, 2)), rng.standard_normal((4, 6))
    (loss,) = run_layer(make_layer('type: "EuclideanLoss"', dtype=dtype), make_blobs([a, b], dtype),
                        make_blobs(1, dtype))
    np.testing.assert_allclose(loss, np.sum((a.reshape(4, 6) - b) ** 2) / 8, rtol=1e-5)


def test_euclidean_gradient_both_bottoms():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    layer = make_layer('type: "EuclideanLoss"')
    check_layer_gradient(layer, make_blobs([a, b]), make_blobs(1))
    assert layer.allow_force_backward(1)


def test_euclidean_shape_mismatch():
    with pytest.raises(CaffeError, match="same dimension"):
        run_layer(make_layer('type: "EuclideanLoss"'), make_blobs([np.zeros((3, 4)), np.zeros((3, 5))]),
                  make_blobs(1))


# -- ContrastiveLoss ----------------------------------------------------------------------------
def contrastive_case(seed=2):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((6, 3)) * 0.6, rng.standard_normal((6, 3)) * 0.6
    return a, b, np.array([1, 0, 0, 1, 0, 0.0])


def contrastive_ref(a, b, y, margin, legacy):
    d2 = np.sum((a - b) ** 2, axis=1)
    dis = np.maximum(margin - d2, 0) if legacy else np.maximum(margin - np.sqrt(d2), 0) ** 2
    return np.sum(np.where(y != 0, d2, dis)) / len(y) / 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("legacy", [False, True])
def test_contrastive_forward(dtype, legacy):
    a, b, y = contrastive_case()
    text = ('type: "ContrastiveLoss" contrastive_loss_param { margin: 1.5 legacy_version: %s }'
            % str(legacy).lower())
    (loss,) = run_layer(make_layer(text, dtype=dtype), make_blobs([a, b, y], dtype),
                        make_blobs(1, dtype))
    np.testing.assert_allclose(loss, contrastive_ref(a, b, y, 1.5, legacy), rtol=1e-5)


@pytest.mark.parametrize("legacy", [False, True])
def test_contrastive_gradient(legacy):
    a, b, y = contrastive_case(3)
    text = ('type: "ContrastiveLoss" contrastive_loss_param { margin: 1.5 legacy_version: %s }'
            % str(legacy).lower())
    # Caffe divides by (d + 1e-4) in the non-legacy gradient: allow for that approximation.
    check_layer_gradient(make_layer(text), make_blobs([a, b, y]), make_blobs(1), check_bottom=[0, 1],
                         threshold=1e-3)


# -- SmoothL1Loss -------------------------------------------------------------------------------
def smooth_l1_ref(a, b, sigma=1.0, w_in=1.0, w_out=1.0):
    d = w_in * (a - b)
    s2 = sigma * sigma
    f = np.where(np.abs(d) < 1 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2)
    return np.sum(w_out * f) / a.shape[0]


def smooth_l1_case(seed=4):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((3, 4, 2)) * 1.5, rng.standard_normal((3, 4, 2))
    w_in, w_out = rng.uniform(0, 2, a.shape), rng.uniform(0, 2, a.shape)
    return a, b, w_in, w_out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_smooth_l1_forward(dtype):
    a, b, w_in, w_out = smooth_l1_case()
    (loss,) = run_layer(make_layer('type: "SmoothL1Loss"', dtype=dtype), make_blobs([a, b], dtype),
                        make_blobs(1, dtype))
    np.testing.assert_allclose(loss, smooth_l1_ref(a, b), rtol=1e-5)
    (loss,) = run_layer(make_layer('type: "SmoothL1Loss"', dtype=dtype),
                        make_blobs([a, b, w_in, w_out], dtype), make_blobs(1, dtype))
    np.testing.assert_allclose(loss, smooth_l1_ref(a, b, 1.0, w_in, w_out), rtol=1e-5)


def test_smooth_l1_gradient_with_weights():
    layer = make_layer('type: "SmoothL1Loss"')
    check_layer_gradient(layer, make_blobs(list(smooth_l1_case(5))), make_blobs(1),
                         check_bottom=[0, 1])
    assert layer.allow_force_backward(1) and not layer.allow_force_backward(2)


@pytest.mark.skipif(not HAS_SMOOTH_L1_PARAM, reason="schema lacks smooth_l1_loss_param")
def test_smooth_l1_sigma():
    a, b, _, _ = smooth_l1_case(6)
    text = 'type: "SmoothL1Loss" smooth_l1_loss_param { sigma: 3 }'
    (loss,) = run_layer(make_layer(text), make_blobs([a, b]), make_blobs(1))
    np.testing.assert_allclose(loss, smooth_l1_ref(a, b, sigma=3.0), rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([a, b]), make_blobs(1), kink=1 / 9.0,
                         kink_range=1e-2)


def test_smooth_l1_needs_both_weights():
    a, b, w_in, _ = smooth_l1_case()
    with pytest.raises(CaffeError, match="inside and outside"):
        run_layer(make_layer('type: "SmoothL1Loss"'), make_blobs([a, b, w_in]), make_blobs(1))
