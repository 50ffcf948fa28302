import contextlib
import itertools
import math

import numpy as np
import pytest

import caffepy
from caffepy.errors import NetError
from caffepy.math import kernels
from caffepy.layers.pooling import pooled_size
from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.testing.oracle import STRICT, check_layer
from tests.conftest import shared_path

POOL = 'type: "Pooling" pooling_param { pool: %s %s }'


def naive_pool(x, method, k, s, p, ceil=True):
    """Caffe's pooling loops, written out for small shapes."""
    n, c, h, w = x.shape
    ph, pw = pooled_size(h, k, s, p, ceil), pooled_size(w, k, s, p, ceil)
    y = np.zeros((n, c, ph, pw))
    for i in range(ph):
        for j in range(pw):
            hs, ws = i * s - p, j * s - p
            he, we = min(hs + k, h + p), min(ws + k, w + p)
            size = (he - hs) * (we - ws)
            win = x[:, :, max(hs, 0):min(he, h), max(ws, 0):min(we, w)]
            y[:, :, i, j] = win.max(axis=(2, 3)) if method == "MAX" else win.sum(axis=(2, 3)) / size
    return y


def test_pooled_size_rules():
    assert pooled_size(7, 3, 2, 0) == 3           # ceil((7-3)/2)+1
    assert pooled_size(6, 3, 2, 0) == 3           # ceil(1.5)+1
    assert pooled_size(6, 3, 2, 0, ceil=False) == 2
    assert pooled_size(5, 2, 2, 1) == 3           # ceil(5/2)+1 = 4, clipped: 3*2 >= 5+1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["MAX", "AVE"])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 0), (3, 2, 1), (3, 1, 1), (2, 3, 1)])
def test_pooling_forward_matches_naive(dtype, method, k, s, p):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6))
    fields = "kernel_size: %d stride: %d pad: %d" % (k, s, p)
    (y,) = run_layer(make_layer(POOL % (method, fields), dtype=dtype), make_blobs([x], dtype),
                     make_blobs(1, dtype))
    np.testing.assert_allclose(y, naive_pool(x, method, k, s, p), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fields", ["ceil_mode: false", "round_mode: FLOOR",
                                    "torch_pooling: true"])
def test_pooling_floor_mode(fields):
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 6))
    (y,) = run_layer(make_layer(POOL % ("MAX", "kernel_size: 3 stride: 2 " + fields)),
                     make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, naive_pool(x, "MAX", 3, 2, 0, ceil=False))


def test_pooling_rectangular_and_global():
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 6))
    (y,) = run_layer(make_layer(POOL % ("AVE", "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1")),
                     make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 3, 3, 5)
    np.testing.assert_allclose(y[:, :, 1, 2], x[:, :, 2:5, 2:4].mean(axis=(2, 3)))
    (y,) = run_layer(make_layer(POOL % ("MAX", "global_pooling: true")), make_blobs([x]),
                     make_blobs(1))
    np.testing.assert_allclose(y[:, :, 0, 0], x.max(axis=(2, 3)))


def test_max_pooling_mask_top():
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 5))
    y, mask = run_layer(make_layer(POOL % ("MAX", "kernel_size: 3 stride: 2 pad: 1")),
                        make_blobs([x]), make_blobs(2))
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, mask.reshape(2, 3, -1).astype(int), 2),
                                  y.reshape(2, 3, -1))


@pytest.mark.parametrize("method,fields", [
    ("MAX", "kernel_size: 3 stride: 2 pad: 1"), ("MAX", "kernel_size: 2 stride: 2"),
    ("AVE", "kernel_size: 3 stride: 2 pad: 1"), ("AVE", "kernel_h: 2 kernel_w: 3 stride: 1"),
    ("AVE", "global_pooling: true"), ("STOCHASTIC", "kernel_size: 3 stride: 2"),
])
def test_pooling_gradient(method, fields):
    rng = np.random.default_rng(4)
    x = rng.permutation(2 * 2 * 5 * 6).reshape(2, 2, 5, 6) / 10.0 + 0.1  # distinct: no MAX ties
    check_layer_gradient(make_layer(POOL % (method, fields)), make_blobs([x]), make_blobs(1),
                         stepsize=1e-3)


