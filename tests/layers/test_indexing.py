import numpy as np
import pytest

from caffepy import common
from caffepy.errors import CaffeError
from caffepy.testing import GradientChecker, check_layer_gradient, make_blobs, make_layer, run_layer

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 2, 4))


def run(text, arrays, n_top=1, dtype=np.float64):
    layer = make_layer(text, dtype=dtype)
    bottom, top = make_blobs(arrays, dtype), make_blobs(n_top, dtype)
    return layer, bottom, top, run_layer(layer, bottom, top)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_reindex(dtype):
    idx = np.array([2, 0, 2, 2, 1])
    layer, bottom, top, (y,) = run('type: "BatchReindex"', [X, idx], dtype=dtype)
    np.testing.assert_array_equal(y, X[idx].astype(dtype))
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top, check_bottom=[0])
    assert not layer.allow_force_backward(1)


def test_batch_reindex_bad_index():
    with pytest.raises(CaffeError, match=r"\[0, 3\), got 3"):
        run('type: "BatchReindex"', [X, np.array([0, 3])])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filter(dtype):
    x2 = RNG.standard_normal((3, 5))
    sel = np.array([1.0, 0.0, 1.0])
    layer, bottom, top, (y, y2) = run('type: "Filter"', [X, x2, sel], n_top=2, dtype=dtype)
    np.testing.assert_array_equal(y, X[[0, 2]].astype(dtype))
    np.testing.assert_array_equal(y2, x2[[0, 2]].astype(dtype))
    assert not layer.allow_force_backward(2)
    if dtype == np.float64:   # tops have N items after setup, M after the first forward
        GradientChecker().check(layer, bottom, top, check_bottom=[0, 1], first_setup=False)


def test_filter_top_count_and_selector_shape():
    with pytest.raises(CaffeError, match="one top per filtered bottom"):
        run('type: "Filter"', [X, np.ones(3)], n_top=2)
    with pytest.raises(CaffeError, match="selector shape"):
        run('type: "Filter"', [X, np.ones((3, 2))])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", ["true", "false"])
def test_embed(bias, dtype):
    text = ('type: "Embed" embed_param { num_output: 4 input_dim: 6 bias_term: %s '
            'weight_filler { type: "gaussian" } bias_filler { type: "uniform" } }' % bias)
    ids = np.array([[5, 0, 2], [2, 2, 1]])
    common.set_random_seed(1)
    layer, bottom, top, (y,) = run(text, [ids], dtype=dtype)
    assert [b.shape for b in layer.blobs] == [(6, 4)] + ([(4,)] if bias == "true" else [])
    want = layer.blobs[0].data[ids] + (layer.blobs[1].data if bias == "true" else 0)
    np.testing.assert_allclose(y, want)
    if dtype == np.float64:
        check_layer_gradient(layer, bottom, top, check_bottom=[])
    assert not layer.allow_force_backward(0)


def test_embed_bad_id():
    text = 'type: "Embed" embed_param { num_output: 2 input_dim: 3 }'
    with pytest.raises(CaffeError, match="embedding ids"):
        run(text, [np.array([0.5])])
