import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

X = np.random.default_rng(0).standard_normal((2, 3, 4))
POS = np.abs(X) + 0.2

CASES = [
    ('type: "Power" power_param { power: 2.5 scale: 0.8 shift: 0.3 }', POS,
     lambda x: (0.3 + 0.8 * x) ** 2.5),
    ('type: "Power" power_param { power: 2 scale: -1 shift: 1 }', X, lambda x: (1 - x) ** 2),
    ('type: "Power" power_param { power: 1 scale: 3 shift: -1 }', X, lambda x: 3 * x - 1),
    ('type: "Power" power_param { power: 0 scale: 3 shift: 2 }', X, lambda x: np.ones_like(x)),
    ('type: "Power" power_param { power: 3 scale: 0 shift: 2 }', X, lambda x: np.full_like(x, 8)),
    ('type: "Exp"', X, np.exp),
    ('type: "Exp" exp_param { base: 3 scale: 0.5 shift: -0.2 }', X,
     lambda x: 3.0 ** (-0.2 + 0.5 * x)),
    ('type: "Log"', POS, np.log),
    ('type: "Log" log_param { base: 10 scale: 2 shift: 0.5 }', POS,
     lambda x: np.log10(0.5 + 2 * x)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("text,x,ref", CASES)
def test_forward(text, x, ref, dtype):
    (y,) = run_layer(make_layer(text, dtype=dtype), make_blobs([x], dtype), make_blobs(1, dtype))
    assert y.dtype == dtype
    # prototxt floats are float32 (0.8 -> 0.800000011920929), hence 1e-7 in float64
    np.testing.assert_allclose(y, ref(x), rtol=2e-6 if dtype == np.float32 else 1e-7)


@pytest.mark.parametrize("text,x,ref", CASES)
def test_gradient(text, x, ref):
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))


@pytest.mark.parametrize("kind", ["Exp", "Log"])
def test_base_must_be_positive(kind):
    text = 'type: "%s" %s_param { base: -2 }' % (kind, kind.lower())
    with pytest.raises(CaffeError, match="base"):
        run_layer(make_layer(text), make_blobs([POS]), make_blobs(1))
