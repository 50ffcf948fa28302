"""MAX pooling's own numba kernels (2 x 2 at stride 2, 3 x 3 at stride 1 or 2) against the
general kernel and numpy: the same top, argmax codes and bottom diff."""
import numpy as np
import pytest

from caffepy.math import kernels
from caffepy.testing import make_blobs, make_layer, run_layer
from tests.test_kernels import _both_paths, needs_numba


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 8, 6), (1, 2, 7, 6), (1, 2, 6, 5)],
                         ids=["even", "odd-rows", "odd-columns"])
def test_two_by_two_max_pooling_equals_the_general_kernel(dtype, shape):
    """2 x 2 / stride 2 MAX pooling has its own kernels where no window is clipped (even planes):
    the same top, argmax codes and bottom diff as the general kernel and numpy, with ties
    (the first maximum in Caffe's scan order) and a NaN (never taken)."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, shape).astype(dtype)     # many ties inside windows
    x[0, 0, 0, 0] = np.nan
    text = 'type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 }'
    layer = make_layer(text, dtype=dtype)
    bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
    run_layer(layer, bottom, top)
    assert layer._two_by_two(bottom[0].data.reshape(-1, *shape[2:]),
                             top[0].data.reshape(-1, *top[0].shape[2:])) == (shape[2:] == (8, 6))
    dy = rng.standard_normal(top[0].shape)
    top[0].diff[...] = dy
    bottom[0].diff[...] = 5.0
    layer.backward(top, [True], bottom)
    fast = (top[0].data.copy(), layer.arg.copy(), bottom[0].diff.copy())
    # the general kernel: the same layer with the 2 x 2 kernels ruled out
    layer._two_by_two = lambda *a: False
    run_layer(layer, bottom, top)
    top[0].diff[...] = dy
    layer.backward(top, [True], bottom)
    for a, b in zip(fast, (top[0].data, layer.arg, bottom[0].diff)):
        np.testing.assert_array_equal(a, b)
    assert fast[0][0, 0, 0, 0] == np.nanmax(x[0, 0, :2, :2])
    with kernels.disabled():         # numpy's path: the same top and argmax, the NaN included
        run_layer(layer, bottom, top)
    np.testing.assert_array_equal(fast[0], top[0].data)
    np.testing.assert_array_equal(fast[1], layer.arg)
    _both_paths(text, shape, dtype)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fields", ["stride: 1", "stride: 1 pad: 1", "stride: 2",
                                    "stride: 2 pad: 1", "stride: 2 round_mode: FLOOR",
                                    "stride: 2 pad: 2"])
def test_three_by_three_max_pooling_equals_the_general_kernel(dtype, fields, monkeypatch):
    """3 x 3 MAX pooling at stride 1 or 2 has kernels of its own (a plane padded with the lowest
    value where windows reach past it): the same top, argmax codes and bottom diff as the
    general kernel, with ties and a NaN, on planes whose last windows Caffe's ceil clips."""
    text = 'type: "Pooling" pooling_param { pool: MAX kernel_size: 3 %s }' % fields
    k = kernels.get()
    own = {1: k.max_pool_3x3_s1, 2: k.max_pool_3x3_s2}
    calls = []

    def spy(stride, fast):
        """The layer's call of the stride's own kernel: run it, or the general kernel."""
        def run(x, ph, pw, lowest, y, arg):
            calls.append(stride)
            if fast:
                return own[stride](x, ph, pw, lowest, y, arg)
            return k.max_pool(x, 3, 3, stride, stride, ph, pw, lowest, y, arg)
        return run
    for shape in [(2, 3, 9, 8), (1, 2, 7, 6), (1, 2, 8, 9)]:    # clipped columns; rows
        rng = np.random.default_rng(9)
        x = rng.integers(0, 3, shape).astype(dtype)
        x[0, 0, 1, 1] = np.nan
        dy = rng.standard_normal(run_layer(make_layer(text, dtype=dtype), make_blobs([x], dtype),
                                           make_blobs(1, dtype))[0].shape)
        runs = []
        for fast in (True, False):
            for stride in (1, 2):
                monkeypatch.setattr(k, "max_pool_3x3_s%d" % stride, spy(stride, fast))
            layer = make_layer(text, dtype=dtype)
            bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
            run_layer(layer, bottom, top)
            top[0].diff[...] = dy
            layer.backward(top, [True], bottom)
            runs.append((top[0].data.copy(), layer.arg.copy(), bottom[0].diff.copy()))
        for a, b in zip(*runs):
            np.testing.assert_array_equal(a, b)
        monkeypatch.undo()
        _both_paths(text, shape, dtype)
    assert len(calls) == 6 and set(calls) == {1 if "stride: 1" in fields else 2}
