import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def _ce(x, t):
    return -(x * (t - (x >= 0)) - np.log(1 + np.exp(x - 2 * x * (x >= 0))))


def _run_backward(layer, bottom, top, lw):
    top[0].diff[...] = lw
    layer.backward(top, [True] + [False] * (len(bottom) - 1), bottom)
    return bottom[0].diff.copy()


def test_ffia_form_weighs_the_first_sample_as_the_fork():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)) * 2
    t = (rng.random((3, 4)) > 0.5).astype(float)
    t[0, :2] = [1, 0]
    layer = make_layer('type: "SigmoidWeightedCrossEntropyLoss" sigmoid_wce_loss_param '
                       '{ alpha: 2 }')
    bottom, top = make_blobs([x, t]), make_blobs(1)
    loss, = run_layer(layer, bottom, top)
    # a transcription of the fork's loops
    lp = ln = cp = cn = 0.0
    for j in range(4):
        if int(t[0, j]) == 1:
            cp += 1
            lp += _ce(x[0, j], 1.0)
        else:
            cn += 1
            ln += _ce(x[0, j], 0.0)
    wp, wn = cn / (cp + cn) / 3, cp / (cp + cn) * 2 / 3
    np.testing.assert_allclose(loss, lp * wp + ln * wn)
    diff = 1 / (1 + np.exp(-x)) - t
    diff[0] *= np.where(t[0] == 1, wp, wn)
    np.testing.assert_allclose(_run_backward(layer, bottom, top, 0.5), diff * 0.5 / 3)


def test_per_element_form_keeps_its_unweighted_loss_and_weighted_backward():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5))
    p = (rng.random((2, 5)) > 0.5).astype(float)
    w = rng.uniform(0.2, 0.8, (2, 5))
    layer = make_layer('type: "SigmoidWeightedCrossEntropyLoss"')
    layer.layer_param.bottom.extend(["x", "p", "w"])
    from caffepy.layers.base import create_layer
    layer = create_layer(layer.layer_param, dtype=np.float64)
    bottom, top = make_blobs([x, p, w]), make_blobs(1)
    loss, = run_layer(layer, bottom, top)
    np.testing.assert_allclose(loss, _ce(x, p).sum() / 2)
    s = 1 / (1 + np.exp(-x))
    want = (s * (1 - p) / (2 * (1 - w)) - p * (1 - s) / (2 * w)) / 2
    np.testing.assert_allclose(_run_backward(layer, bottom, top, 1.0), want)
