import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_argmax_all_takes_k_from_the_attended_positions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 1, 1500))
    y = np.zeros_like(x)
    y.reshape(-1)[:] = 5.0
    y.reshape(-1)[:1200] = -5.0                  # 1200 positions with x > y: K = 1200
    text = 'type: "ArgMaxAll" argmax_param { top_k: 1000 axis: -1 }'
    (idx,) = run_layer(make_layer(text), make_blobs([x, y]), make_blobs(1))
    assert idx.shape == (1, 1, 1, 1200)
    np.testing.assert_array_equal(idx.reshape(-1), np.argsort(-x.reshape(-1))[:1200])
    y[...] = 5.0                                 # none: K = 1000
    x = np.round(x, 1)                           # ties: the larger index first
    (vi,) = run_layer(make_layer('type: "ArgMaxAll" argmax_param { out_max_val: true }'),
                      make_blobs([x, y]), make_blobs(1))
    assert vi.shape == (1, 2, 1000, 1)           # the bottom's axis count, as the fork
    pairs = sorted(zip(x.reshape(-1), range(x.size)), reverse=True)[:1000]
    np.testing.assert_array_equal(vi[0, 0, :, 0], [i for _, i in pairs])
    np.testing.assert_array_equal(vi[0, 1, :, 0], [v for v, _ in pairs])
    with pytest.raises(NetError, match="exceeds"):
        run_layer(make_layer(text), make_blobs([x[..., :10], y[..., :10]]), make_blobs(1))


def test_convert_split_and_check():
    idx = np.array([[[[4, 0, 2]]]], dtype=float)
    vals = np.arange(6.0).reshape(1, 1, 1, 6) * 10
    flags, picked = run_layer(make_layer('type: "ConvertIndices"'), make_blobs([idx, vals]),
                              make_blobs(2))
    np.testing.assert_array_equal(flags.reshape(-1), [1, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(picked.reshape(-1), [40, 0, 20])
    assert picked.shape == (3, 1, 1, 1)
    parts = run_layer(make_layer('type: "SplitIndices"'),
                      make_blobs([flags, np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 1, 4))]),
                      make_blobs(2))
    np.testing.assert_array_equal(parts[0].reshape(-1), [1, 0])
    np.testing.assert_array_equal(parts[1].reshape(-1), [1, 0, 1, 0])
    obj, no = np.full((1, 1, 1, 3), 0.2), np.full((1, 1, 1, 3), 0.8)
    a, b = run_layer(make_layer('type: "CheckAtt"'), make_blobs([obj, no]), make_blobs(2))
    np.testing.assert_allclose(a.reshape(-1), [0.51, 0.2, 0.2])
    np.testing.assert_allclose(b.reshape(-1), [0.49, 0.8, 0.8])
    a, _ = run_layer(make_layer('type: "CheckAtt"'), make_blobs([no, obj]), make_blobs(2))
    np.testing.assert_array_equal(a, no)
    with pytest.raises(NetError, match="outside"):
        run_layer(make_layer('type: "ConvertIndices"'), make_blobs([idx + 2, vals]),
                  make_blobs(2))


def test_tile_product_gradient():
    rng = np.random.default_rng(1)
    x, m = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 1, 4, 5))
    (y,) = run_layer(make_layer('type: "TileProduct"'), make_blobs([x, m]), make_blobs(1))
    np.testing.assert_allclose(y, x * m)
    check_layer_gradient(make_layer('type: "TileProduct"'), make_blobs([x, m]), make_blobs(1))


def _windows_ref(x, flags, wh, ww):
    """The fork's SlidingWindowIndexForward kernel, loop for loop."""
    c, h, w = x.shape[1:]
    rows = int(np.abs(flags).sum()) or 1
    out = np.zeros((rows, c, wh, ww))
    for n in range((h + 1) * (w + 1)):
        if flags[n] > 0:
            oh, ow = n // (w + 1), n % (w + 1)
            k = 0
            for i in range(n):
                k = int(k + flags[i])
            for ch in range(c):
                for a in range(-wh // 2, wh // 2):
                    for b in range(-ww // 2, ww // 2):
                        if 0 <= oh + a < h and 0 <= ow + b < w:
                            out[k, ch, a + wh // 2, b + ww // 2] = x[0, ch, oh + a, ow + b]
    return out


def test_sliding_window_index_matches_the_kernel_and_gradient():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 6))
    flags = np.zeros(6 * 7)
    flags[[0, 9, 20, 41]] = 1
    text = 'type: "SlidingWindowIndex" sliding_window_param { window_h: 4 window_w: 2 }'
    b = make_blobs([x, flags.reshape(1, 1, 1, -1)])
    (y,) = run_layer(make_layer(text), b, make_blobs(1))
    np.testing.assert_array_equal(y, _windows_ref(x, flags, 4, 2))
    check_layer_gradient(make_layer(text), b, make_blobs(1), check_bottom=[0])
    with pytest.raises(NetError, match="even"):
        run_layer(make_layer(text.replace("4", "3")), b, make_blobs(1))


def test_top_k_old_keeps_the_best_items_in_batch_order():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 2, 3))
    scores = np.array([[0.9, 0.1, 0.2], [0.2, 0.7, 0.1], [0.1, -0.3, -0.2],
                       [0.5, 0.3, 0.6], [0.0, 0.4, 0.0]])      # max over classes 1..: .2 .7 0 .6 .4
    text = 'type: "TopKOld"'
    b = make_blobs([x, scores, np.zeros((3, 1))])
    y, ids = run_layer(make_layer(text), b, make_blobs(2))
    np.testing.assert_array_equal(ids.reshape(-1), [1, 3, 4])
    np.testing.assert_array_equal(y, x[[1, 3, 4]])
    check_layer_gradient(make_layer(text), b, make_blobs(2), check_bottom=[0])
