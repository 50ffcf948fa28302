import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.oracle import STRICT, check_layer
from tests.conftest import shared_path

LRN = 'type: "LRN" lrn_param { local_size: %d alpha: 0.5 beta: 0.75 k: 2 norm_region: %s }'


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lrn_across_channels_forward(dtype):
    x = np.random.default_rng(0).standard_normal((2, 7, 3, 3))
    (y,) = run_layer(make_layer(LRN % (5, "ACROSS_CHANNELS"), dtype=dtype), make_blobs([x], dtype),
                     make_blobs(1, dtype))
    ref = np.empty_like(x)
    for c in range(7):
        window = x[:, max(c - 2, 0):c + 3]
        ref[:, c] = x[:, c] * (2 + 0.5 / 5 * (window ** 2).sum(axis=1)) ** -0.75
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_lrn_within_channel_forward():
    x = np.random.default_rng(1).standard_normal((2, 2, 5, 4))
    (y,) = run_layer(make_layer(LRN % (3, "WITHIN_CHANNEL")), make_blobs([x]), make_blobs(1))
    xp = np.pad(x ** 2, [(0, 0), (0, 0), (1, 1), (1, 1)])
    avg = sum(xp[:, :, i:i + 5, j:j + 4] for i in range(3) for j in range(3)) / 9.0
    np.testing.assert_allclose(y, x * (1 + 0.5 * avg) ** -0.75, rtol=1e-10)


@pytest.mark.parametrize("size,region", [(3, "ACROSS_CHANNELS"), (5, "ACROSS_CHANNELS"),
                                         (3, "WITHIN_CHANNEL")])
def test_lrn_gradient(size, region):
    x = np.random.default_rng(2).standard_normal((2, 6, 4, 3))
    check_layer_gradient(make_layer(LRN % (size, region)), make_blobs([x]), make_blobs(1))


def test_lrn_rejects_even_size():
    layer = make_layer(LRN % (4, "ACROSS_CHANNELS"))
    with pytest.raises(NetError, match="odd"):
        layer.setup(make_blobs([np.zeros((1, 4, 2, 2))]), make_blobs(1))


@pytest.mark.parametrize("case", ["lrn_across", "lrn_within"])
def test_lrn_matches_caffe(case):
    check_layer(shared_path("caffe-reference", case), STRICT)


def _caffe_order(x, dy, size, alpha, beta, k):
    """Caffe's CPU LRN (ACROSS_CHANNELS) step by step in float32: the padded squares, the first
    channel's scale by axpy over its window, then copy + add head + subtract tail per channel;
    backward's padded ratios and the accumulated ratio slid the same way."""
    f = np.float32
    n, c = x.shape[:2]
    alpha, beta = f(alpha), f(beta)                 # the layer's float fields
    pre, aos = (size - 1) // 2, alpha / f(size)     # float / int in float, as Caffe
    sq = np.zeros((c + size - 1,) + x.shape[2:], f)
    scale, y, dx = (np.empty_like(x) for _ in range(3))
    for b in range(n):
        sq[pre:pre + c] = x[b] * x[b]
        scale[b, 0] = f(k)
        for j in range(size):
            scale[b, 0] = aos * sq[j] + scale[b, 0]
        for ci in range(1, c):
            scale[b, ci] = aos * sq[ci + size - 1] + scale[b, ci - 1]
            scale[b, ci] = -aos * sq[ci - 1] + scale[b, ci]
    y[...] = np.power(scale, f(-beta)) * x
    cr = f(2.0 * float(alpha) * float(beta) / size)    # in double, as Caffe
    ratio = np.zeros((c + size - 1,) + x.shape[2:], f)
    for b in range(n):
        dx[b] = dy[b] * np.power(scale[b], f(-beta))
        ratio[pre:pre + c] = dy[b] * y[b] / scale[b]
        acc = np.zeros(x.shape[2:], f)
        for j in range(size - 1):
            acc = f(1) * ratio[j] + acc
        for ci in range(c):
            acc = f(1) * ratio[ci + size - 1] + acc
            dx[b, ci] = -cr * (x[b, ci] * acc) + dx[b, ci]
            acc = f(-1) * ratio[ci] + acc
    return y, dx


@pytest.mark.parametrize("shape,size", [((2, 7, 3, 5), 5), ((1, 9, 4, 4), 3), ((2, 3, 2, 3), 7),
                                        ((1, 2, 40, 30), 5)])     # the last: 3 kernel blocks
@pytest.mark.parametrize("fast", [True, False])
def test_lrn_across_channels_in_caffes_order_bit_for_bit(shape, size, fast):
    """The window sums slide over the channels as Caffe's CPU layer does (the numba kernels and
    the numpy fallback alike): top and bottom diff equal its float32 operations exactly."""
    from caffepy.math import kernels
    import contextlib
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    text = 'type: "LRN" lrn_param { local_size: %d alpha: 0.3 beta: 0.75 k: 1.5 }' % size
    layer = make_layer(text, dtype=np.float32)
    bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
    with contextlib.nullcontext() if fast else kernels.disabled():
        layer.setup(bottom, top)
        layer.forward(bottom, top)
        top[0].diff[...] = dy
        layer.backward(top, [True], bottom)
    want_y, want_dx = _caffe_order(x, dy, size, 0.3, 0.75, 1.5)
    assert top[0].data.tobytes() == want_y.tobytes()
    assert bottom[0].diff.tobytes() == want_dx.tobytes()
