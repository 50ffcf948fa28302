"""happynear/caffe-windows' Transformer, SubRegion, Pairwise, Gram, Cosine."""
import math

import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(8)


def _transformer_ref(u, theta):
    """transformer_layer.cpp's Reshape and Forward_cpu loops, index bug included."""
    n, c, h, w = u.shape
    hw = h * w
    tgt = [0.0] * (3 * hw + h * h + w)
    for i in range(h):
        for j in range(w):
            tgt[i * h + j] = i / h * 2 - 1
            tgt[i * h + j + hw] = j / w * 2 - 1
            tgt[i * h + j + 2 * hw] = 1
    out = np.zeros(u.shape)
    for b in range(n):
        t = theta[b]
        for i in range(h):
            for j in range(w):
                k = i * w + j
                s0 = t[0] * tgt[k] + t[1] * tgt[hw + k] + t[2] * tgt[2 * hw + k]
                s1 = t[3] * tgt[k] + t[4] * tgt[hw + k] + t[5] * tgt[2 * hw + k]
                x, y = s0 * h / 2 + h / 2, s1 * w / 2 + w / 2
                if 0 <= x <= h - 1 and 0 <= y <= w - 1:
                    for ch in range(c):
                        for xx in range(math.floor(x), math.ceil(x) + 1):
                            for yy in range(math.floor(y), math.ceil(y) + 1):
                                out[b, ch, i, j] += (u[b, ch, xx, yy] * (1 - abs(x - xx))
                                                     * (1 - abs(y - yy)))
    return out


@pytest.mark.parametrize("hw", [(5, 5), (4, 6), (6, 4)])
def test_transformer_matches_the_fork_loops_and_gradient(hw):
    u = RNG.standard_normal((2, 2) + hw)
    theta = np.array([[0.83, 0.11, 0.07, -0.09, 0.87, 0.13],    # no sample on a pixel centre
                      [1.07, 0.03, 0.13, 0.07, 0.61, -0.17]])
    (y,) = run_layer(make_layer('type: "Transformer"'), make_blobs([u, theta]), make_blobs(1))
    np.testing.assert_allclose(y, _transformer_ref(u, theta), rtol=1e-12, atol=1e-14)
    check_layer_gradient(make_layer('type: "Transformer"'), make_blobs([u, theta]),
                         make_blobs(1), stepsize=1e-5)


def _subregion_ref(x, pts, gt, rh, rw, dh, dw, as_dim):
    num, c, h, w = x.shape
    p = pts.shape[1] // 2
    top = (np.zeros((num * p, c, rh, rw)) if as_dim == 0 else np.zeros((num, c * p, rh, rw)))
    t1, t2 = np.zeros(pts.shape), np.zeros(pts.shape)
    for n in range(num):
        for i in range(p):
            cx = (pts[n, 2 * i] / dw + 0.5) * w
            cy = (pts[n, 2 * i + 1] / dh + 0.5) * h
            x0, y0 = math.floor(cx - rw // 2), math.floor(cy - rh // 2)
            t2[n, 2 * i] = (x0 + rw / 2 + 0.5) / w * dw
            t2[n, 2 * i + 1] = (y0 + rh / 2 + 0.5) / h * dh
            t1[n, 2 * i] = gt[n, 2 * i] + dw // 2 - t2[n, 2 * i]
            t1[n, 2 * i + 1] = gt[n, 2 * i + 1] + dh // 2 - t2[n, 2 * i + 1]
            for ch in range(c):
                for a in range(rh):
                    for b in range(rw):
                        v = (x[n, ch, y0 + a, x0 + b]
                             if 0 <= y0 + a < h and 0 <= x0 + b < w else 0)
                        if as_dim == 0:
                            top[num * i + n, ch, a, b] = v
                        else:
                            top[n, c * i + ch, a, b] = v
    return top, t1, t2


@pytest.mark.parametrize("as_dim", [0, 1])
def test_subregion_matches_the_fork_loops_and_gradient(as_dim):
    x = RNG.standard_normal((2, 2, 6, 7))
    pts = np.array([[3.0, -10.0, -40.0, 5.0], [20.0, 25.0, 0.5, 0.0]])
    gt = RNG.uniform(-20, 20, pts.shape)
    text = ('type: "SubRegion" sub_region_param { region_height: 3 region_width: 4 '
            'data_height: 60 data_width: 70 as_dim: %d }' % as_dim)
    got = run_layer(make_layer(text), make_blobs([x, pts, gt]), make_blobs(3))
    for g, want in zip(got, _subregion_ref(x, pts, gt, 3, 4, 60, 70, as_dim)):
        np.testing.assert_allclose(g, want, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x, pts, gt]), make_blobs(1),
                         check_bottom=[0])


@pytest.mark.parametrize("op", ["SUM", "PROD", "MAX"])
def test_pairwise(op):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((2, 4))
    coeff = " coeff: 0.5 coeff: -2" if op == "SUM" else ""
    text = 'type: "Pairwise" pairwise_param { operation: %s%s }' % (op, coeff)
    (y,) = run_layer(make_layer(text), make_blobs([a, b]), make_blobs(1))
    want = {"SUM": 0.5 * a[:, None] - 2 * b[None], "PROD": a[:, None] * b[None],
            "MAX": np.maximum(a[:, None], b[None])}[op]
    np.testing.assert_allclose(y, want, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([a, b]), make_blobs(1))


def test_gram_and_cosine():
    x = RNG.standard_normal((2, 3, 2, 4))
    (g,) = run_layer(make_layer('type: "Gram"'), make_blobs([x]), make_blobs(1))
    flat = x.reshape(2, 3, 8)
    np.testing.assert_allclose(g[..., 0], flat @ flat.transpose(0, 2, 1) / 8 / 3, rtol=1e-12)
    check_layer_gradient(make_layer('type: "Gram"'), make_blobs([x]), make_blobs(1))
    (c,) = run_layer(make_layer('type: "Cosine"'), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(c, np.cos(x))
    check_layer_gradient(make_layer('type: "Cosine"'), make_blobs([x]), make_blobs(1))


def test_hotspot_matches_the_fork_loops():
    pts = np.array([[10.0, -20.0, -100.0, 0.0]])
    text = ('type: "Hotspot" hotspot_param { gaussian_std: 1.5 data_height: 80 data_width: 60 '
            'output_height: 8 output_width: 6 }')
    (y,) = run_layer(make_layer(text), make_blobs([pts]), make_blobs(1))
    assert y.shape == (1, 2, 8, 6)
    for i in range(2):
        p1 = float(np.float32((pts[0, 2 * i] / 60 + 0.5) * 6))     # a float in the fork
        p2 = float(np.float32((pts[0, 2 * i + 1] / 80 + 0.5) * 8))
        for h in range(8):
            for w in range(6):
                t = 0.5 / 1.5 / 1.5 / math.pi * math.exp(
                    -0.5 * ((p1 - w) ** 2 + (p2 - h) ** 2) / 1.5 / 1.5)
                assert y[0, i, h, w] == pytest.approx(t if t > 1e-4 else 0, rel=1e-12)
    sized = make_layer('type: "Hotspot" hotspot_param { data_height: 8 data_width: 8 }')
    (y,) = run_layer(sized, make_blobs([pts, np.zeros((1, 3, 5, 7))]), make_blobs(1))
    assert y.shape == (1, 2, 5, 7)
