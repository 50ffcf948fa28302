"""Eltwise MAX's branch-free select (caffepy.layers.eltwise.select) against numpy's where and
eltwise_layer.cpp's MAX, bit for bit: ties, signed zeros, NaN and infinities in the bottoms."""
import numpy as np
import pytest

from caffepy.layers.eltwise import select
from caffepy.testing import make_blobs, make_layer


def bottoms(k, dtype, seed):
    rng = np.random.default_rng(seed)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype)
    out = []
    for _ in range(k):
        x = rng.standard_normal((3, 4, 5, 6)).astype(dtype)
        pick = rng.random(x.shape) < 0.3
        x[pick] = specials[rng.integers(0, len(specials), x.shape)[pick]]
        out.append(x)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_select_is_where_bit_for_bit(dtype):
    a, b = bottoms(2, dtype, 1)
    cond = a > b
    assert select(cond, a, b).tobytes() == np.where(cond, a, b).tobytes()
    assert select(cond, a).tobytes() == np.where(cond, a, dtype(0)).tobytes()
    assert select(cond, a.astype(np.float64), b).dtype == np.float64      # mixed: numpy's where


@pytest.mark.parametrize("k", [2, 3, 4])
def test_eltwise_max_writes_caffes_top_mask_and_gradients(k):
    """eltwise_layer.cpp: top = b0 > b1 ? b0 : b1 (mask 0 / 1), then each bottom j > top takes
    it (mask j); bottom i's diff = 0 + dy where mask == i, else 0."""
    xs = bottoms(k, np.float32, k)
    layer = make_layer('type: "Eltwise" eltwise_param { operation: MAX }', dtype=np.float32)
    blobs, top = make_blobs(xs, dtype=np.float32), make_blobs(1, dtype=np.float32)
    layer.setup(blobs, top)
    layer.reshape(blobs, top)
    layer.forward(blobs, top)
    want = np.empty_like(xs[0])
    mask = np.empty(xs[0].shape, np.int32)
    for idx in np.ndindex(*want.shape):
        a, b = xs[0][idx], xs[1][idx]
        want[idx], mask[idx] = (a, 0) if a > b else (b, 1)
        for j in range(2, k):
            if xs[j][idx] > want[idx]:
                want[idx], mask[idx] = xs[j][idx], j
    assert top[0].data.tobytes() == want.tobytes()
    assert np.array_equal(layer.mask, mask)
    dy = np.random.default_rng(9).standard_normal(want.shape).astype(np.float32)
    dy[0, 0, 0, :2] = -0.0
    top[0].diff[...] = dy
    layer.backward(top, [True] * k, blobs)
    for i, b in enumerate(blobs):
        grad = np.where(mask == i, np.float32(0) + dy, np.float32(0))
        assert b.diff.tobytes() == grad.tobytes()
