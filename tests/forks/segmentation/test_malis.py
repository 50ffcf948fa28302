import itertools

import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def test_affinity_forward_and_the_forks_backward():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(2, 2, 4, 5))
    layer = make_layer('type: "Affinity" affinity_param { offset: 1 }')
    bottom, top = make_blobs([x]), make_blobs(1)
    y, = run_layer(layer, bottom, top)
    p = x[0, 1]
    assert y.shape == (1, 2, 4, 5)
    np.testing.assert_array_equal(y[0, 0, :3, :4], np.minimum(p[:3, :4], p[1:, :4]))
    np.testing.assert_array_equal(y[0, 1, :3, :4], np.minimum(p[:3, :4], p[:3, 1:]))
    assert not y[0, :, 3].any() and not y[0, :, :, 4].any()
    top[0].diff[...] = rng.standard_normal(top[0].shape)
    layer.backward(top, [True], bottom)
    g = top[0].diff[0, 0, :3, :4] + top[0].diff[0, 1, :3, :4]
    want = np.zeros_like(x)
    want[0, 1, :3, :4], want[0, 0, :3, :4] = g, -g
    np.testing.assert_allclose(bottom[0].diff, want)


def test_connected_component_raster_order_labels():
    m = np.array([[1, 1, 0, 2],
                  [0, 1, 0, 2],
                  [2, 0, 200, 200],
                  [2, 2, 0, 1]], dtype=float)
    y, = run_layer(make_layer('type: "ConnectedComponent"'), make_blobs([m[None, None]]),
                   make_blobs(1))
    want = np.array([[201, 201, 0, 202],
                     [0, 201, 0, 202],
                     [203, 0, 204, 204],
                     [203, 203, 0, 205]])
    np.testing.assert_array_equal(y[0, 0], want)


def _maximin(w, H, W):
    """Maximin edge weight between all pixel pairs of an H x W grid (+Y, +X edges)."""
    P = H * W
    best = np.full((P, P), -np.inf)
    np.fill_diagonal(best, np.inf)
    for i, j in itertools.product(range(H), range(W)):
        if i + 1 < H:
            best[i * W + j, (i + 1) * W + j] = best[(i + 1) * W + j, i * W + j] = w[0, i, j]
        if j + 1 < W:
            best[i * W + j, i * W + j + 1] = best[i * W + j + 1, i * W + j] = w[1, i, j]
    for k in range(P):       # Floyd-Warshall in the (max, min) semiring
        best = np.maximum(best, np.minimum(best[:, k:k + 1], best[k:k + 1, :]))
    return best


def test_malis_loss_equals_the_maximin_pair_loss():
    rng = np.random.default_rng(3)
    H, W = 3, 4
    seg = np.array([[1, 1, 0, 2], [1, 0, 2, 2], [3, 3, 0, 2]], dtype=float)
    pred = rng.uniform(size=(2, 2, H, W))
    gt = rng.uniform(size=(2, 2, H, W))
    segs = np.stack([seg, seg])[:, None]
    layer = make_layer('type: "MalisLoss"')
    bottom, top = make_blobs([pred, gt, segs]), make_blobs(2)
    loss, echo = run_layer(layer, bottom, top)
    np.testing.assert_array_equal(echo, pred)
    lab = seg.ravel()
    pairs = [(u, v) for u in range(H * W) for v in range(u + 1, H * W) if lab[u] and lab[v]]
    want = 0.0
    for n in range(2):
        lo, hi = _maximin(np.minimum(pred[n], gt[n]), H, W), _maximin(np.maximum(pred[n], gt[n]),
                                                                      H, W)
        same = [(u, v) for u, v in pairs if lab[u] == lab[v]]
        diff = [(u, v) for u, v in pairs if lab[u] != lab[v]]
        pos = sum((1 - lo[u, v]) ** 2 for u, v in same) / len(same)
        neg = sum(hi[u, v] ** 2 for u, v in diff) / len(diff)
        want += 0.5 * (pos + neg)
    np.testing.assert_allclose(loss, want / 2, rtol=1e-6)
    top[0].diff[...] = 1
    layer.backward(top, [True, False, False], bottom)
    d = bottom[0].diff
    assert not d[0].any() and d[1].any()        # only the last image's (the fork clears per image)
    # each same-label pair pulls its maximin edge of min(A, G): d = -(1 - w) pairs / P / 2
    lo_w = np.minimum(pred[1], gt[1])
    same = [(u, v) for u, v in pairs if lab[u] == lab[v]]
    mm = _maximin(lo_w, H, W)
    total = sum(-(1 - mm[u, v]) / len(same) / 2 for u, v in same)
    hi_w = np.maximum(pred[1], gt[1])
    mh = _maximin(hi_w, H, W)
    diff = [(u, v) for u, v in pairs if lab[u] != lab[v]]
    total += sum(mh[u, v] / len(diff) / 2 for u, v in diff)
    np.testing.assert_allclose(d.sum(), total, rtol=1e-9)
