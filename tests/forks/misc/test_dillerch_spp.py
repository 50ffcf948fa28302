import math

import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.forks.misc.dillerch_spp import PyramidShapeSPPLayer, PyramidTypeSPPLayer
from caffepy.layers.spp import SPPLayer
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

FLT_MAX = float(np.finfo(np.float32).max)


def _pool_ref(x, kh, kw, sh, sw, method):
    """BVLC PoolingLayer::Reshape / Forward_cpu / Backward_cpu with pad 0, as the fork's
    CreatePoolingParam sets it up (one plane): (y, dx of a dy of ones)."""
    h, w = x.shape
    oh = int(math.ceil((h - kh) / sh)) + 1
    ow = int(math.ceil((w - kw) / sw)) + 1
    y, dx = np.zeros((oh, ow)), np.zeros_like(x)
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * sh, j * sw
            he, we = min(hs + kh, h), min(ws + kw, w)
            if method == "MAX":
                best, at = -FLT_MAX, None
                for a in range(hs, he):
                    for b in range(ws, we):
                        if x[a, b] > best:
                            best, at = x[a, b], (a, b)
                y[i, j] = best
                dx[at] += 1
            else:
                y[i, j] = x[hs:he, ws:we].sum() / ((he - hs) * (we - ws))
                dx[hs:he, ws:we] += 1.0 / ((he - hs) * (we - ws))
    return y, dx


def _pyramid_type_ref(x, bins, method):
    """416c7a45's SPPLayer: per level kernel ceil(H / b), stride floor(H / b), Pooling, Flatten,
    Concat; the backward of a dy of ones summed over the levels (its Split)."""
    n, c, h, w = x.shape
    parts, dx = [], np.zeros_like(x)
    for b in bins:
        kh, kw = math.ceil(h / b), math.ceil(w / b)
        sh, sw = h // b, w // b
        level = []
        for i in range(n):
            planes = [_pool_ref(x[i, j], kh, kw, sh, sw, method) for j in range(c)]
            level.append(np.stack([p[0] for p in planes]).reshape(-1))
            dx[i] += np.stack([p[1] for p in planes])
        parts.append(np.stack(level))
    return np.concatenate(parts, axis=1), dx


@pytest.mark.parametrize("method", ["MAX", "AVE"])
@pytest.mark.parametrize("kind,height,bins,hw", [
    ("SPP_NET4", 0, (1, 2, 3, 4), (10, 10)), ("SPP_NET6", 0, (1, 2, 3, 6), (13, 11)),
    ("SPP_NET6", 0, (1, 2, 3, 6), (6, 7)), ("CUSTOM", 3, (1, 2, 4), (7, 9))])
def test_pyramid_type_matches_the_fork_pooling(method, kind, height, bins, hw):
    x = np.random.default_rng(0).standard_normal((2, 3) + hw)
    x[0, 0, :3, :3] = 1.0      # ties: the first maximum takes the gradient
    text = ('type: "SPP" spp_param { pyramid_type: %s pyramid_height: %d pool: %s }'
            % (kind, height, method))
    layer = make_layer(text)
    assert type(layer) is PyramidTypeSPPLayer
    bottom, top = make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    ref, dref = _pyramid_type_ref(x, bins, method)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, dref, rtol=1e-12)


def test_pyramid_type_sizes_of_the_fork_nets():
    # the census nets' conv5 (256 channels; 10, 13 and 6 pixels): b = 6 on 10 pixels is kernel
    # 2, stride 1, so 9 x 9 outputs
    for kind, side, size in [("SPP_NET6", 10, 95), ("SPP_NET4", 10, 39), ("SPP_NET6", 13, 50),
                             ("SPP_NET4", 13, 30), ("SPP_NET4", 6, 39), ("SPP_NET6", 6, 50)]:
        layer = make_layer('type: "SPP" spp_param { pool: MAX pyramid_type: %s }' % kind)
        (y,) = run_layer(layer, make_blobs([np.ones((1, 2, side, side))]), make_blobs(1))
        assert y.shape == (1, 2 * size)


@pytest.mark.parametrize("method", ["MAX", "AVE", "STOCHASTIC"])
def test_pyramid_type_gradient(method):
    x = np.random.default_rng(1).uniform(0.1, 1.0, (2, 2, 7, 6))
    layer = make_layer('type: "SPP" spp_param { pyramid_type: SPP_NET4 pool: %s }' % method)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


