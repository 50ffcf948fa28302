"""The numba kernels (caffepy.math.kernels) against the pure-numpy path, and the direct depthwise
convolution against the naive formula and the gradient checker. Without numba the comparisons
skip; the numpy path is what the rest of the suite then runs."""
import os

import numpy as np
import pytest

from caffepy.math import cpu, kernels
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer
from tests.layers.test_conv import CONV, naive_conv

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed or off")


def _forward_backward(text, x, dtype, seed=0):
    """(top data, bottom diff, param diffs) of one forward + backward with a fixed top diff."""
    layer = make_layer(text, dtype=dtype)
    bottom, top = make_blobs([x], dtype), make_blobs(1, dtype)
    run_layer(layer, bottom, top)
    for i, b in enumerate(layer.blobs):
        b.data[...] = np.random.default_rng(seed + i).standard_normal(b.shape)
    layer.forward(bottom, top)
    top[0].diff[...] = np.random.default_rng(seed + 9).standard_normal(top[0].shape)
    for b in layer.blobs:
        b.diff[...] = 0
    layer.backward(top, [True], bottom)
    return [top[0].data.copy(), bottom[0].diff.copy()] + [b.diff.copy() for b in layer.blobs]


def _both_paths(text, shape, dtype=np.float32):
    x = np.random.default_rng(7).standard_normal(shape)
    fast = _forward_backward(text, x, dtype)
    with kernels.disabled():
        assert not kernels.available()
        slow = _forward_backward(text, x, dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,fields,num_output", [
    ((3, 4, 9, 8), "kernel_size: 3 pad: 1", 5),
    ((2, 4, 9, 8), "kernel_size: 3 dilation: 2 pad: 2 stride: 2 group: 2", 4),
    ((1, 3, 7, 6), "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0", 2),
    ((2, 4, 6, 6), "kernel_size: 1", 3),
    ((2, 4, 8, 7), "kernel_size: 3 pad: 1 stride: 2 group: 4", 8),     # depthwise, x2
    ((2, 3, 7, 7), "kernel_size: 3 pad: 2 dilation: 2 group: 3", 3),   # depthwise
])
def test_convolution_numba_equals_numpy(dtype, shape, fields, num_output):
    _both_paths(CONV % (num_output, fields), shape, dtype)


@needs_numba
@pytest.mark.parametrize("fields", [
    "pool: MAX kernel_size: 3 stride: 2",
    "pool: MAX kernel_size: 2 stride: 2 pad: 1",
    "pool: AVE kernel_size: 3 stride: 2 pad: 1",
    "pool: AVE kernel_h: 2 kernel_w: 3 stride: 1",
    "pool: MAX global_pooling: true",
    "pool: AVE global_pooling: true",
])
def test_pooling_numba_equals_numpy(fields):
    _both_paths('type: "Pooling" pooling_param { %s }' % fields, (2, 3, 9, 8))


@needs_numba
def test_max_pooling_ties_pick_the_first_maximum_like_numpy():
    x = np.zeros((1, 2, 6, 6))
    x[0, 0, 1:3, 1:3] = 1.0
    _both_paths('type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }',
                x.shape)
    layer = make_layer('type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }')
    run_layer(layer, make_blobs([x]), make_blobs(1))
    fast = layer.arg.copy()
    with kernels.disabled():
        run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(fast, layer.arg)


@needs_numba
@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_relu_numba_equals_numpy(slope):
    _both_paths('type: "ReLU" relu_param { negative_slope: %g }' % slope, (2, 3, 5, 4))


