import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from caffepy.forks.misc.lstm_unit import fork_tanh

FILL = 'type: "gaussian" std: 0.5'
APOLLO = ('type: "LstmUnit" lstm_unit_param { num_cells: 3 %s %s }' % (
    " ".join("%s { %s }" % (f, FILL) for f in (
        "input_weight_filler", "input_gate_weight_filler", "forget_gate_weight_filler",
        "output_gate_weight_filler")), "%s"))
SHANG = 'type: "LstmUnit" lstm_unit_param { num_cells: 3 weight_filler { %s } }' % FILL


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _step(h, c, w, tie, tanh_hidden):
    u, i, f, o = (h @ wi.reshape(3, -1).T for wi in w)
    if tie:
        f = -o
    cell = _sig(f) * c + _sig(i) * np.tanh(u)
    return _sig(o) * (np.tanh(cell) if tanh_hidden else cell), cell


def test_apollo_lstm_unit_forward_and_gradients():
    rng = np.random.default_rng(0)
    x, c = rng.standard_normal((2, 4)), rng.standard_normal((2, 3))
    for extra, tie, th in (("", False, False), ("tie_output_forget: true tanh_hidden: true",
                                                True, True)):
        layer = make_layer(APOLLO % extra)
        hn, cn = run_layer(layer, make_blobs([x, c]), make_blobs(2))
        want = _step(x, c, [b.data for b in layer.blobs], tie, th)
        np.testing.assert_allclose(hn, want[0], rtol=1e-12)
        np.testing.assert_allclose(cn, want[1], rtol=1e-12)
        check_layer_gradient(make_layer(APOLLO % extra), make_blobs([x, c]), make_blobs(2))


def test_charlesshang_lstm_unit_concatenates_the_previous_output():
    rng = np.random.default_rng(1)
    x, h, c = (rng.standard_normal(s) for s in ((2, 2, 1, 1), (2, 3, 1, 1), (2, 3, 1, 1)))
    layer = make_layer(SHANG)
    hn, cn = run_layer(layer, make_blobs([x, h, c]), make_blobs(2))
    assert hn.shape == (2, 3, 1, 1) and layer.blobs[0].shape == (1, 3, 1, 5)
    want = _step(np.concatenate([x.reshape(2, 2), h.reshape(2, 3)], 1), c.reshape(2, 3),
                 [b.data for b in layer.blobs], False, True)
    np.testing.assert_allclose(hn.reshape(2, 3), want[0], rtol=1e-12)
    check_layer_gradient(make_layer(SHANG), make_blobs([x, h, c]), make_blobs(2))


def test_fork_tanh_saturates_at_five():
    assert fork_tanh(np.array([5.0, -7.0]))[0] == 1 and fork_tanh(np.array([-7.0]))[0] == -1
    np.testing.assert_allclose(fork_tanh(np.array([0.3, -4.9])), np.tanh([0.3, -4.9]))


def test_conv_lstm_unit_matches_the_fork_loops_and_gradient():
    rng = np.random.default_rng(3)
    c = rng.standard_normal((1, 3, 2, 2, 2))
    x = rng.standard_normal((1, 3, 8, 2, 2))
    cont = np.array([[1.0, 0.0, 1.0]])
    cn, hn = run_layer(make_layer('type: "ConvLSTMUnit"'), make_blobs([c, x, cont]),
                       make_blobs(2))
    for n in range(3):
        xs = x[0, n].reshape(4, -1)
        i, f, o, g = _sig(xs[0]), cont[0, n] * _sig(xs[1]), _sig(xs[2]), np.tanh(xs[3])
        want_c = f * c[0, n].ravel() + i * g
        np.testing.assert_allclose(cn[0, n].ravel(), want_c, rtol=1e-12)
        np.testing.assert_allclose(hn[0, n].ravel(), o * np.tanh(want_c), rtol=1e-12)
    check_layer_gradient(make_layer('type: "ConvLSTMUnit"'), make_blobs([c, x, cont]),
                         make_blobs(2), check_bottom=[0, 1])