def test_pyramid_type_refusals():
    x = make_blobs([np.ones((1, 1, 5, 5))])
    with pytest.raises(CaffeError, match="at least 2"):
        run_layer(make_layer('type: "SPP" spp_param { pyramid_type: CUSTOM pyramid_height: 1 }'),
                  x, make_blobs(1))
    with pytest.raises(CaffeError, match="stride floor"):
        run_layer(make_layer('type: "SPP" spp_param { pyramid_type: SPP_NET6 }'), x,
                  make_blobs(1))
    with pytest.raises(CaffeError, match="MAX, AVE or STOCHASTIC"):
        run_layer(make_layer('type: "SPP" spp_param { pyramid_type: SPP_NET4 pool: AVE_EXC_PAD }'),
                  x, make_blobs(1))


def _pyramid_shape_ref(x, bins):
    """1ad2f210's SPPLayer::Forward_cpu / Backward_cpu (a dy of ones), in float32 as a float
    net computes its bins."""
    n, c, h, w = x.shape
    f = np.float32
    total = sum(b * b for b in bins)
    y = np.full((n, c, total), -FLT_MAX, dtype=x.dtype)
    mask = np.full((n, c, total), -1)
    dx = np.zeros(x.shape, dtype=x.dtype).reshape(n, c, -1)
    prev = 0
    for b in bins:
        bw, bh = f(w) / f(b), f(h) / f(b)
        for i in range(n):
            for j in range(c):
                for nbh in range(b):
                    for nbw in range(b):
                        ws = max(int(math.floor(f(nbw) * bw)), 0)
                        hs = max(int(math.floor(f(nbh) * bh)), 0)
                        we = min(int(math.ceil(f(nbw + 1) * bw)), w)
                        he = min(int(math.ceil(f(nbh + 1) * bh)), h)
                        t = prev + nbh * b + nbw
                        for a in range(hs, he):
                            for q in range(ws, we):
                                if x[i, j, a, q] > y[i, j, t]:
                                    y[i, j, t] = x[i, j, a, q]
                                    mask[i, j, t] = a * w + q
                        dx[i, j, mask[i, j, t]] += 1
        prev += b * b
    return y, dx.reshape(x.shape)


@pytest.mark.parametrize("bins,hw", [((1, 2, 3, 6), (13, 13)), ((1, 2, 3, 6), (7, 5)),
                                     ((3, 1, 4), (10, 6))])
def test_pyramid_shape_matches_the_fork_loops(bins, hw):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, (2, 3) + hw).astype(np.float32)   # many ties
    text = 'type: "SPP" spp_param { %s }' % " ".join("pyramid_shape: %d" % b for b in bins)
    layer = make_layer(text, dtype=np.float32)
    assert type(layer) is PyramidShapeSPPLayer
    bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
    (y,) = run_layer(layer, bottom, top)
    ref, dref = _pyramid_shape_ref(x, bins)
    assert y.shape == (2, 3, sum(b * b for b in bins))
    np.testing.assert_array_equal(y, ref)
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, dref)


def test_pyramid_shape_gradient_nan_and_refusals():
    x = np.random.default_rng(3).standard_normal((2, 2, 7, 5))
    layer = make_layer('type: "SPP" spp_param { pyramid_shape: 1 pyramid_shape: 2 '
                       'pyramid_shape: 3 }')
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))
    # a NaN never wins; a bin with nothing above -FLT_MAX gives -FLT_MAX and no gradient
    x = np.full((1, 1, 2, 2), -np.inf)
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 1, 1] = 3.0
    layer = make_layer('type: "SPP" spp_param { pyramid_shape: 1 pyramid_shape: 2 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    np.testing.assert_array_equal(y[0, 0], [3.0, -FLT_MAX, -FLT_MAX, -FLT_MAX, 3.0])
    top[0].diff[...] = 1.0
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff[0, 0], [[0, 0], [0, 2]])
    for text, words in [("pyramid_shape: 2 pyramid_shape: 0", "must be > 0"),
                        ("pyramid_shape: 2 pyramid_type: SPP_NET4", "give one")]:
        with pytest.raises(CaffeError, match=words):
            run_layer(make_layer('type: "SPP" spp_param { %s }' % text),
                      make_blobs([np.ones((1, 1, 4, 4))]), make_blobs(1))


def test_without_the_fork_fields_spp_is_bvlc():
    layer = make_layer('type: "SPP" spp_param { pyramid_height: 2 }')
    assert type(layer) is SPPLayer
    (y,) = run_layer(layer, make_blobs([np.ones((1, 2, 5, 5))]), make_blobs(1))
    assert y.shape == (1, 2 * (1 + 4))
