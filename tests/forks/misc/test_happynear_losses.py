"""happynear/caffe-windows' SoftContrastiveLoss and NCALoss against their loops."""
import math

import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(12)
D = RNG.uniform(0.1, 2.0, (4, 5))
LAB = np.array([0, 3, 1, 4], dtype=float)
W = np.array([1.0, 2.0, 0.5, 1.5])


def _soft_ref(d, lab, pm, nm, pw, nw, square, thresh=4.0):
    """soft_contrastive_loss_layer.cpp's Forward_cpu / Backward_cpu loops (from a zero loss)."""
    n, k = d.shape
    loss, grad = 0.0, np.zeros(d.shape)
    for i in range(n):
        s = 0.0
        for j in range(k):
            if j != int(lab[i]):
                if d[i, j] < nm:
                    e = (nm - d[i, j]) ** 2 if square else nm - d[i, j]
                    s += math.exp(e * nw)
            else:
                t = min(thresh, max(0.0, d[i, j] - pm))
                loss += (t * t if square else t) * pw
        if s > 0:
            loss += math.log(s)
        for j in range(k):
            if j == int(lab[i]):
                if pm < d[i, j] < thresh:
                    grad[i, j] = d[i, j] * pw if square else pw
            elif d[i, j] < nm:
                e = (nm - d[i, j]) ** 2 if square else nm - d[i, j]
                grad[i, j] = ((d[i, j] - nm) * nw if square else -nw) * math.exp(e * nw) / s
    return loss / n, grad / n


@pytest.mark.parametrize("square", [False, True])
def test_soft_contrastive_matches_the_fork(square):
    text = ('type: "SoftContrastiveLoss" soft_contrastive_loss_param { positive_margin: 0.25 '
            'negative_margin: 1.25 positive_weight: 2 negative_weight: 0.75 square: %s }'
            % str(square).lower())
    layer, bottom, top = make_layer(text), make_blobs([D, LAB]), make_blobs(2)
    loss, _ = run_layer(layer, bottom, top)
    want_loss, want_grad = _soft_ref(D, LAB, 0.25, 1.25, 2.0, 0.75, square)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_grad, rtol=1e-12)
    if not square:
        check_layer_gradient(make_layer(text), make_blobs([D, LAB]), make_blobs(1),
                             check_bottom=[0], kink=1.25, kink_range=1e-3)
    # a weights bottom scales row i's gradient (not the loss) by w_i / mean(w)
    layer, bottom, top = make_layer(text), make_blobs([D, LAB, W]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_grad * (W / W.mean())[:, None], rtol=1e-12)


def _nca_ref(d, lab, min_only):
    n, k = d.shape
    loss, grad = 0.0, np.zeros(d.shape)
    for i in range(n):
        best = 0
        for j in range(k):
            if j == int(lab[i]):
                loss += d[i, j]
            else:
                if not min_only:
                    loss += math.exp(-d[i, j])
                if min_only and d[i, j] < d[i, best]:
                    best = j
        if min_only:
            loss += math.exp(-d[i, best])
            grad[i, int(lab[i])] = 1
            grad[i, best] = -math.exp(-d[i, best])
        else:
            for j in range(k):
                grad[i, j] = 1 if j == int(lab[i]) else -math.exp(-d[i, j])
    return loss / n, grad / n


@pytest.mark.parametrize("min_only", [False, True])
def test_nca_loss_matches_the_fork(min_only):
    d = D.copy()
    d[0, 0] = 0.05        # label 0 nearer than every negative: the fork's index-0 start shows
    text = 'type: "NCALoss" nca_param { min_negative_only: %s }' % str(min_only).lower()
    layer, bottom, top = make_layer(text), make_blobs([d, LAB]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    want_loss, want_grad = _nca_ref(d, LAB, min_only)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_grad, rtol=1e-12)
    if not min_only:
        check_layer_gradient(make_layer(text), make_blobs([D, LAB]), make_blobs(1),
                             check_bottom=[0])


def _triplet_ref(d, lab, w, m, center, hardest, first, ub, pw, nw):
    """general_triplet_loss_layer.cpp's loops: forward diff, loss, then backward."""
    n, k = d.shape
    g = np.zeros(d.shape)
    hard = [-1] * n
    for i in range(n):
        same = d[i, int(lab[i])]
        for j in range(k):
            if j != int(lab[i]):
                g[i, j] = max(0.0, same + m - d[i, j]) * nw
                if hardest and g[i, j] > 0 and (hard[i] < 0 or g[i, j] > g[i, hard[i]]):
                    hard[i] = j
        if hardest and hard[i] >= 0:
            for j in range(k):
                if j != int(lab[i]) and j != hard[i]:
                    g[i, j] = 0
        if first and same > ub:
            for j in range(k):
                if j != int(lab[i]):
                    g[i, j] = 0
    loss = np.abs(g).sum() / n
    for i in range(n):
        same = d[i, int(lab[i])]
        if first and same > ub:
            g[i] = 0
            g[i, int(lab[i])] = pw
            continue
        neg = 0
        if hardest:
            if hard[i] >= 0 and d[i, hard[i]]:
                g[i, hard[i]] = -nw
                neg += 1
        else:
            for j in range(k):
                if j != int(lab[i]):
                    if same + m > d[i, j]:
                        g[i, j] = -nw
                        neg += 1
                    else:
                        g[i, j] = 0
        if center or neg > 0:
            g[i, int(lab[i])] = pw
    return loss, g * w[:, None] / n