def test_stochastic_pooling_train_samples_window_elements():
    x = np.random.default_rng(5).random((2, 3, 6, 6))
    layer = make_layer(POOL % ("STOCHASTIC", "kernel_size: 2 stride: 2"), phase=caffe_pb2.TRAIN)
    caffepy.set_random_seed(3)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    windows = x.reshape(2, 3, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 3, 3, 4)
    assert np.all(np.any(np.abs(windows - y[..., None]) == 0, axis=-1))
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    # TEST: the probability-weighted average
    layer = make_layer(POOL % ("STOCHASTIC", "kernel_size: 2 stride: 2"))
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(y, (windows ** 2).sum(-1) / windows.sum(-1), rtol=1e-6)


@pytest.mark.parametrize("fields,match", [
    ("global_pooling: true kernel_size: 2", "cannot be specified"),
    ("kernel_size: 2 pad: 2", "smaller than the kernel"),
    ("stride: 2", "kernel_size"),
])
def test_pooling_errors(fields, match):
    layer = make_layer(POOL % ("MAX", fields))
    with pytest.raises(NetError, match=match):
        layer.setup(make_blobs([np.zeros((1, 1, 4, 4))]), make_blobs(1))


@pytest.mark.parametrize("method", ["MAX", "AVE"])
def test_spp_forward_and_gradient(method):
    x = np.random.default_rng(6).permutation(2 * 2 * 9 * 7).reshape(2, 2, 9, 7) / 10.0
    layer = make_layer('type: "SPP" spp_param { pyramid_height: 3 pool: %s }' % method)
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    assert y.shape == (2, 2 * (1 + 4 + 16))
    top = x.max(axis=(2, 3)) if method == "MAX" else None
    if top is not None:
        np.testing.assert_allclose(y[:, :2], top)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_spp_rejects_too_small_input():
    layer = make_layer('type: "SPP" spp_param { pyramid_height: 3 }')
    with pytest.raises(NetError, match="too small"):
        layer.setup(make_blobs([np.ones((1, 1, 5, 5))]), make_blobs(1))


def test_spp_height_one_keeps_4d_top():
    layer = make_layer('type: "SPP" spp_param { pyramid_height: 1 }')
    (y,) = run_layer(layer, make_blobs([np.ones((2, 3, 4, 5))]), make_blobs(1))
    assert y.shape == (2, 3, 1, 1)


@pytest.mark.parametrize("case", ["pool_max", "pool_max_pad", "pool_ave", "pool_ave_pad",
                                  "pool_global", "pool_global_max", "pool_max_2tops", "spp"])
def test_pooling_matches_caffe(case):
    check_layer(shared_path("caffe-reference", case), STRICT)


def direct_pool(x, method, kernel, stride, pad, ceil=True):
    """PoolingLayer::Reshape and Forward_cpu written out: the size by C's ceil / floor of the
    float ratio, the last-window check on both axes when either is padded; (y, dx of dy = 1 per
    output) with MAX routing to the first maximum, AVE dividing by the window clipped to H + pad."""
    rnd = math.ceil if ceil else math.floor
    out = [int(rnd((s + 2 * p - k) / st)) + 1
           for s, k, st, p in zip(x.shape[2:], kernel, stride, pad)]
    if any(pad):
        out = [o - 1 if (o - 1) * st >= s + p else o
               for o, s, st, p in zip(out, x.shape[2:], stride, pad)]
    y = np.zeros(x.shape[:2] + tuple(out))
    dx = np.zeros_like(x)
    (h, w), (kh, kw), (sh, sw), (ph, pw) = x.shape[2:], kernel, stride, pad
    for n, c, i, j in itertools.product(*map(range, x.shape[:2] + tuple(out))):
        hs, ws = i * sh - ph, j * sw - pw
        he, we = min(hs + kh, h + ph), min(ws + kw, w + pw)
        size = (he - hs) * (we - ws)
        hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
        win = x[n, c, hs:he, ws:we]
        if method == "MAX":
            a, b = np.unravel_index(np.argmax(win), win.shape)
            y[n, c, i, j] = win[a, b]
            dx[n, c, hs + a, ws + b] += 1
        else:
            y[n, c, i, j] = win.sum() / size
            dx[n, c, hs:he, ws:we] += 1.0 / size
    return y, dx


