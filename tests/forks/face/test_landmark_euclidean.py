import numpy as np
import pytest

from caffepy.forks.face.landmark_euclidean import landmark_weights
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

from ..nets import forward, train_step


def _rows(seed=0, n=2):
    rng = np.random.default_rng(seed)
    return rng.random((n, 136)), rng.random((n, 136))


def test_weights_by_landmark_group():
    w = landmark_weights(2.0, 3.0, 5.0)
    assert w.shape == (136,)
    np.testing.assert_array_equal(w[:68], w[68:])
    assert w[0] == w[16] == 2.0 and w[18] == w[67] == 3.0
    assert [i for i in range(68) if w[i] == 5.0] == sorted(
        i - 1 for i in (18, 22, 23, 27, 37, 40, 43, 46, 28, 32, 36, 49, 55))
    w = landmark_weights(1.0, 0.0, 0.0)
    assert w[:17].tolist() == [1.0] * 17 and not w[17:68].any()


def test_forward_unnormalised_and_normalised():
    a, t = _rows()
    text = ('type: "WeightEuclideanLoss" weight_euclidean_loss_param { main_weight: 1 '
            'contour_weight: 0.5 coarse_weight: 2 normalized: %d normalized_type: %d }')
    w = landmark_weights(0.5, 1.0, 2.0)
    (loss,) = run_layer(make_layer(text % (0, 0)), make_blobs([a, t]), make_blobs(1))
    assert loss.item() == pytest.approx(np.sum(w * (a - t) ** 2) / 2 / 2)
    (loss,) = run_layer(make_layer(text % (1, 0)), make_blobs([a, t]), make_blobs(1))
    d = np.hypot(t[:, 36] - t[:, 42], t[:, 68 + 39] - t[:, 68 + 45])
    assert loss.item() == pytest.approx(np.sum(w * (a - t) ** 2 / d[:, None]) / 2 / 2)
    (loss,) = run_layer(make_layer(text % (1, 1)), make_blobs([a, t]), make_blobs(1))
    box = np.hypot(np.minimum(t[:, :68].min(1), 1) - np.maximum(t[:, :68].max(1), 0),
                   np.minimum(t[:, 68:].min(1), 1) - np.maximum(t[:, 68:].max(1), 0))
    assert loss.item() == pytest.approx(np.sum(w * (a - t) ** 2 / box[:, None]) / 2 / 2)


def test_gradient():
    a, t = _rows(1)
    check_layer_gradient(make_layer('type: "WeightEuclideanLoss" loss_weight: 2 '
                                    'weight_euclidean_loss_param { coarse_weight: 3 }'),
                         make_blobs([a, t]), make_blobs(1), check_bottom=[0, 1])
    # normalised: exact for the prediction (the scale comes from the ground truth)
    check_layer_gradient(make_layer('type: "WeightEuclideanLoss" '
                                    'weight_euclidean_loss_param { normalized: 1 }'),
                         make_blobs([a, t]), make_blobs(1), check_bottom=[0])


def test_needs_68_landmarks():
    with pytest.raises(Exception, match="136 values"):
        run_layer(make_layer('type: "WeightEuclideanLoss"'),
                  make_blobs([np.zeros((2, 10)), np.zeros((2, 10))]), make_blobs(1))


NET = '''
layer { name: "data" type: "Input" top: "data" top: "landmark"
        input_param { shape { dim: 2 dim: 8 } shape { dim: 2 dim: 136 } } }
layer { name: "fc2" type: "InnerProduct" bottom: "data" top: "fc2"
        inner_product_param { num_output: 136 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "WeightEuclideanLoss" bottom: "fc2" bottom: "landmark" top: "loss"
        loss_weight: 1 weight_euclidean_loss_param { main_weight: 1 contour_weight: 1
        coarse_weight: 1 normalized: 0 } }
'''


def test_small_net():
    forward(NET)
    train_step(NET)
