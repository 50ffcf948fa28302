"""The GPU path on a real CUDA device (pycuda + cuBLAS). Marked ``gpu``: skipped, with the reason,
where pycuda or a device is missing. The same layer cases as the emulated tests, plus cuBLAS on
device memory, the fused solver kernels, and LeNet trained on MNIST with solver_mode GPU."""
import numpy as np
import pytest

from caffepy import common
from caffepy.gpu import random as grandom
from caffepy.gpu import solvers as gsolvers
from caffepy.solvers import SOLVERS, get_solver

from . import cases
from .nets import lenet_solver_param, mnist

pytestmark = pytest.mark.gpu

GRAD_CASES = [c for c, v in cases.CASES.items() if v[3].get("grad", True)]


@pytest.mark.parametrize("case", sorted(cases.CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_matches_cpu(cuda, case, dtype):
    tol = 2e-4 if dtype == np.float32 else 1e-9
    cases.compare(case, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", GRAD_CASES)
def test_layer_gradient(cuda, case):
    cases.gradient_check(case)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cublas_gemm_row_major(cuda, ta, tb, dtype):
    m, n, k = 33, 17, 65
    r = np.random.default_rng(0)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c0 = r.standard_normal((m, n)).astype(dtype)
    c = cuda.to_device(c0)
    cuda.blas.gemm(ta, tb, m, n, k, 0.5, cuda.to_device(a), cuda.to_device(b), 2.0, c)
    want = 0.5 * (a.T if ta else a) @ (b.T if tb else b) + 2.0 * c0
    np.testing.assert_allclose(cuda.to_host(c).reshape(m, n), want, rtol=1e-4, atol=1e-4)


def test_cublas_tf32_is_opt_in(cuda):
    r = np.random.default_rng(1)
    a, b = r.standard_normal((64, 256)).astype(np.float32), r.standard_normal((256, 64)).astype(
        np.float32)
    exact = a.astype(np.float64) @ b
    out = []
    for tf32 in (False, True):
        cuda.blas.set_tf32(tf32)
        c = cuda.empty(64 * 64, np.float32)
        cuda.blas.gemm(False, False, 64, 64, 256, 1.0, cuda.to_device(a), cuda.to_device(b), 0.0,
                       c)
        out.append(np.abs(cuda.to_host(c).reshape(64, 64) - exact).max())
    cuda.blas.set_tf32(False)
    assert out[0] < 1e-3 and out[1] < 0.5


def test_cublas_level1(cuda):
    x = np.arange(-3, 7, dtype=np.float32)
    y = np.ones(10, dtype=np.float32)
    xd, yd = cuda.to_device(x), cuda.to_device(y)
    assert cuda.blas.dot(10, xd, yd) == pytest.approx(x.sum())
    assert cuda.blas.asum(10, xd) == pytest.approx(np.abs(x).sum())
    cuda.blas.axpy(10, 2.0, xd, yd)
    cuda.blas.scal(10, 0.5, yd)
    np.testing.assert_allclose(cuda.to_host(yd), 0.5 * (2 * x + 1))


def test_kernels_compiled_once_per_context_and_dtype(cuda):
    before = cuda.cache.compiles
    cuda.kernels("util", np.float32)
    cuda.kernels("util", np.float64)
    mid = cuda.cache.compiles
    cuda.kernels("util", np.float32)
    assert cuda.cache.compiles == mid and mid - before <= 2


def test_device_philox_matches_reference(cuda):
    y = cuda.empty(1000, np.float64)
    grandom.uniform(cuda, y, seed=99)
    np.testing.assert_allclose(cuda.to_host(y), grandom.reference_uniform(1000, 99), rtol=1e-15)
    g = cuda.empty(100000, np.float32)
    grandom.gaussian(cuda, g, 1.0, 2.0, seed=5)
    v = cuda.to_host(g)
    assert abs(v.mean() - 1.0) < 0.03 and abs(v.std() - 2.0) < 0.03


@pytest.mark.parametrize("solver_type", sorted(SOLVERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_update_matches_cpu_rule(cuda, solver_type, dtype):
    param = lenet_solver_param(4, solver_type)
    r = np.random.default_rng(0)
    n = 10007
    w0, g0 = r.standard_normal(n).astype(dtype), r.standard_normal(n).astype(dtype)
    h0 = [np.abs(r.standard_normal(n)).astype(dtype) for _ in range(SOLVERS[solver_type].n_history)]
    dt = np.dtype(dtype).type
    decay, rate, t = dt(0.01), dt(0.03), 7
    g = g0 + decay * w0
    hist = [h.copy() for h in h0]
    SOLVERS[solver_type].update_rule(g, hist, rate, param, t)
    w_d, g_d = cuda.to_device(w0), cuda.to_device(g0)
    h_d = [cuda.to_device(h) for h in h0]
    gsolvers.update(cuda, solver_type, w_d, g_d, h_d, param, rate, t, decay=decay)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cuda.to_host(g_d), g, rtol=tol, atol=tol)
    np.testing.assert_allclose(cuda.to_host(w_d), w0 - g, rtol=tol, atol=tol)
    for a, b in zip(h_d, hist):
        np.testing.assert_allclose(cuda.to_host(a), b, rtol=tol, atol=tol)


@pytest.mark.slow
def test_lenet_trains_on_mnist_with_solver_mode_gpu(cuda):
    x, y = mnist("train")
    xt, yt = mnist("test")
    batch = 64
    param = lenet_solver_param(batch)
    assert param.solver_mode == param.GPU
    common.set_random_seed(1)
    common.set_mode_gpu()               # what `caffepy train` does for solver_mode: GPU
    try:
        solver = get_solver(param)
        net = solver.net
        for i in range(1500):
            j = (i * batch) % (len(x) - batch)
            net.blobs["data"].data[...] = x[j:j + batch]
            net.blobs["label"].data[...] = y[j:j + batch]
            solver.step(1)
        assert float(net.blobs["loss"].data) < 0.3
        correct = 0
        for j in range(0, 10000, batch):
            xb, yb = xt[j:j + batch], yt[j:j + batch]
            if len(xb) < batch:
                break
            net.blobs["data"].data[...] = xb
            net.blobs["label"].data[...] = yb
            net.forward()
            correct += int((net.blobs["ip2"].data.argmax(axis=1) == yb).sum())
        assert correct / (10000 // batch * batch) > 0.97
    finally:
        common.set_mode_cpu()


CONV_CASES = sorted(c for c in cases.CASES if c.startswith("conv"))


def test_cudnn_loads_on_the_device(cuda):
    from caffepy.gpu import cudnn
    assert cuda.cudnn is not None, "cuDNN did not load: convolutions would use im2col"
    assert cudnn.version() >= 8000


@pytest.mark.parametrize("engine", ["off", "on", "benchmark"])
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convolution_engines_match_cpu(cuda, monkeypatch, engine, case, dtype):
    """im2col + cuBLAS (off), cuDNN by heuristics (on) and by timing (benchmark) against the CPU;
    the cuDNN runs must really go through cuDNN."""
    from caffepy.gpu import cudnn
    calls = []
    orig_f, orig_b = cudnn.ConvPlan.forward, cudnn.ConvPlan.backward
    monkeypatch.setattr(cudnn.ConvPlan, "forward",
                        lambda self, *a, **k: (calls.append("f"), orig_f(self, *a, **k))[1])
    monkeypatch.setattr(cudnn.ConvPlan, "backward",
                        lambda self, *a, **k: (calls.append("b"), orig_b(self, *a, **k))[1])
    monkeypatch.setenv("CAFFEPY_CUDNN_BENCHMARK", "1" if engine == "benchmark" else "0")
    cudnn.set_mode("off" if engine == "off" else "on")
    try:
        tol = 2e-4 if dtype == np.float32 else 1e-9
        cases.compare(case, dtype, rtol=tol, atol=tol)
    finally:
        cudnn.set_mode(None)
    assert ("f" in calls and "b" in calls) == (engine != "off")


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_cudnn_gradient(cuda, case):
    from caffepy.gpu import cudnn
    cudnn.set_mode("on")
    try:
        cases.gradient_check(case)
    finally:
        cudnn.set_mode(None)


@pytest.mark.parametrize("case, uses_cudnn", [("conv", True), ("conv_engine_caffe", False)])
def test_engine_field_picks_the_path(cuda, monkeypatch, case, uses_cudnn):
    from caffepy.gpu import cudnn
    calls = []
    orig = cudnn.ConvPlan.forward
    monkeypatch.setattr(cudnn.ConvPlan, "forward",
                        lambda self, *a, **k: (calls.append(1), orig(self, *a, **k))[1])
    cudnn.set_mode("auto")
    try:
        cases.run(case, np.float32, True)
    finally:
        cudnn.set_mode(None)
    assert bool(calls) is uses_cudnn
