import os
import signal

import numpy as np
import pytest

from caffepy import common
from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def setup(text, n_top, bottom=()):
    layer = make_layer(text)
    top = make_blobs(n_top)
    layer.setup(list(bottom), top)
    return layer, top


def test_input_one_shape_per_top():
    _, top = setup('type: "Input" input_param { shape { dim: 2 dim: 3 } shape { dim: 4 } }', 2)
    assert [t.shape for t in top] == [(2, 3), (4,)]


def test_input_one_shape_for_all():
    layer, top = setup('type: "Input" input_param { shape { dim: 5 dim: 1 } }', 3)
    assert [t.shape for t in top] == [(5, 1)] * 3
    top[0].reshape(7, 1)                       # user reshapes survive reshape/forward
    layer.forward([], top)
    assert top[0].shape == (7, 1)


def test_input_shape_count_checked():
    with pytest.raises(CaffeError, match="input_param.shape"):
        setup('type: "Input" input_param { shape { dim: 1 } shape { dim: 2 } }', 3)


def test_dummy_data_shapes_and_fillers():
    text = ('type: "DummyData" dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 4 } '
            'data_filler { type: "constant" value: 1.5 } data_filler { type: "gaussian" } }')
    common.set_random_seed(3)
    layer, top = setup(text, 2)
    assert [t.shape for t in top] == [(2, 3), (4,)]
    np.testing.assert_allclose(top[0].data, 1.5)     # constant fillers fill once, at setup
    layer.forward([], top)
    first = top[1].data.copy()
    layer.forward([], top)
    np.testing.assert_allclose(top[0].data, 1.5)
    assert first.std() > 0.3 and not np.allclose(top[1].data, first)  # others: every forward


@pytest.mark.parametrize("count", [200001, 200000])
def test_dummy_data_gaussian_is_normal_seeded_and_the_same_in_any_dtype(count):
    """A dense gaussian DummyData top is drawn by numpy's float32 ziggurat in seeded chunks: its
    mean, standard deviation, quantiles and moments are those of N(mean, std^2), a seed repeats
    it, and a float64 net gets the same values as a float32 one."""
    stats = pytest.importorskip("scipy.stats")
    text = ('type: "DummyData" dummy_data_param { shape { dim: %d } '
            'data_filler { type: "gaussian" mean: 2 std: 3 } }' % count)
    tops = {}
    for dtype in (np.float32, np.float64, np.float32):
        common.set_random_seed(11)
        layer = make_layer(text, dtype=dtype)
        top = make_blobs(1, dtype)
        layer.setup([], top)
        layer.forward([], top)
        tops.setdefault(dtype, []).append(top[0].data.copy())
    a, b, c = tops[np.float32][0], tops[np.float64][0], tops[np.float32][1]
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a.astype(np.float64), b)
    z = (b - 2.0) / 3.0
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert abs(stats.skew(z)) < 0.02 and abs(stats.kurtosis(z)) < 0.05
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert np.isfinite(z).all()


def test_gaussian_float32_is_the_same_on_any_thread_count(monkeypatch):
    """The chunks' streams follow the seed, not the threads that fill them."""
    from caffepy import fillers
    from caffepy.math import kernels
    count = 3 * fillers.GAUSSIAN_CHUNK + 5
    draws = []
    for n in (1, 2, 3):
        monkeypatch.setattr(kernels, "threads", lambda n=n: n)
        common.set_random_seed(5)
        draws.append(fillers.gaussian_float32(count, 1.0, 2.0))
    assert draws[0].dtype == np.float32 and draws[0].shape == (count,)
    np.testing.assert_array_equal(draws[0], draws[1])
    np.testing.assert_array_equal(draws[0], draws[2])
    chunks = draws[0][:3 * fillers.GAUSSIAN_CHUNK].reshape(3, -1)
    assert not np.array_equal(chunks[0], chunks[1])       # each chunk its own stream


def test_dummy_data_legacy_dims_default_zero():
    text = 'type: "DummyData" dummy_data_param { num: 2 num: 3 channels: 4 height: 1 width: 5 }'
    _, top = setup(text, 2)
    assert [t.shape for t in top] == [(2, 4, 1, 5), (3, 4, 1, 5)]
    assert not top[0].data.any()


@pytest.mark.parametrize("text,match", [
    ('dummy_data_param { shape { dim: 1 } num: 1 channels: 1 height: 1 width: 1 }', "both"),
    ('dummy_data_param { shape { dim: 1 } shape { dim: 1 } shape { dim: 1 } }', "shape"),
    ('dummy_data_param { shape { dim: 1 } data_filler {} data_filler {} data_filler {} }',
     "data_filler"),
])
def test_dummy_data_errors(text, match):
    with pytest.raises(CaffeError, match=match):
        setup('type: "DummyData" ' + text, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parameter(dtype):
    layer = make_layer('type: "Parameter" parameter_param { shape { dim: 2 dim: 3 } }',
                       dtype=dtype)
    top = make_blobs(1, dtype)
    layer.setup([], top)
    assert top[0].shape == (2, 3) and top[0].dtype == dtype
    layer.blobs[0].data[...] = np.arange(6).reshape(2, 3)
    layer.forward([], top)
    np.testing.assert_array_equal(top[0].data, np.arange(6).reshape(2, 3))
    check_layer_gradient(layer, [], top)


def test_silence_zeroes_diffs():
    bottom = make_blobs([np.ones(3), np.ones((2, 2))])
    for b in bottom:
        b.diff[...] = 7
    layer = make_layer('type: "Silence"')
    run_layer(layer, bottom, [])
    layer.backward([], [True, False], bottom)
    assert not bottom[0].diff.any() and (bottom[1].diff == 7).all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_gaussian_float32_in_a_forked_child_after_the_pool_started(monkeypatch):
    """The child of a fork does not wait on the parent's pool threads: it draws on its own."""
    from caffepy import fillers
    from caffepy.math import kernels
    monkeypatch.setattr(kernels, "threads", lambda: 2)
    fillers.gaussian_float32(3 * fillers.GAUSSIAN_CHUNK, 0.0, 1.0)
    assert ("caffepy-fill", 2) in common._pools
    pid = os.fork()
    if pid == 0:                                   # pragma: no cover - the child
        signal.alarm(30)
        ok = fillers.gaussian_float32(3 * fillers.GAUSSIAN_CHUNK, 0.0, 1.0).size
        os._exit(0 if ok == 3 * fillers.GAUSSIAN_CHUNK else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
