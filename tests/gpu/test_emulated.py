"""The GPU path on the emulated device (kernels built for the host, numpy column-major BLAS): every
GPU layer against the CPU path and the gradient checker, the fused solver updates against the CPU
rules, Dropout and stochastic pooling against the Philox reference, and LeNet steps GPU vs CPU.
Runs anywhere with a C++ compiler; the same checks on a real device are in test_cuda.py."""
import numpy as np
import pytest

from caffepy import common
from caffepy.gpu import random as grandom
from caffepy.gpu import solvers as gsolvers
from caffepy.solvers import SOLVERS, get_solver
from caffepy.testing import make_blobs, make_layer

from . import cases
from .nets import lenet_solver_param, synthetic

GRAD_CASES = [c for c, v in cases.CASES.items() if v[3].get("grad", True)]


@pytest.mark.parametrize("case", sorted(cases.CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_matches_cpu(emulated, case, dtype):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    cases.compare(case, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", GRAD_CASES)
def test_layer_gradient(emulated, case):
    cases.gradient_check(case)


def test_gpu_implementations_cover_the_core_layer_types(emulated):
    from caffepy.gpu.layers import registered_types
    for t in ("Convolution", "InnerProduct", "Pooling", "LRN", "Softmax", "SoftmaxWithLoss",
              "BatchNorm", "ReLU", "Sigmoid", "TanH", "Dropout", "EuclideanLoss",
              "SigmoidCrossEntropyLoss", "Concat", "Slice", "Split", "Eltwise"):
        assert t in registered_types()


def test_subclass_without_gpu_impl_keeps_its_cpu_path(emulated):
    from caffepy.layers.neuron import ReLULayer

    class Doubling(ReLULayer):
        def forward_cpu(self, bottom, top):
            top[0].data[...] = 2 * bottom[0].data

    layer = Doubling(make_layer('type: "ReLU"').layer_param, dtype=np.float64)
    bottom, top = make_blobs([np.array([-1.0, 3.0])]), make_blobs(1)
    common.set_mode_gpu()
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    np.testing.assert_array_equal(top[0].data, [-2.0, 6.0])


def test_dropout_train_uses_the_philox_mask(emulated):
    x = np.random.default_rng(0).standard_normal((3, 50))
    layer = make_layer('type: "Dropout" dropout_param { dropout_ratio: 0.4 }',
                       phase=cases.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    common.set_mode_gpu()
    common.set_random_seed(3)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    keep = grandom.reference_uniform(x.size, layer._gpu_seed).reshape(x.shape) >= 0.4
    np.testing.assert_allclose(top[0].data, x * keep / 0.6)
    top[0].diff[...] = 1
    layer.backward(top, [True], bottom)
    np.testing.assert_allclose(bottom[0].diff, keep / 0.6)
    assert 0.5 < keep.mean() < 0.7


def test_stochastic_pooling_train_matches_cpu_with_the_same_uniforms(emulated):
    from caffepy.layers.pooling import stochastic_pool
    x = np.abs(np.random.default_rng(2).standard_normal((2, 3, 7, 6))) + 0.1
    layer = make_layer('type: "Pooling" pooling_param { pool: STOCHASTIC kernel_size: 3 '
                       'stride: 2 }', phase=cases.TRAIN)
    bottom, top = make_blobs([x]), make_blobs(1)
    common.set_mode_gpu()
    common.set_random_seed(5)
    layer.setup(bottom, top)
    seed_gen = np.random.default_rng(5)
    layer.forward(bottom, top)
    u = grandom.reference_uniform(top[0].count, int(seed_gen.integers(0, 2 ** 63)))
    y, arg = stochastic_pool(x, layer.geom, u.reshape(top[0].shape))
    np.testing.assert_allclose(top[0].data, y)
    top[0].diff[...] = 1
    layer.backward(top, [True], bottom)
    assert bottom[0].diff.sum() == pytest.approx(top[0].count)


@pytest.mark.parametrize("solver_type", sorted(SOLVERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reg", ["L2", "L1"])
def test_fused_update_matches_cpu_rule(emulated, solver_type, dtype, reg):
    param = lenet_solver_param(4, solver_type)
    param.regularization_type = reg
    param.clip_gradients = 0.5
    param.iter_size = 2
    r = np.random.default_rng(0)
    n = 37
    w0, g0 = r.standard_normal(n).astype(dtype), r.standard_normal(n).astype(dtype)
    nh = SOLVERS[solver_type].n_history
    h0 = [np.abs(r.standard_normal(n)).astype(dtype) for _ in range(nh)]
    dt = np.dtype(dtype).type
    clip, norm, decay, rate, t = dt(0.7), dt(0.5), dt(0.01), dt(0.03), 5
    g = g0 * clip * norm
    g = g + decay * (w0 if reg == "L2" else np.sign(w0))
    hist = [h.copy() for h in h0]
    SOLVERS[solver_type].update_rule(g, hist, rate, param, t)
    dev = emulated
    w_d, g_d, h_d = w0.copy(), g0.copy(), [h.copy() for h in h0]
    gsolvers.update(dev, solver_type, w_d, g_d, h_d, param, rate, t, clip, norm, decay,
                    reg == "L1")
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(g_d, g, rtol=tol, atol=tol)
    np.testing.assert_allclose(w_d, w0 - g, rtol=tol, atol=tol)
    for a, b in zip(h_d, hist):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _lenet_losses(mode, solver_type, steps, device_update=False):
    common.set_mode_cpu()
    common.set_random_seed(1)
    solver = get_solver(lenet_solver_param(8, solver_type), dtype=np.float64)
    x, y = synthetic(8 * steps)
    (common.set_mode_gpu if mode == "gpu" else common.set_mode_cpu)()
    losses = []
    try:
        for i in range(steps):
            solver.net.blobs["data"].data[...] = x[8 * i:8 * i + 8]
            solver.net.blobs["label"].data[...] = y[8 * i:8 * i + 8]
            if device_update:
                solver.net.clear_param_diffs()
                losses.append(solver.net.forward_backward())
                gsolvers.apply_update(solver)
                solver.iter += 1
            else:
                solver.step(1)
                losses.append(float(solver.net.blobs["loss"].data))
        weights = [p.data.copy() for p in solver.net.learnable_params]
        gsolvers.sync_history(solver)
        return losses, weights, [h.copy() for h in solver.history]
    finally:
        common.set_mode_cpu()


@pytest.mark.parametrize("solver_type", ["SGD", "Adam"])
def test_lenet_steps_on_the_gpu_path_match_cpu(emulated, solver_type):
    cpu = _lenet_losses("cpu", solver_type, 3)
    dev = _lenet_losses("gpu", solver_type, 3)
    fused = _lenet_losses("gpu", solver_type, 3, device_update=True)
    for other in (dev, fused):
        np.testing.assert_allclose(other[0], cpu[0], rtol=1e-9)
        for a, b in zip(other[1], cpu[1]):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)
        for a, b in zip(other[2], cpu[2]):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)


def _ssl_weights(mode, steps=3):
    """LeNet with Structured Sparsity Learning fields: group lasso on conv1, L1 on ip1."""
    common.set_mode_cpu()
    common.set_random_seed(1)
    param = lenet_solver_param(8, "SGD")
    param.breadth_decay, param.kernel_shape_decay = 0.01, 0.02
    layers = {lp.name: lp for lp in param.net_param.layer}
    layers["conv1"].param[0].breadth_decay_mult = 1.0
    layers["conv1"].param[0].kernel_shape_decay_mult = 1.0
    layers["ip1"].param[0].regularization_type.append("L1")
    solver = get_solver(param, dtype=np.float64)
    assert solver.sparsity is not None
    x, y = synthetic(8 * steps)
    (common.set_mode_gpu if mode == "gpu" else common.set_mode_cpu)()
    try:
        for i in range(steps):
            solver.net.blobs["data"].data[...] = x[8 * i:8 * i + 8]
            solver.net.blobs["label"].data[...] = y[8 * i:8 * i + 8]
            solver.step(1)
        return [p.data.copy() for p in solver.net.learnable_params]
    finally:
        common.set_mode_cpu()


def test_ssl_update_in_gpu_mode_matches_cpu(emulated):
    for a, b in zip(_ssl_weights("gpu"), _ssl_weights("cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)