# windows past the (padded) input: ceil((S + 2 pad - k) / stride) of a ratio in (-1, 0) is 0
# (one output; floor gives none); (2, 3, 5, 5) with stride 3 > kernel 1 on the unpadded axis:
# BVLC's last-window check runs there too because the other axis is padded
PAST = [
    ("kernel_size: 3 stride: 2", (3, 3), (2, 2), (0, 0), (2, 3, 2, 2)),
    ("kernel_h: 4 kernel_w: 3 stride_h: 3 stride_w: 2 pad_h: 1 pad_w: 0", (4, 3), (3, 2),
     (1, 0), (2, 2, 1, 4)),
    ("kernel_h: 5 kernel_w: 2 stride: 2 pad_h: 1 pad_w: 1", (5, 2), (2, 2), (1, 1), (1, 2, 2, 3)),
    ("kernel_h: 1 kernel_w: 2 stride: 3 pad_h: 0 pad_w: 1", (1, 2), (3, 3), (0, 1), (2, 3, 5, 5)),
]


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("method", ["MAX", "AVE"])
@pytest.mark.parametrize("fields,kernel,stride,pad,shape", PAST)
def test_pooling_past_the_input_matches_direct_loops(fields, kernel, stride, pad, shape, method,
                                                     numba):
    rng = np.random.default_rng(6)
    x = rng.permutation(int(np.prod(shape))).reshape(shape) / 10.0 - 1.0
    want, dx = direct_pool(x, method, kernel, stride, pad)
    with contextlib.ExitStack() as stack:
        if not numba:
            stack.enter_context(kernels.disabled())
        bottom, top = make_blobs([x]), make_blobs(1)
        layer = make_layer(POOL % (method, fields))
        layer.setup(bottom, top)
        layer.forward(bottom, top)
        np.testing.assert_allclose(top[0].data, want, atol=1e-12)
        top[0].diff[...] = 1.0
        layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, dx, atol=1e-12)
    check_layer_gradient(make_layer(POOL % (method, fields)), make_blobs([x]), make_blobs(1),
                         stepsize=1e-3)


def test_pooling_floor_rounding_past_the_input_is_empty():
    x = np.zeros((1, 1, 2, 2))
    layer = make_layer(POOL % ("MAX", "kernel_size: 3 stride: 2 round_mode: FLOOR"))
    with pytest.raises(NetError, match="empty"):
        layer.setup(make_blobs([x]), make_blobs(1))
    (y,) = run_layer(make_layer(POOL % ("MAX", "kernel_size: 3 stride: 2")), make_blobs([x + 2]),
                     make_blobs(1))
    assert y.shape == (1, 1, 1, 1) and y[0, 0, 0, 0] == 2


ROWS = [((3, 3), (1, 1), (1, 1), (9, 11)), ((3, 3), (2, 2), (0, 0), (32, 32)),
        ((2, 2), (2, 2), (0, 0), (28, 29)), ((3, 2), (2, 3), (1, 1), (17, 23)),
        ((5, 5), (3, 3), (2, 2), (20, 19)), ((1, 3), (1, 1), (0, 1), (4, 16)),
        ((7, 7), (1, 1), (0, 0), (7, 7)), ((4, 3), (3, 2), (1, 0), (1, 4))]


@pytest.mark.skipif(kernels.get() is None, reason="numba not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride,pad,hw", ROWS)
def test_ave_pool_rows_kernels_give_caffes_sums_bit_for_bit(kernel, stride, pad, hw, dtype):
    """The whole-row AVE kernels against the numpy forms of Caffe's float order (one add per
    window position in its order, forward and backward), for any window and stride; values of
    mixed magnitude so that another order would round differently, and an inf and a NaN."""
    from caffepy.layers.pooling import PoolGeometry, ave_pool, ave_pool_backward
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 3) + hw) * 10.0 ** rng.integers(-3, 4, (2, 3) + hw)).astype(dtype)
    x[0, 0, 0, 0], x[1, 2, -1, -1] = np.inf, np.nan
    g = PoolGeometry(hw, kernel, stride, pad)
    div = np.ascontiguousarray(g.pool_size().astype(dtype))
    k = kernels.get()
    y = np.empty((6,) + g.out_hw, dtype)
    k.ave_pool_rows(x.reshape((6,) + hw), *(kernel + stride + pad), div, dtype(0), y)
    np.testing.assert_array_equal(y.reshape((2, 3) + g.out_hw), ave_pool(x, g))
    dy = (rng.standard_normal((2, 3) + g.out_hw) * 100.0).astype(dtype)
    dx = np.full((6,) + hw, np.nan, dtype)
    k.ave_pool_rows_backward(dy.reshape(y.shape), *(kernel + stride + pad), div, dx)
    np.testing.assert_array_equal(dx.reshape(x.shape), ave_pool_backward(dy, g))


