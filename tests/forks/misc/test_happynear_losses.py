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