@needs_numba
@pytest.mark.parametrize("n", [3, 1])   # one image: its columns straight from x (no padded copy)
@pytest.mark.parametrize("geo", [
    ((3, 2), (1, 2), (2, 1), (1, 2)),
    ((7, 7), (3, 3), (2, 2), (1, 1)),   # a 7x7 stride 2 stem
    ((1, 1), (0, 0), (2, 2), (1, 1)),   # a 1x1 stride 2 projection
    ((3, 3), (0, 0), (3, 2), (1, 1)),   # the last window overhangs the input (taps read zeros)
    ((3, 3), (2, 2), (1, 1), (2, 2)),   # dilated
], ids=["mixed", "stem", "proj", "overhang", "dilated"])
def test_last_layout_kernels_equal_numpy(geo, n):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 2, 7, 6)).astype(np.float32)
    col = cpu.im2col(x, *geo, layout="last")
    r = rng.standard_normal(col.shape).astype(np.float32)
    back = cpu.col2im(r, x.shape, *geo, layout="last")
    with kernels.disabled():
        np.testing.assert_array_equal(col, cpu.im2col(x, *geo, layout="last"))
        np.testing.assert_allclose(back, cpu.col2im(r, x.shape, *geo, layout="last"),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fields,num_output", [
    ("kernel_size: 3 pad: 1 stride: 2 group: 4", 8),
    ("kernel_size: 3 pad: 2 dilation: 2 group: 4", 4),
])
def test_depthwise_gradient_and_naive(fields, num_output):
    """Runs the direct kernel when numba is on, the grouped GEMM otherwise."""
    x = np.random.default_rng(5).standard_normal((2, 4, 6, 5))
    layer = make_layer(CONV % (num_output, fields))
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    ref = naive_conv(x, layer.blobs[0].data, layer.blobs[1].data, layer.stride, layer.pad,
                     layer.dilation, layer.group)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)
    check_layer_gradient(layer, make_blobs([x]), make_blobs(1))


@needs_numba
@pytest.mark.parametrize("text", [
    'type: "BatchNorm" batch_norm_param { use_global_stats: true }',
    'type: "Scale" scale_param { bias_term: true }',
    'type: "Scale" scale_param { axis: 0 num_axes: 2 }',
    'type: "Softmax"',
    'type: "Softmax" softmax_param { axis: 2 }',
])
def test_channel_layers_numba_equal_numpy(text):
    if "BatchNorm" in text:
        layer_text = text

        def prime(layer):
            layer.blobs[1].data[...] = np.abs(layer.blobs[1].data) + 0.5
            layer.blobs[2].data[...] = 2.0
        x = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
        outs = []
        for off in (False, True):
            layer = make_layer(layer_text, dtype=np.float32)
            bottom, top = make_blobs([x], np.float32), make_blobs(1, np.float32)
            layer.setup(bottom, top)
            layer.blobs[0].data[...] = [0.1, -0.2, 0.3]
            prime(layer)
            if off:
                with kernels.disabled():
                    layer.forward(bottom, top)
            else:
                layer.forward(bottom, top)
            outs.append(top[0].data.copy())
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-6)
        return
    _both_paths(text, (2, 3, 4, 5))


@needs_numba
@pytest.mark.parametrize("shape", [(3, 5, 7), (17, 2, 40), (1, 4, 3)])
def test_conv_transposes_equal_numpy(shape):
    """image_to_rows (with the bias sum) and rows_to_image (with bias and leaky ReLU) against
    numpy's transposes."""
    k = kernels.get()
    rng = np.random.default_rng(5)
    n, m, p = shape
    dy = rng.standard_normal(shape).astype(np.float32)
    rows = np.empty((m, p * n), np.float32)
    bsum = np.full(m, 0.5)
    k.image_to_rows(dy, bsum, rows)
    np.testing.assert_array_equal(rows, dy.transpose(1, 2, 0).reshape(m, -1))
    np.testing.assert_allclose(bsum, 0.5 + dy.astype(np.float64).sum(axis=(0, 2)), rtol=1e-12)
    k.image_to_rows(dy, np.empty(0), rows)
    bias = rng.standard_normal(m).astype(np.float32)
    out = np.empty_like(dy)
    k.rows_to_image(rows, bias, 0.25, True, out)
    want = dy + bias[:, None]
    np.testing.assert_allclose(out, np.where(want > 0, want, want * 0.25), rtol=1e-6, atol=1e-6)
    k.rows_to_image(rows, np.empty(0, np.float32), 0.0, False, out)
    np.testing.assert_array_equal(out, dy)