def _numba_and_numpy(method, fields, x, tops, dy_of):
    """One forward + backward of a Pooling layer with the numba kernels, then without: for each,
    the tops' data and the bottom's diff (the top's diff set to ``dy_of(shape)``)."""
    results = []
    for numba in (True, False):
        with contextlib.ExitStack() as stack:
            if not numba:
                stack.enter_context(kernels.disabled())
            bottom, top = make_blobs([x]), make_blobs(tops)
            layer = make_layer(POOL % (method, fields))
            layer.setup(bottom, top)
            layer.forward(bottom, top)
            top[0].diff[...] = dy_of(top[0].shape)
            layer.backward(top, [True], bottom)
            results.append([t.data.copy() for t in top] + [bottom[0].diff.copy()])
    return results


@pytest.mark.skipif(kernels.get() is None, reason="numba not installed")
@pytest.mark.parametrize("fields,hw,rows", [("kernel_size: 3 stride: 1 pad: 1", (35, 35), True),
                                            ("kernel_size: 2 stride: 2", (28, 28), True),
                                            ("kernel_size: 3 stride: 2", (16, 16), False)])
def test_ave_pooling_layer_takes_the_row_kernels_from_wide_rows(fields, hw, rows):
    x = np.random.default_rng(2).standard_normal((2, 4) + hw).astype(np.float32)
    layer = make_layer(POOL % ("AVE", fields))
    layer.setup(make_blobs([x]), make_blobs(1))
    assert layer._rows() == rows
    with_numba, without = _numba_and_numpy(
        "AVE", fields, x, 1,
        lambda shape: np.random.default_rng(3).standard_normal(shape).astype(np.float32))
    for got, want in zip(with_numba, without):
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(kernels.get() is None, reason="numba not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw,pad", [((32, 32), 0), ((33, 31), 1), ((17, 40), 2), ((5, 6), 1),
                                    ((3, 3), 0), ((4, 2), 0)])
def test_max_pool_3x3_s2_from_column_phases_gives_the_window_scan(hw, pad, dtype):
    """The even / odd column kernel against the per-window one: the same maxima and arg codes
    (Caffe's first maximum from the lowest value: a NaN never taken, ties to the first, a plane
    of NaN gives the lowest value and code 0)."""
    from caffepy.layers.pooling import PoolGeometry
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6,) + hw).astype(dtype)
    x[0, 0, :3], x[1, 0, 0], x[2], x[3, -1, -1], x[4] = np.nan, np.inf, 1.0, -np.inf, np.nan
    x[5] = np.round(x[5])                               # ties
    g = PoolGeometry(hw, (3, 3), (2, 2), (pad, pad))
    lowest = dtype(-np.finfo(dtype).max)
    k = kernels.get()
    want_y, want_a = np.empty((6,) + g.out_hw, dtype), np.empty((6,) + g.out_hw, np.uint8)
    y, a = np.empty_like(want_y), np.empty_like(want_a)
    k.max_pool_3x3_s2(x, pad, pad, lowest, want_y, want_a)
    k.max_pool_3x3_s2_phases(x, pad, pad, lowest, y, a)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(a, want_a)


@pytest.mark.skipif(kernels.get() is None, reason="numba not installed")
def test_max_pooling_layer_on_wide_rows_matches_the_numpy_path():
    from caffepy.layers import pooling
    x = np.random.default_rng(8).standard_normal((2, 3, 33, 34))
    assert pooling.PoolGeometry((33, 34), (3, 3), (2, 2), (0, 0)).out_hw[1] >= \
        pooling.PHASES_MIN_WIDTH
    with_numba, without = _numba_and_numpy(
        "MAX", "kernel_size: 3 stride: 2", x, 2,
        lambda shape: np.arange(int(np.prod(shape))).reshape(shape))
    for got, want in zip(with_numba, without):
        np.testing.assert_array_equal(got, want)
