"""Inference mode's oneDNN convolutions (caffepy.math.onednn_infer, caffepy.optimize_onednn)
against a direct loop and against the GEMM path. Skipped where oneDNN is not installed."""
import numpy as np
import pytest

from caffepy.math import kernels, onednn
from tests.layers.test_conv import naive_conv

from .test_optimize import FIRE, _compare, ran_onednn

pytestmark = pytest.mark.skipif(
    not onednn.available(),
    reason="oneDNN is not installed (pip install caffepy[onednn]) or CAFFEPY_ONEDNN=0")

# (x shape, M, kernel, stride, pad, dilation, bias, ReLU slope or None)
GEOMETRIES = [
    ((1, 5, 9, 8), 7, (3, 3), (1, 1), (1, 1), (1, 1), True, 0.0),
    ((2, 3, 10, 9), 4, (3, 3), (2, 2), (0, 0), (1, 1), False, None),   # floor drops a row
    ((2, 4, 9, 9), 6, (3, 2), (1, 2), (2, 1), (2, 1), True, 0.1),     # dilated, leaky ReLU
    ((3, 16, 6, 5), 8, (1, 1), (1, 1), (0, 0), (1, 1), True, 0.0),    # 1x1
    ((1, 3, 15, 13), 16, (7, 7), (2, 2), (3, 3), (1, 1), True, None),
]


def _reference(x, w, b, stride, pad, dilation, slope):
    y = naive_conv(x.astype(np.float64), w.astype(np.float64),
                   None if b is None else b.astype(np.float64), stride, pad, dilation, 1)
    return y if slope is None else np.where(y > 0, y, slope * y)


def _plan(x, w, b, stride, pad, dilation, slope, y_strides=None, weights=None):
    from caffepy.math.onednn_infer import InferConvPlan
    out = [(s + 2 * p - (d * (k - 1) + 1)) // st + 1
           for s, k, p, st, d in zip(x.shape[2:], w.shape[2:], pad, stride, dilation)]
    plan = InferConvPlan(x.shape, w, b, out, 1, stride, pad, dilation, relu=slope,
                         y_strides=y_strides, weights=weights)
    return plan, out


def _work(plan):
    return [np.empty(max(n, 1), np.float32) for n in plan.scratch]


@pytest.mark.parametrize("shape,m,kernel,stride,pad,dilation,bias,slope", GEOMETRIES)
def test_inference_plan_matches_a_direct_loop(shape, m, kernel, stride, pad, dilation, bias,
                                              slope):
    """conv + bias + fused (leaky) ReLU by one forward_inference primitive, into a plain array
    and into a channel slice of a larger one (a Concat's top); the weights are read once, when
    the plan is made."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((m, shape[1]) + kernel).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    want = _reference(x, w, b, stride, pad, dilation, slope)
    plan, out = _plan(x, w, b, stride, pad, dilation, slope)
    w[...] = np.nan                       # the plan holds its own (reordered) copy
    y = np.full((shape[0], m) + tuple(out), np.nan, np.float32)
    plan.forward(x, y, *_work(plan))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    big = np.full((shape[0], m + 5) + tuple(out), -7.0, np.float32)
    view = big[:, 2:2 + m]
    w = rng.standard_normal(w.shape).astype(np.float32)
    want = _reference(x, w, b, stride, pad, dilation, slope)
    plan, _ = _plan(x, w, b, stride, pad, dilation, slope, tuple(s // 4 for s in view.strides))
    plan.forward(x, view, *_work(plan))
    np.testing.assert_allclose(view, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert (big[:, :2] == -7).all() and (big[:, 2 + m:] == -7).all()     # nothing else written


def test_plans_of_one_layer_share_its_reordered_weights():
    """The plans of one layer (another batch, a part of the batch) reuse the weights it
    reordered first where oneDNN chose the same format."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    shared = []
    geo = ((1, 1), (1, 1), (1, 1), 0.0)
    a, _ = _plan(np.zeros((2, 8, 12, 12), np.float32), w, None, *geo, weights=shared)
    b, _ = _plan(np.zeros((2, 8, 12, 12), np.float32), w, None, *geo, weights=shared)
    assert b.w is a.w and len(shared) == 1


@pytest.fixture
def one_thread():
    from threadpoolctl import threadpool_limits
    before = kernels.threads()
    kernels.set_threads(1)
    try:
        with threadpool_limits(1, user_api="blas"):
            yield
    finally:
        kernels.set_threads(before)


@pytest.mark.skipif(not kernels.available(), reason="numba not installed")
def test_a_declined_geometry_keeps_the_gemm_step(monkeypatch, one_thread):
    """Where oneDNN has no implementation the step is the GEMM one, with its buffers sized,
    and the outputs still match the exact path."""
    from caffepy.math import onednn_infer

    def decline(*args, **kw):
        raise onednn.OneDNNError("oneDNN: convolution forward (inference) failed (test)")
    monkeypatch.setattr(onednn_infer, "InferConvPlan", decline)
    _, fast = _compare(FIRE, keep=["ip"], batch=2)
    assert ran_onednn(fast) == 0 and len(fast._plan.dnnl) > 0
    assert fast._plan.scratch.dnnl_x.size == 0


@pytest.mark.skipif(not kernels.available(), reason="numba not installed")
def test_switched_off_by_the_environment_switch(one_thread):
    with onednn.disabled():
        _, fast = _compare(FIRE, keep=["ip"], batch=1)
    assert ran_onednn(fast) == 0
    _, fast = _compare(FIRE, keep=["ip"], batch=1)
    assert ran_onednn(fast) > 0 and fast._plan.scratch.dnnl_x.size > 0


@pytest.mark.skipif(not kernels.available(), reason="numba not installed")
def test_more_threads_keep_the_gemm_steps(monkeypatch):
    """A plan compiled under more than one OpenMP (numba) thread keeps the GEMM steps (faster
    there), unless OMP_NUM_THREADS=1."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba runs one thread here")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = kernels.threads()
    kernels.set_threads(2)
    try:
        _, fast = _compare(FIRE, keep=["ip"], batch=1)
        assert ran_onednn(fast) == 0
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        _, fast = _compare(FIRE, keep=["ip"], batch=1)
        assert ran_onednn(fast) > 0
    finally:
        kernels.set_threads(before)