@pytest.mark.parametrize("center,hardest,first", [(True, False, False), (False, True, False),
                                                  (False, False, True)])
def test_general_triplet_matches_the_fork(center, hardest, first):
    d = D.copy()
    d[2] = [0.2, 0.1, 0.3, 1.9, 1.8]          # label 1 row: its positive is the nearest
    text = ('type: "GeneralTripletLoss" general_triplet_loss_param { margin: 0.5 '
            'add_center_loss: %s hardest_only: %s positive_first: %s positive_upper_bound: 1 '
            'positive_weight: 2 negative_weight: 0.75 }'
            % tuple(str(v).lower() for v in (center, hardest, first)))
    layer, bottom, top = make_layer(text), make_blobs([d, LAB, W]), make_blobs(2)
    loss, dist = run_layer(layer, bottom, top)
    want_loss, want_grad = _triplet_ref(d, LAB, W, 0.5, center, hardest, first, 1.0, 2.0, 0.75)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    pos = np.zeros(d.shape, bool)
    pos[np.arange(4), LAB.astype(int)] = True
    np.testing.assert_allclose(dist, [d[pos].sum() / 4, d[~pos].sum() / 4 / 4], rtol=1e-12)
    top[0].diff[...] = 1
    layer.backward(top, [True, False, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_grad, rtol=1e-12)


def _batch_ref(d, lab, pm, nm, pw, nw, max_only):
    n = len(lab)
    loss, grad = 0.0, np.zeros(d.shape)
    best_p, best_n, vp, vn = None, None, -np.inf, np.inf
    for i in range(n):
        for j in range(i + 1, n):
            if lab[i] == lab[j]:
                if d[i, j] > pm:
                    if max_only and d[i, j] > vp:
                        vp, best_p = d[i, j], (i, j)
                    loss += pw * (d[i, j] - pm)
                    grad[i, j] = pw
            elif d[i, j] < nm:
                if max_only and d[i, j] < vn:
                    vn, best_n = d[i, j], (i, j)
                loss += nw * (nm - d[i, j])
                grad[i, j] = -nw
    if max_only:
        loss, grad = 0.0, np.zeros(d.shape)
        if best_p:
            loss += pw * (d[best_p] - pm)
            grad[best_p] = pw
        if best_n:
            loss += nw * (nm - d[best_n])
            grad[best_n] = -nw
        return loss, grad / 2
    return loss / (n * (n - 1) // 2), grad / n


@pytest.mark.parametrize("max_only", [False, True])
def test_batch_contrastive_matches_the_fork(max_only):
    d = RNG.uniform(0, 2, (5, 5))
    lab = np.array([0, 1, 0, 1, 2], dtype=float)
    text = ('type: "BatchContrastiveLoss" batch_contrastive_loss_param { positive_margin: 0.5 '
            'negative_margin: 1.5 positive_weight: 2 negative_weight: 0.75 max_only: %s }'
            % str(max_only).lower())
    layer, bottom, top = make_layer(text), make_blobs([d, lab]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    want_loss, want_grad = _batch_ref(d, lab, 0.5, 1.5, 2.0, 0.75, max_only)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    np.testing.assert_allclose(bottom[0].diff, want_grad, rtol=1e-12)


def test_confidence_penalty_and_correlation():
    p = RNG.uniform(0.05, 1, (4, 5))
    text = 'type: "ConfidencePenaltyLoss" confidence_penalty_loss_param { beta: 0.25 }'
    (loss,) = run_layer(make_layer(text), make_blobs([p, LAB]), make_blobs(1))
    want = 0.0
    for i in range(4):
        for j in range(5):
            want -= (0.75 if j == LAB[i] else 0.25 / 3) * math.log(p[i, j])
    np.testing.assert_allclose(loss, want / 4, rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([p, LAB]), make_blobs(1), check_bottom=[0])
    x, y = RNG.standard_normal((3, 1, 2, 2)), RNG.standard_normal((3, 1, 2, 2))
    layer, bottom, top = make_layer('type: "CorrelationLoss"'), make_blobs([x, y]), make_blobs(1)
    (loss,) = run_layer(layer, bottom, top)
    np.testing.assert_allclose(loss, np.sum(x * y) / 12, rtol=1e-12)
    bottom[0].diff[...] = 7
    layer.backward(top, [True, True], bottom)
    assert not bottom[0].diff.any() and not bottom[1].diff.any()
    np.testing.assert_array_equal(bottom[0].data, x)
