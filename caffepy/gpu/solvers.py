"""Fused solver updates on the device: one kernel per rule does normalize (1 / iter_size) ->
regularize (L2 / L1) -> the update rule -> apply, per element, in the parameter's dtype.

The arithmetic is that of ``caffepy.solvers.sgd`` / ``adaptive`` (see their docstrings): on exit
``g`` holds the step (as Caffe's diff after ComputeUpdateValue) and, when ``apply`` is 1,
``w -= g`` is done too (Caffe's Net::Update). All scalars are ``Dtype``: the double path has no
float anywhere (Caffe's Adam kernel had).

:func:`apply_update` runs a whole ``SGDSolver.apply_update`` step on the device (learning rate,
clipping by the global L2 norm through cuBLAS, then the fused kernel per parameter), keeping the
history in device mirrors of ``solver.history``; :func:`sync_history` copies it back before a
snapshot. The solver loop calls them in GPU mode (see docs/architecture.md).
"""
import math

import numpy as np

from .kernels import register_source

SOURCE = register_source("solvers", r"""
__device__ __forceinline__ Dtype regularized_(const Dtype g, const Dtype w, const Dtype clip,
    const Dtype norm, const Dtype decay, const int l1) {
  Dtype r = g;
  if (clip != (Dtype)1) r *= clip;
  if (norm != (Dtype)1) r *= norm;
  if (decay != (Dtype)0) r += decay * (l1 ? (Dtype)((w > 0) - (w < 0)) : w);
  return r;
}
__global__ void sgd_update(const int n, Dtype* w, Dtype* g, Dtype* h, const Dtype clip,
    const Dtype norm, const Dtype decay, const int l1, const Dtype rate, const Dtype momentum,
    const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype hi = momentum * h[i] + rate * gi;
    h[i] = hi;
    g[i] = hi;
    if (apply) w[i] -= hi;
  }
}
__global__ void nesterov_update(const int n, Dtype* w, Dtype* g, Dtype* h, const Dtype clip,
    const Dtype norm, const Dtype decay, const int l1, const Dtype rate, const Dtype momentum,
    const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype prev = h[i];
    const Dtype hi = momentum * prev + rate * gi;
    h[i] = hi;
    const Dtype step = (momentum + (Dtype)1) * hi - momentum * prev;
    g[i] = step;
    if (apply) w[i] -= step;
  }
}
__global__ void adagrad_update(const int n, Dtype* w, Dtype* g, Dtype* h, const Dtype clip,
    const Dtype norm, const Dtype decay, const int l1, const Dtype rate, const Dtype delta,
    const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype hi = h[i] + gi * gi;
    h[i] = hi;
    const Dtype step = rate * (gi / (sqrt(hi) + delta));
    g[i] = step;
    if (apply) w[i] -= step;
  }
}
__global__ void rmsprop_update(const int n, Dtype* w, Dtype* g, Dtype* h, const Dtype clip,
    const Dtype norm, const Dtype decay, const int l1, const Dtype rate, const Dtype rms_decay,
    const Dtype delta, const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype hi = ((Dtype)1 - rms_decay) * (gi * gi) + rms_decay * h[i];
    h[i] = hi;
    const Dtype step = rate * (gi / (sqrt(hi) + delta));
    g[i] = step;
    if (apply) w[i] -= step;
  }
}
__global__ void adadelta_update(const int n, Dtype* w, Dtype* g, Dtype* h1, Dtype* h2,
    const Dtype clip, const Dtype norm, const Dtype decay, const int l1, const Dtype rate,
    const Dtype momentum, const Dtype delta, const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype a = ((Dtype)1 - momentum) * (gi * gi) + momentum * h1[i];
    h1[i] = a;
    gi = gi * sqrt((h2[i] + delta) / (a + delta));
    h2[i] = ((Dtype)1 - momentum) * (gi * gi) + momentum * h2[i];
    const Dtype step = gi * rate;
    g[i] = step;
    if (apply) w[i] -= step;
  }
}
__global__ void adam_update(const int n, Dtype* w, Dtype* g, Dtype* m, Dtype* v,
    const Dtype clip, const Dtype norm, const Dtype decay, const int l1, const Dtype rate_corr,
    const Dtype beta1, const Dtype beta2, const Dtype delta, const int apply) {
  CUDA_KERNEL_LOOP(i, n) {
    const Dtype gi = regularized_(g[i], w[i], clip, norm, decay, l1);
    const Dtype mi = ((Dtype)1 - beta1) * gi + beta1 * m[i];
    const Dtype vi = ((Dtype)1 - beta2) * (gi * gi) + beta2 * v[i];
    m[i] = mi;
    v[i] = vi;
    const Dtype step = rate_corr * (mi / (sqrt(vi) + delta));
    g[i] = step;
    if (apply) w[i] -= step;
  }
}
""")

