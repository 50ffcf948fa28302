import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _top_k_ref(x, scores, k_rows):
    """A transcription of the fork's GPU forward (distinct scores)."""
    n = x.shape[0]
    s = scores.reshape(scores.shape[0], -1)
    buf = [s[i, 0] if s.shape[1] == 1 else max([0.0] + list(s[i, 1:])) for i in range(len(s))]
    ids = sorted(range(n), key=lambda i: -buf[i])
    k = min(k_rows, n)
    ids[:k] = sorted(ids[:k])
    return x[ids[:k]], ids


@pytest.mark.parametrize("cols", [1, 3])
def test_top_k_keeps_the_best_scored_rows_in_index_order(cols):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 3))
    scores = rng.permutation(np.linspace(-0.5, 2, 5 * cols)).reshape(5, cols)
    count = np.zeros((3, 4))
    bottoms = [x, scores, count]
    y, ids = run_layer(make_layer('type: "TopK"'), make_blobs(bottoms), make_blobs(2))
    want, want_ids = _top_k_ref(x, scores, 3)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(ids.reshape(-1), want_ids[:3])
    check_layer_gradient(make_layer('type: "TopK"'), make_blobs(bottoms), make_blobs(1),
                         check_bottom=[0])


def test_top_k_refuses_a_count_past_the_rows_with_the_ids_top():
    b = make_blobs([np.zeros((2, 3)), np.zeros((2, 1)), np.zeros((4,))])
    with pytest.raises(CaffeError, match="unset ids"):
        run_layer(make_layer('type: "TopK"'), b, make_blobs(2))
    y, = run_layer(make_layer('type: "TopK"'), b, make_blobs(1))
    assert y.shape == (2, 3)


def test_normalized_sigmoid_cross_entropy_divides_by_n_h_w():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)) * 3
    t = (rng.random((2, 3, 4, 5)) > 0.5).astype(float)
    text = 'type: "NormalizedSigmoidCrossEntropyLoss"'
    loss, = run_layer(make_layer(text), make_blobs([x, t]), make_blobs(1))
    p = 1 / (1 + np.exp(-x))
    want = -np.sum(t * np.log(p) + (1 - t) * np.log(1 - p)) / (2 * 4 * 5)
    np.testing.assert_allclose(loss, want, rtol=1e-10)
    check_layer_gradient(make_layer(text), make_blobs([x, t]), make_blobs(1), check_bottom=[0])


def _windows_ref(x, wh, ww):
    """A transcription of the fork's forward kernel."""
    _, c, h, w = x.shape
    out = np.zeros(((h + 1) * (w + 1), c, wh, ww))
    for n in range(out.shape[0]):
        oh, ow = n // (w + 1), n % (w + 1)
        for ch in range(c):
            for i in range(-wh // 2, wh // 2):
                for j in range(-ww // 2, ww // 2):
                    if 0 <= oh + i < h and 0 <= ow + j < w:
                        out[n, ch, i + wh // 2, j + ww // 2] = x[0, ch, oh + i, ow + j]
    return out


def test_sliding_window_takes_a_window_at_every_position():
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4))
    text = 'type: "SlidingWindow" sliding_window_param { window_h: 2 window_w: 4 stride_h: 3 }'
    y, = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, _windows_ref(x, 2, 4))
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    with pytest.raises(CaffeError, match="even"):
        run_layer(make_layer('type: "SlidingWindow" sliding_window_param { window_h: 3 '
                             'window_w: 2 }'), make_blobs([x]), make_blobs(1))


def test_flags_to_indices_lists_the_set_flags():
    flags = np.array([0, 1, 1, 0, 1, 0], dtype=float).reshape(1, 1, 1, 6)
    y, = run_layer(make_layer('type: "FlagsToIndices"'), make_blobs([flags]), make_blobs(1))
    np.testing.assert_array_equal(y.reshape(-1), [1, 2, 4])
    assert y.shape == (3, 1, 1, 1)
    flags[0, 0, 0, 0] = 2
    with pytest.raises(CaffeError, match="0 or 1"):
        run_layer(make_layer('type: "FlagsToIndices"'), make_blobs([flags]), make_blobs(1))


def test_arg_max_my_counts_top_k_from_objectness():
    rng = np.random.default_rng(5)
    x = rng.permutation(12).astype(float).reshape(2, 6)
    noobj = np.full((1, 1, 1, 5), 4.5)
    k = int(np.sum(x.reshape(-1)[:5] > 4.5))
    text = 'type: "ArgMaxMy" argmax_param { top_k: 1 out_max_val: true }'
    y, = run_layer(make_layer(text), make_blobs([x, noobj]), make_blobs(1))
    assert y.shape == (2, 2, k)
    order = np.argsort(-x, axis=1)[:, :k]
    np.testing.assert_array_equal(y[:, 0], order)
    np.testing.assert_array_equal(y[:, 1], np.take_along_axis(x, order, 1))
