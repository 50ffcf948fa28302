import numpy as np
import pytest

from caffepy.forks.misc.ternary_weights import ternarize
from caffepy.testing import make_blobs, make_layer, run_layer

from .test_binary_weights import assert_straight_through, forward_with_roulette

CONV = ('type: "TernaryConvolution" convolution_param { num_output: 6 kernel_size: 2 '
        'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } '
        '%s }')
IP = ('type: "TernaryInnerProduct" inner_product_param { num_output: 5 '
      'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } %s }')


def _loop_ternarize(w, mask=None):
    """lowbit_functions.cu element by element: delta from 0.7 / N (W - mean) summed, then each
    row's alpha over the values beyond it."""
    rows = w.reshape(w.shape[0], -1)
    n = rows.size
    mean = sum(v for v in rows.flat) / n
    delta = sum(abs(0.7 / n * (v - mean)) for v in rows.flat)
    out = np.empty_like(rows)
    for o in range(rows.shape[0]):
        kept = [abs(v) for v in rows[o] if abs(v) > delta]
        alpha = sum(kept) / len(kept) if kept else 0.0
        for j, v in enumerate(rows[o]):
            if mask is not None and not mask[o]:
                out[o, j] = v
            else:
                out[o, j] = alpha * (1 if v > delta else -1 if v < -delta else 0)
    return out.reshape(w.shape)


def test_ternarize_is_the_fork_loop():
    w = np.random.default_rng(0).standard_normal((4, 2, 3, 3))
    w[1] = 1e-3                                     # a row with nothing beyond delta: alpha 0
    t = ternarize(w.reshape(4, -1)).reshape(w.shape)
    np.testing.assert_allclose(t, _loop_ternarize(w), rtol=1e-12)
    assert (t[1] == 0).all() and set(np.unique(np.sign(t))) <= {-1.0, 0.0, 1.0}


@pytest.mark.parametrize("text,plain", [
    (CONV % "", 'type: "Convolution" convolution_param { num_output: 6 kernel_size: 2 }'),
    (IP % "", 'type: "InnerProduct" inner_product_param { num_output: 5 }'),
])
def test_forward_with_ternary_weights_and_straight_through_backward(text, plain):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 4))
    layer = make_layer(text)
    bottom, top = make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    assert_straight_through(layer, bottom, top, plain, x, _loop_ternarize(layer.blobs[0].data),
                            rng)


def test_stochastic_quantization_keeps_rows_drawn_by_the_roulette():
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 4))
    layer = make_layer(CONV % "sq: true ratio: 50")
    w, mask = forward_with_roulette(layer, make_blobs([x]), make_blobs(1), _loop_ternarize, 3)
    np.testing.assert_allclose(layer.binary, _loop_ternarize(w, mask), rtol=1e-12)
