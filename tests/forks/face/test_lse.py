"""happynear's GlobalLSEMargin and bounded Scale (forks.face.lse)."""
import numpy as np

from caffepy.forks.face.lse import GlobalLSEMarginLayer, mean_shift
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.array([[0.9, -0.2, 0.1, -0.5], [0.05, 0.95, -0.3, 0.2], [-0.4, 0.0, 0.2, 0.95]])
LAB = np.array([0, 1, 3])
R = np.arange(3)


def _gaps(x, lab, s):
    others = np.ones(x.shape, bool)
    others[R, lab] = False
    n = np.maximum(np.where(others, x, -np.inf).max(1), -1)
    lse = np.log(np.where(others, np.exp(s * (x - n[:, None])), 0).sum(1)) / s + n
    return x[R, lab] - lse, lse, n


def test_global_lse_margin_numbers():
    layer = make_layer('type: "GlobalLSEMargin"')
    bottom, top = make_blobs([X, LAB]), make_blobs(2)
    y, stats = run_layer(layer, bottom, top)
    g, lse, n = _gaps(X, LAB, 30.0)
    assert np.ptp(g) < 0.1                   # every gap within 0.1 of the mean: m = mean(g)
    m = g.mean()
    want = 30 * X
    want[R, LAB] = 30 * (X[R, LAB] - m)
    np.testing.assert_allclose(y, want)
    np.testing.assert_allclose(stats, [30, X[R, LAB].mean(), lse.mean(), n.mean(), m])
    layer.forward(bottom, top)                                # then 0.9 m + 0.1 batch mode
    np.testing.assert_allclose(top[1].data[4], 0.9 * m + 0.1 * g.mean())
    clipped = make_layer('type: "GlobalLSEMargin" scale_param { max_value: 16 }')
    (_, stats) = run_layer(clipped, make_blobs([X, LAB]), make_blobs(2))
    assert stats[0] == 16


def test_mean_shift_stops_where_the_fork_would_loop():
    assert mean_shift(np.array([0.0, 1.0]), 5.0, 3) == 0.5   # nothing near 5, nor near 0.5
    assert np.isclose(mean_shift(np.array([0.0, 0.05, 1.0]), 0.02, 20), 0.025)


def test_global_lse_margin_gradient_with_the_margin_held():
    class Held(GlobalLSEMarginLayer):       # the fork does not differentiate the margin
        def _update_margin(self, g):
            self.blobs[1].data[...] = 0.2

    layer = Held(make_layer('type: "GlobalLSEMargin" scale_param { filler { type: "constant" '
                            'value: 4 } }').layer_param, dtype=np.float64)
    check_layer_gradient(layer, make_blobs([X, LAB]), make_blobs(1), check_bottom=[0])
    norms = make_layer('type: "GlobalLSEMargin"')
    r = np.array([2.0, 3.0, 1.5])
    (y,) = run_layer(norms, make_blobs([X, LAB, r]), make_blobs(1))   # per-row norms, no s
    assert np.isclose(y[1, 0], 3.0 * 0.05) and norms.param_propagate_down == [False, False]


def test_scale_min_max_value():
    layer = make_layer('type: "Scale" scale_param { filler { type: "constant" value: 5 } '
                       'max_value: 2 }')
    (y,) = run_layer(layer, make_blobs([X]), make_blobs(1))
    np.testing.assert_allclose(y, 2 * X)
    assert np.all(layer.blobs[0].data == 2)                        # clipped in place, as the fork
