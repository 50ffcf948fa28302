import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RANK = ('type: "RankHardLoss" rank_param { neg_num: %d pair_size: 2 hard_ratio: %g '
        'rand_ratio: %g margin: %g }')


def test_rank_hard_loss_values():
    f = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    lab = np.array([0, 0, 1, 1])
    layer = make_layer(RANK % (2, 0.5, 0.5, 1.5))
    (loss,) = run_layer(layer, make_blobs([f, lab]), make_blobs(1))
    # anchor 0: d(0,1) = -1, d(0,j) = 0 for j = 2, 3: l1 = 0.5, l2 = 0.5 each
    # anchor 2: the same; cnt = (2 * 4 // 2) * 2 = 8
    assert float(loss) == pytest.approx(4 * (0.5 + 0.5) / 8)


def test_rank_hard_loss_gradient():
    rng = np.random.default_rng(5)
    f = rng.standard_normal((6, 3)) * 0.3
    lab = np.array([0, 0, 1, 1, 2, 2])
    layer = make_layer(RANK % (4, 0.5, 0.5, 2.0))
    check_layer_gradient(layer, make_blobs([f, lab]), make_blobs(1), check_bottom=[0])


def test_rank_hard_loss_mining_keeps_hard_and_random():
    rng = np.random.default_rng(6)
    f = rng.standard_normal((8, 4)) * 0.1
    lab = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    layer = make_layer(RANK % (2, 0.5, 0.5, 10.0))
    run_layer(layer, make_blobs([f, lab]), make_blobs(1))
    # 6 negatives per anchor, neg_num 2: one hard and one random kept
    assert list(layer.mask[::2].sum(1)) == [2, 2, 2, 2]


def test_norm_values_and_gradient():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 2, 2))
    (y,) = run_layer(make_layer('type: "Norm"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, x / (np.sqrt((x * x).sum(1, keepdims=True)) + 1e-6))
    check_layer_gradient(make_layer('type: "Norm"'), make_blobs([x]), make_blobs(1),
                         threshold=1e-3)