@needs_numba
def test_convolution_backward_one_and_two_threads_agree():
    """The conv backward's dY transpose + bias sum runs in numba with threads, in numpy on one."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    text = CONV % (6, "kernel_size: 3 pad: 1")
    x = np.random.default_rng(2).standard_normal((5, 3, 8, 7))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        two = _forward_backward(text, x, np.float32)
        numba.set_num_threads(1)
        one = _forward_backward(text, x, np.float32)
    finally:
        numba.set_num_threads(before)
    for a, b in zip(two, one):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@needs_numba
def test_data_gradient_col2im_and_correlation_agree():
    """With numba, a convolution with >= dy_columns_min_outputs outputs per group takes
    W^T dY + col2im for its data gradient; the dY-column correlation gives the same numbers."""
    from caffepy.layers.conv import ConvolutionLayer
    text = CONV % (64, "kernel_size: 3 pad: 1 group: 1")
    x = np.random.default_rng(4).standard_normal((2, 3, 6, 5))
    by_col2im = _forward_backward(text, x, np.float64)
    old = ConvolutionLayer.dy_columns_min_outputs
    ConvolutionLayer.dy_columns_min_outputs = 1 << 30
    try:
        by_correlation = _forward_backward(text, x, np.float64)
    finally:
        ConvolutionLayer.dy_columns_min_outputs = old
    for a, b in zip(by_col2im, by_correlation):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


@needs_numba
@pytest.mark.parametrize("fields", [
    "kernel_size: 3 stride: 2", "kernel_size: 3 stride: 1 pad: 1", "kernel_size: 2 stride: 2",
    "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 1",
])
@pytest.mark.parametrize("pool", ["MAX", "AVE"])
def test_pooling_wide_rows_and_ties_equal_numpy(fields, pool):
    """Rows wide enough for the four-windows-at-once path, with many ties (rounded values)."""
    x = np.round(np.random.default_rng(6).standard_normal((2, 3, 21, 23)))
    text = 'type: "Pooling" pooling_param { pool: %s %s }' % (pool, fields)
    layer = make_layer(text)
    top = make_blobs(1)
    run_layer(layer, make_blobs([x]), top)
    fast = top[0].data.copy()
    fast_arg = layer.arg.copy() if pool == "MAX" else None
    with kernels.disabled():
        run_layer(layer, make_blobs([x]), top)
    if pool == "MAX":
        np.testing.assert_array_equal(fast, top[0].data)
        np.testing.assert_array_equal(fast_arg, layer.arg)
    else:
        np.testing.assert_allclose(fast, top[0].data, rtol=1e-12, atol=1e-12)


def _train_bn_and_scale(x, in_place):
    """BatchNorm (batch statistics) then Scale with bias, in place or not: the tops, the bottom
    diff and every param's data and diff after two forward / backward passes."""
    from caffepy.blob import Blob
    bn = make_layer('type: "BatchNorm" batch_norm_param { use_global_stats: false }',
                    dtype=np.float32)
    sc = make_layer('type: "Scale" scale_param { bias_term: true }', dtype=np.float32)
    bottom = make_blobs([x], np.float32)
    mid = bottom if in_place else make_blobs(1, np.float32)
    top = mid if in_place else make_blobs(1, np.float32)
    bn.setup(bottom, mid)
    sc.setup(mid, top)
    sc.blobs[0].data[...] = [0.5, -1.5, 2.0]
    sc.blobs[1].data[...] = [0.1, 0.2, -0.3]
    out = []
    for step in range(2):
        if in_place:
            bottom[0].data[...] = x + step
        bn.reshape(bottom, mid)
        sc.reshape(mid, top)
        bn.forward(bottom, mid)
        sc.forward(mid, top)
        out.append(top[0].data.copy())
        top[0].diff[...] = np.random.default_rng(step).standard_normal(top[0].shape)
        sc.backward(top, [True], mid)
        bn.backward(mid, [True], bottom)
        out.append(bottom[0].diff.copy())
    assert isinstance(bottom[0], Blob)
    return out + [b.data.copy() for b in bn.blobs + sc.blobs] + [b.diff.copy() for b in sc.blobs]