KERNEL_OF = {"SGD": "sgd_update", "Nesterov": "nesterov_update", "AdaGrad": "adagrad_update",
             "RMSProp": "rmsprop_update", "AdaDelta": "adadelta_update", "Adam": "adam_update"}


def rule_scalars(solver_type, param, local_rate, t, dtype):
    """The rule-specific scalar arguments (after ``rate``-position) in the CPU rule's dtype
    arithmetic: returns (rate, extra...) ready for the kernel."""
    dt = np.dtype(dtype).type
    rate = dt(local_rate)
    if solver_type in ("SGD", "Nesterov"):
        return (rate, dt(param.momentum))
    if solver_type == "AdaGrad":
        return (rate, dt(param.delta))
    if solver_type == "RMSProp":
        return (rate, dt(param.rms_decay), dt(param.delta))
    if solver_type == "AdaDelta":
        return (rate, dt(param.momentum), dt(param.delta))
    if solver_type == "Adam":
        b1, b2 = dt(param.momentum), dt(param.momentum2)
        corr = dt(math.sqrt(1.0 - math.pow(float(b2), t)) / (1.0 - math.pow(float(b1), t)))
        return (rate * corr, b1, b2, dt(param.delta))
    raise ValueError("no GPU update rule for solver type '%s'" % solver_type)


def update(dev, solver_type, w, g, hist, param, local_rate, t, clip=1.0, norm=1.0, decay=0.0,
           l1=False, apply=True):
    """One fused update of device arrays w, g (and the history arrays ``hist``)."""
    dtype = g.dtype
    dt = np.dtype(dtype).type
    kern = getattr(dev.kernels("solvers", dtype), KERNEL_OF[solver_type])
    rate, *extra = rule_scalars(solver_type, param, local_rate, t, dtype)
    kern(g.size, w, g, *hist, dt(clip), dt(norm), dt(decay), int(bool(l1)), rate, *extra,
         int(bool(apply)))


def _history_mirrors(solver):
    """Device mirrors of ``solver.history``, kept alive on the solver (looked up by host memory)."""
    from ..blob import _synced_memory
    mems = [_synced_memory(h) for h in solver.history]
    solver._gpu_history = mems
    return mems


def apply_update(solver):
    """``SGDSolver.apply_update`` on the device (same log lines, same arithmetic)."""
    from .. import gpu
    from ..log import fmt, info
    dev = gpu.current()
    rate = solver.get_learning_rate()
    solver.lr = rate
    p = solver.param
    if p.display and solver.iter % p.display == 0:
        info("sgd_solver.cpp:112", "Iteration %d, lr = %s" % (solver.iter, fmt(rate)))
    params = solver.net.learnable_params
    clip = 1.0
    if p.clip_gradients >= 0:
        sumsq = sum(dev.blas.dot(q.count, q.gpu_diff, q.gpu_diff) for q in params)
        l2norm = math.sqrt(sumsq)
        if l2norm > p.clip_gradients:
            clip = p.clip_gradients / l2norm
            info("sgd_solver.cpp:93", "Gradient clipping: scaling down gradients (L2 norm %s > %s) "
                 "by scale factor %s" % (fmt(l2norm), fmt(p.clip_gradients), fmt(clip)))
    mems = _history_mirrors(solver)
    n = len(params)
    for pid, q in enumerate(params):
        dt = q.dtype.type
        norm = dt(1.0) / dt(p.iter_size) if p.iter_size != 1 else 1.0
        decay = dt(p.weight_decay) * dt(solver.net.params_weight_decay[pid])
        local_rate = dt(rate) * dt(solver.net.params_lr[pid])
        hist = [mems[k * n + pid].mutable_gpu() for k in range(solver.n_history)]
        update(dev, solver.type, q.mutable_gpu_data, q.mutable_gpu_diff, hist, p, local_rate,
               solver.iter + 1, clip, norm, decay, p.regularization_type != "L2", apply=True)


def sync_history(solver):
    """Copy the device history back into ``solver.history`` (before a snapshot)."""
    for m in getattr(solver, "_gpu_history", None) or ():
        m.cpu()


def reset_history(solver):
    """Forget the device history (after ``restore`` rewrote ``solver.history`` on the host)."""
    solver._gpu_history = None
