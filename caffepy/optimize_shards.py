"""Batch shards: inference mode's forward pass split over the images, one thread per part.

OpenBLAS and numba split each layer over their threads and wait at its end for the slowest;
between layers OpenBLAS's threads spin for a while and take the core the next numba kernel
needs (see caffepy.optimize_threads). With a batch of N >= 2 images a forward pass can instead
be split over the images: T threads each run the steps on their N / T images with one BLAS
and one numba thread (BLAS calls from several threads at once are safe with one thread each;
numba's thread count is per calling thread), and meet only at the steps that need the whole
batch. Nothing is shared between the parts but the weights (read only); each part has its own
column buffer. A step runs on part of the batch when it is a compiled step over 4-d blobs
whose first axis is the batch (convolution, depthwise convolution, pooling, LRN, the copies of
a Concat); any other step (InnerProduct, Softmax, a layer of another kind) runs on the whole
batch in the calling thread, between two rounds of parts. :class:`caffepy.optimize_threads.
ThreadChoice` runs this setting, ``(1, 1, T)``, when it has been the fastest.
"""
import concurrent.futures
import os
import threading

from . import optimize_steps as steps_mod

_pools = {}
_lock = threading.Lock()
if hasattr(os, "register_at_fork"):       # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_pools.clear)


def _one_numba_thread():
    from .math import kernels
    kernels.set_threads(1)


def _pool(workers):
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = concurrent.futures.ThreadPoolExecutor(
                workers, thread_name_prefix="caffepy-shard", initializer=_one_numba_thread)
        return pool


def parts(n, t):
    """[(lo, hi)] of t nearly equal runs of n images (none empty)."""
    t = max(1, min(t, n))
    return [(n * k // t, n * (k + 1) // t) for k in range(t)]


def _batch_axis_ok(st, n):
    return all(b.num_axes == 4 and b.shape[0] == n for b in list(st.bottom) + list(st.top))


def compile_shards(plan):
    """Forget the per-part closures (the buffers changed); :func:`segments` rebuilds them."""
    plan.segments = {}


def segments(plan, t):
    """The forward pass split into ``t`` parts of the batch: a list of ``("all", [run, ...])``
    (whole batch, calling thread) and ``("parts", [[run, ...] per part])``; None when the
    batch has fewer than 2 images or no step can run on part of it. Built once per ``t``."""
    if t in plan.segments:
        return plan.segments[t]
    plan.segments[t] = None
    if not plan.compiled or not plan.steps or not plan.steps[0].top:
        return None
    n = plan.steps[0].top[0].shape[0]
    ranges = parts(n, t)
    if len(ranges) < 2:
        return None
    scratches = [steps_mod.Scratch(plan.scratch.dtype) for _ in ranges]
    for st in plan.steps:                   # size every part's buffers before any closure
        if steps_mod.conv_eligible(st.layer, len(st.bottom)) and _batch_axis_ok(st, n):
            x = st.bottom[0].data
            for (lo, hi), sc in zip(ranges, scratches):
                steps_mod.conv_buffers(st.layer, x[lo:hi], sc)
    segs, split = [], 0
    for st in plan.steps:
        runs = None
        if _batch_axis_ok(st, n):
            runs = [steps_mod._closure(plan, st, r, sc) for r, sc in zip(ranges, scratches)]
            if any(r is None for r in runs):
                runs = None
        if runs is None:
            if not segs or segs[-1][0] != "all":
                segs.append(("all", []))
            segs[-1][1].append(st.run)
            continue
        split += 1
        if not segs or segs[-1][0] != "parts":
            segs.append(("parts", [[] for _ in ranges]))
        for acc, run in zip(segs[-1][1], runs):
            acc.append(run)
    if split:
        plan.segments[t] = segs
    return plan.segments[t]


def _run_all(runs):
    loss = 0.0
    for run in runs:
        r = run()
        if r:
            loss += r
    return loss


def run_sharded(segs):
    """One forward pass over ``segs`` (from :func:`segments`; the caller has set one BLAS and
    one numba thread)."""
    pool = _pool(max(len(r) for k, r in segs if k == "parts") - 1)
    loss = 0.0
    for kind, runs in segs:
        if kind == "all":
            loss += _run_all(runs)
            continue
        futures = [pool.submit(_run_all, part) for part in runs[1:]]
        try:
            loss += _run_all(runs[0])
        finally:
            for f in futures:
                loss += f.result()
    return loss