@needs_numba
@pytest.mark.parametrize("in_place", [False, True])
def test_batch_norm_training_and_scale_backward_numba_equal_numpy(in_place):
    """The fused kernels of training (BatchNorm's batch statistics, forward and backward, and
    Scale's backward) give the numpy path's tops, gradients and moving averages."""
    x = np.random.default_rng(3).standard_normal((4, 3, 5, 6)) * 3 + 1
    fast = _train_bn_and_scale(x, in_place)
    with kernels.disabled():
        slow = _train_bn_and_scale(x, in_place)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def _libm_pow(dtype):
    """The C library's powf / pow through ctypes (Caffe's caffe_powx without MKL), or None."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("m")
    if not name:
        return None
    fn = getattr(ctypes.CDLL(name), "powf" if dtype == np.float32 else "pow")
    c = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    fn.restype, fn.argtypes = c, [c, c]
    return lambda a, b: np.array([fn(float(v), float(b)) for v in a], dtype)


def _pow_sample(dtype):
    rng = np.random.default_rng(11)
    mags = rng.choice([1e-30, 1e-4, 1.0, 3.0, 1e4, 1e30], 4000)
    return np.concatenate([rng.random(4000) * mags, [0.0, 1.0, np.inf, 1e-45]]).astype(dtype)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b", [-0.75, 0.5, 2.0, -1.0 / 3])
def test_powx_is_the_c_librarys_pow_for_every_element(dtype, b):
    """LRN's scale^-beta as Caffe's caffe_powx computes it without MKL: std::pow per element."""
    libm = _libm_pow(dtype)
    if libm is None:
        pytest.skip("no C math library found by ctypes")
    a = _pow_sample(dtype)
    out = np.empty_like(a)
    kernels.get().powx(a, dtype(b), out)
    assert out.tobytes() == libm(a, b).tobytes()


@needs_numba
@pytest.mark.parametrize("shape", [(2, 7, 5, 9), (1, 6, 30, 40)])   # the second: 3 blocks
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lrn_across_channels_numba_equals_numpy(shape, dtype):
    """Both slide the window sums in Caffe's order; the numba path takes the C library's power
    (test above), numpy's path numpy's: bit for bit where numpy's power is the C library's (as
    on machines without AVX-512, where numpy has no SIMD power), else within a unit or two in the
    last place."""
    text = 'type: "LRN" lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 k: 2 }'
    x = np.random.default_rng(5).standard_normal(shape) * 3
    fast = _forward_backward(text, x, dtype)
    with kernels.disabled():
        slow = _forward_backward(text, x, dtype)
    libm = _libm_pow(dtype)
    sample = _pow_sample(dtype)
    with np.errstate(divide="ignore"):                  # 0 ** -0.75 is inf, as in C
        same_pow = libm is not None and \
            np.power(sample, dtype(-0.75)).tobytes() == libm(sample, -0.75).tobytes()
    for a, b in zip(fast, slow):
        if same_pow:
            assert a.tobytes() == b.tobytes()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6 if dtype == np.float32 else 1e-14)


@needs_numba
def test_omp_num_threads_is_followed_by_numba_and_openmp():
    """A user's OMP_NUM_THREADS=1 holds after numba's kernels load (its OpenMP layer would set the
    thread's OpenMP count, which oneDNN's primitives take, to all cores)."""
    import subprocess
    import sys
    code = ("import ctypes, numpy as np\n"
            "from caffepy.math import kernels\n"
            "k = kernels.get()\n"
            "a = np.ones(1000, np.float32); k.relu(a, np.float32(0), a)\n"
            "import numba\n"
            "print(numba.get_num_threads(), ctypes.CDLL('libgomp.so.1').omp_get_max_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_NUM_THREADS", "CAFFEPY_NUMBA")}
    env["OMP_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "1"], out.stdout


@needs_numba
@pytest.mark.parametrize("size", [100, cpu.PARALLEL_MIN + 7])
def test_flat_add_and_copy_equal_numpy(size):
    """Eltwise SUM's and Split's passes: the kernels (large arrays) and numpy (small ones) give
    the same floats, also in place."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
    out = np.empty_like(a)
    np.testing.assert_array_equal(cpu.add_into(a, b, out), a + b)
    np.testing.assert_array_equal(cpu.copy_into(b, out), b)
    want = a + b
    np.testing.assert_array_equal(cpu.add_into(a, b, a), want)
    strided = np.empty(2 * size, np.float32)[::2]      # not contiguous: numpy's pass
    np.testing.assert_array_equal(cpu.add_into(a, b, strided), a + b)
