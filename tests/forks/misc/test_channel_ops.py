import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_slope_appends_row_and_column_coordinates():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    y, = run_layer(make_layer('type: "Slope"'), make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 5, 4, 5)
    np.testing.assert_array_equal(y[:, :3], x)
    for h in range(4):
        for w in range(5):
            assert y[1, 3, h, w] == h / 4 and y[1, 4, h, w] == w / 5
    check_layer_gradient(make_layer('type: "Slope"'), make_blobs([x]), make_blobs(1))


def test_my_tile_takes_the_count_from_the_second_bottom():
    rng = np.random.default_rng(1)
    x, ref = rng.standard_normal((2, 3, 2)), np.zeros((4, 7))
    text = 'type: "MyTile" my_tile_param { axis: 1 tiles: 1 }'
    y, = run_layer(make_layer(text), make_blobs([x, ref]), make_blobs(1))
    np.testing.assert_array_equal(y, np.tile(x, (1, 4, 1)))
    check_layer_gradient(make_layer(text), make_blobs([x, ref]), make_blobs(1), check_bottom=[0])
    with pytest.raises(CaffeError, match="tiles must be set"):
        run_layer(make_layer('type: "MyTile"'), make_blobs([x, ref]), make_blobs(1))


def _reduce_ref(x, k, op):
    n, c, h, w = x.shape
    g = c // k
    y = np.full((n, k, h, w), -np.finfo(np.float32).max) if op == "MAX" else np.zeros((n, k, h, w))
    for i in range(n):
        for ch in range(c):
            t = ch // g
            y[i, t] = np.maximum(y[i, t], x[i, ch]) if op == "MAX" else y[i, t] + x[i, ch]
    return y


@pytest.mark.parametrize("op", ["SUM", "MAX"])
def test_channel_reduce_matches_the_fork_loops(op):
    x = np.random.default_rng(2).standard_normal((2, 6, 3, 2))
    text = 'type: "ChannelReduce" channel_reduce_param { num_channels: 2 operation: %s }' % op
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, _reduce_ref(x, 2, op))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_channel_reduce_refuses_what_the_fork_refuses():
    x = np.zeros((1, 4, 2, 2))
    for k in (4, 3):
        text = 'type: "ChannelReduce" channel_reduce_param { num_channels: %d }' % k
        with pytest.raises(CaffeError, match="num_channels"):
            run_layer(make_layer(text), make_blobs([x]), make_blobs(1))


def test_linear_sum_picks_the_same_class_map_every_third_flagged_sample():
    rng = np.random.default_rng(3)
    n, h = 6, 3
    x = rng.standard_normal((n, h, 2, 2))
    w_other, w_same = rng.standard_normal((n, 1, 2, 2)), rng.standard_normal((n, 1, 2, 2))
    flag = np.array([1, 1, 1, 0, 1, 0], dtype=float).reshape(n, 1, 1, 1)
    bottoms = [x, w_other, w_same, flag]
    y, = run_layer(make_layer('type: "LinearSum"'), make_blobs(bottoms), make_blobs(1))
    assert y.shape == (n, h, 1, 1)
    for i in range(n):
        w = w_same[i] if flag[i, 0, 0, 0] == 1 and (i + 1) % 3 == 0 else w_other[i]
        np.testing.assert_allclose(y[i, :, 0, 0], x[i].reshape(h, -1) @ w.reshape(-1))
    check_layer_gradient(make_layer('type: "LinearSum"'), make_blobs(bottoms), make_blobs(1),
                         check_bottom=[0, 1, 2])
    two = make_blobs([x, w_other])
    y2, = run_layer(make_layer('type: "LinearSum"'), two, make_blobs(1))
    np.testing.assert_allclose(y2, np.einsum("nhm,nm->nh", x.reshape(n, h, -1),
                                             w_other.reshape(n, -1)))
    check_layer_gradient(make_layer('type: "LinearSum"'), make_blobs([x, w_other]), make_blobs(1))


def test_split_concat_concatenates_num_output_copies():
    x = np.random.default_rng(4).standard_normal((2, 3, 2))
    text = 'type: "SplitConcat" convolution_param { num_output: 3 } concat_param { axis: 2 }'
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, np.concatenate([x] * 3, axis=2))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


def test_matrix_prod_multiplies_matching_slices():
    rng = np.random.default_rng(5)
    b = rng.standard_normal((3, 4, 2))
    for a in (rng.standard_normal((3, 5, 4)), rng.standard_normal((1, 3, 4))):
        y, = run_layer(make_layer('type: "MatrixProd"'), make_blobs([a, b]), make_blobs(1))
        want = np.stack([a.reshape(3, -1, 4)[i] @ b[i] for i in range(3)]).reshape(y.shape)
        np.testing.assert_allclose(y, want)
        check_layer_gradient(make_layer('type: "MatrixProd"'), make_blobs([a, b]),
                             make_blobs(1))
