import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _inputs(seed, n=2, h=3, w=4):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.05, 0.95, (n, 1, h, w))
    t = (rng.uniform(0, 1, (n, 1, h, w)) > 0.5).astype(float)
    t[:, 0, 0, 0] = 1
    rw, pw = rng.uniform(0.5, 2, (n, 1, h, w)), rng.uniform(0.5, 2, (n, 1, h, w))
    return x, t, rw, pw


def _fm(x, t, rw, pw):
    r = (x * t * rw).sum() / (t * rw).sum()
    p = (x * t * pw).sum() / (x * pw).sum()
    return r, p, 2 * r * p / (r + p)


def _text(extra):
    return 'type: "WeightedFmeasureLoss" weighted_fmeasure_loss_param { margin: 0.5 %s }' % extra


def test_fmeasure_total_and_average():
    x, t, rw, pw = _inputs(1)
    (loss,) = run_layer(make_layer(_text("avg_fm: false")), make_blobs([x, t, rw, pw]),
                        make_blobs(1))
    assert float(loss) == pytest.approx(1 - _fm(x, t, rw, pw)[2])
    loss, per = run_layer(make_layer(_text("")), make_blobs([x, t, rw, pw]), make_blobs(2))
    fms = [_fm(x[i], t[i], rw[i], pw[i])[2] for i in range(2)]
    assert float(loss) == pytest.approx(np.mean([1 - f for f in fms]))
    np.testing.assert_allclose(per.ravel(), fms)


def test_margin_snaps_confident_pixels_in_the_bottom():
    x = np.array([0.9, 0.6, 0.1, 0.45]).reshape(1, 1, 1, 4)
    t = np.array([1.0, 1.0, 0.0, 0.0]).reshape(1, 1, 1, 4)
    blobs = make_blobs([x, t, np.ones_like(x), np.ones_like(x)])
    run_layer(make_layer('type: "WeightedFmeasureLoss" weighted_fmeasure_loss_param '
                         '{ margin: 0.2 }'), blobs, make_blobs(1))
    np.testing.assert_allclose(blobs[0].data.ravel(), [1.0, 0.6, 0.0, 0.45])


def test_fmeasure_gradient_is_the_forks():
    # the fork's recall term is twice dF/dR and lacks the top diff: with a top diff of 1 its
    # gradient is the true one plus -dF/dR t rw / sum(t rw)
    x, t, rw, pw = _inputs(2, n=1)
    layer = make_layer(_text("avg_fm: false"))
    bottom, top = make_blobs([x, t, rw, pw]), make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False, False, False], bottom)
    eps, num = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for s in (1, -1):
            xx = x.copy()
            xx[i] += s * eps
            num[i] += s * (1 - _fm(xx, t, rw, pw)[2]) / (2 * eps)
    r, p, _ = _fm(x, t, rw, pw)
    extra = -2 * p * p / (r + p) ** 2 * t * rw / (t * rw).sum()
    np.testing.assert_allclose(bottom[0].diff, num + extra, rtol=1e-5, atol=1e-8)


def test_mse_branch_and_its_gradient():
    x, t, rw, pw = _inputs(3)
    t[...] = 0                  # no foreground: R = 0, the MSE is used
    text = _text("mse_lambda: 0.3")
    (loss,) = run_layer(make_layer(text), make_blobs([x, t, rw, pw]), make_blobs(1))
    want = np.mean([0.3 * 0.5 * (x[i] ** 2 * pw[i]).sum() / pw[i].sum() for i in range(2)])
    assert float(loss) == pytest.approx(want)
    check_layer_gradient(make_layer(text), make_blobs([x, t, rw, pw]), make_blobs(1),
                         check_bottom=[0])


def test_pr_counts():
    x = np.array([0.9, 0.7, 0.2, 0.1, 0.8, 0.3]).reshape(1, 1, 2, 3)
    lab = np.array([1, 0, 1, 0, 7, 0], float).reshape(1, 1, 2, 3)
    tops = run_layer(make_layer('type: "PR" precision_recall_param { ignore_label: 7 }'),
                     make_blobs([x, lab]), make_blobs(5))
    # TP 1, FP 1, FN 1, TN 2 (the 7 ignored)
    np.testing.assert_allclose([float(v) for v in tops], [0.5, 0.5, 0.6, 2 / 3, 0.5])
    tops = run_layer(make_layer('type: "PR"'), make_blobs([x * 0, lab * 0 + 1]), make_blobs(5))
    assert float(tops[0]) == 0 and float(tops[4]) == 0 and np.isnan(float(tops[3]))
