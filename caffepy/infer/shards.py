"""Batch shards: inference mode's forward pass split over the images, one thread per part.

OpenBLAS and numba split each layer over their threads and wait at its end for the slowest;
between layers OpenBLAS's threads spin for a while and take the core the next numba kernel needs
(see caffepy.infer.threads). With a batch of N >= 2 images a forward pass can instead be
split over the images: T threads each run the steps on their N / T images with one BLAS and one
numba thread (BLAS calls from several threads at once are safe with one thread each; numba's
thread count is per calling thread), and meet only at the steps that need the whole batch.
Nothing is shared between the parts but the weights (read only): each part has its own column
buffers and its own memory for the blobs (see :class:`_Parts`). A step runs on part of the batch
when it is a compiled step over 4-d blobs whose first axis is the batch (convolution, depthwise
convolution, pooling, LRN, the copies of a Concat, an Eltwise SUM of two bottoms); any other
step (InnerProduct, Softmax, a layer of another kind) runs on the whole batch in the calling
thread, between two rounds of parts. :class:`caffepy.infer.threads.ThreadChoice` runs this
setting, ``(1, 1, T)``, when it has been the fastest.
"""
import numpy as np

from . import steps as steps_mod
from .. import common
from ..blob import Blob


def _one_numba_thread():
    from ..math import kernels
    kernels.set_threads(1)


def _pool(workers):
    return common.thread_pool("caffepy-shard", workers, _one_numba_thread)


def parts(n, t):
    """[(lo, hi)] of t nearly equal runs of n images (none empty)."""
    t = max(1, min(t, n))
    return [(n * k // t, n * (k + 1) // t) for k in range(t)]


def threadsafe():
    """Whether numba's threading layer lets several threads launch parallel kernels at once
    (OpenMP and TBB do; the 'workqueue' fallback aborts the process). Known only once a
    parallel kernel has run: False before."""
    import numba
    try:
        return numba.threading_layer() in ("omp", "tbb")
    except ValueError:
        return False


def _batch_axis_ok(st, n):
    return all(b.num_axes == 4 and b.shape[0] == n for b in list(st.bottom) + list(st.top))


def compile_shards(plan):
    """Forget the per-part closures (the buffers changed); :func:`segments` rebuilds them."""
    plan.segments = {}


def _touched(plan, st, tops_only=False):
    """ids of the blobs a part step reads or writes (only writes: ``tops_only``); a
    convolution written into a Concat's slice writes the Concat's top."""
    out = [] if tops_only else [id(b) for b in st.bottom if id(b) not in plan.into]
    for b in st.top:
        into = plan.into.get(id(b))
        out.append(id(into[0]) if into is not None else id(b))
    return out


class _Parts(object):
    """Each part's own memory for the blobs its steps touch: the net's buffers are shared by
    blobs of different sizes (caffepy.infer.plan's liveness), so image i of one blob and image j
    of another may lie in the same memory, and parts running at once must not share them.
    Blobs the net keeps (own memory) are used in place, each part its images; a blob that
    also an 'all' step reads or writes is copied between the net's buffer and the parts'
    (``scatter`` before a round of parts, ``gather`` after it, in the calling thread)."""

    def __init__(self, plan, split, ranges):
        keep = {id(plan.net.blobs[n]) for n in plan.keep
                if isinstance(plan.net.blobs.get(n), Blob)}
        rounds, k = [], 0                      # (first, last) step of each round of parts
        while k < len(plan.steps):
            e = k
            while e + 1 < len(plan.steps) and split[e + 1] == split[k]:
                e += 1
            if split[k]:
                rounds.append((k, e))
            k = e + 1
        by_id = {id(cat): cat for cat, _ in plan.into.values()}
        by_id.update((id(b), b) for st in plan.steps for b in list(st.bottom) + list(st.top))
        first, last, blobs, in_all = {}, {}, {}, set()
        for k, st in enumerate(plan.steps):
            if not split[k]:
                in_all.update(id(b) for b in list(st.bottom) + list(st.top))
                continue
            for bid in _touched(plan, st):
                blobs[bid] = by_id[bid]
                first.setdefault(bid, k)
                last[bid] = k
        self.scatter, self.gather = {}, {}     # round's first step -> [blob]
        for bid, b in blobs.items():
            if bid in keep or bid not in in_all:
                continue
            for r0, r1 in rounds:
                seen = [k for k in range(r0, r1 + 1) if bid in _touched(plan, plan.steps[k])]
                if not seen:
                    continue
                first[bid], last[bid] = min(first[bid], r0), max(last[bid], r1)
                wrote = [k for k in seen if bid in _touched(plan, plan.steps[k], True)]
                read_first = any(bid in {id(x) for x in plan.steps[k].bottom}
                                 for k in seen if k <= wrote[0]) if wrote else True
                if read_first:                 # its values come from an 'all' step
                    self.scatter.setdefault(r0, []).append(b)
                if wrote:                      # an 'all' step reads what the parts wrote
                    self.gather.setdefault(r0, []).append(b)
        own = [bid for bid in blobs if bid not in keep]
        self.views = []
        for lo, hi in ranges:
            views = {bid: blobs[bid].data[lo:hi] for bid in blobs if bid in keep}
            views.update(_allocate(own, blobs, first, last, hi - lo, plan.scratch.dtype))
            self.views.append(views)

    def arr(self, t):
        views = self.views[t]
        return lambda b: views[id(b)]


def _allocate(order, blobs, first, last, n, dtype):
    """Greedy first fit by liveness (as caffepy.infer.plan's pool) for n images of each blob."""
    free, pool, ends, views = [], [], {}, {}
    for bid in sorted(order, key=lambda b: first[b]):
        for done in [e for e in list(ends) if e < first[bid]]:
            free.extend(ends.pop(done))
        shape = (n,) + tuple(blobs[bid].shape[1:])
        size = int(np.prod(shape))
        fit = [p for p in free if pool[p].size >= size]
        if fit:
            p = min(fit, key=lambda q: pool[q].size)
            free.remove(p)
        else:
            p = len(pool)
            pool.append(np.empty(size, dtype))
        views[bid] = pool[p][:size].reshape(shape)
        ends.setdefault(last[bid], []).append(p)
    return views


def segments(plan, t):
    """The forward pass split into ``t`` parts of the batch: a list of ``("all", [run, ...])``
    (whole batch, calling thread) and ``("parts", [[run, ...] per part], scatter, gather)``
    (the copies of :class:`_Parts`); None when the batch has fewer than 2 images or no step
    can run on part of it. Built once per ``t``."""
    if t in plan.segments:
        return plan.segments[t]
    if not plan.compiled or not plan.steps or not plan.steps[0].top or not threadsafe():
        return None
    plan.segments[t] = None
    n = plan.steps[0].top[0].shape[0]
    ranges = parts(n, t)
    split = [steps_mod.splittable(plan, st) and _batch_axis_ok(st, n) for st in plan.steps]
    if len(ranges) < 2 or not any(split):
        return None
    mem = _Parts(plan, split, ranges)
    scratches = [steps_mod.Scratch(plan.scratch.dtype) for _ in ranges]
    for k, st in enumerate(plan.steps):     # size every part's buffers before any closure
        if split[k] and steps_mod.conv_eligible(st.layer, len(st.bottom)):
            for (lo, hi), sc in zip(ranges, scratches):
                steps_mod.conv_buffers(st.layer, st.bottom[0].data[lo:hi], sc)
    segs = []
    for k, st in enumerate(plan.steps):
        if not split[k]:
            if not segs or segs[-1][0] != "all":
                segs.append(("all", []))
            segs[-1][1].append(st.run)
            continue
        if not segs or segs[-1][0] != "parts":
            segs.append(("parts", [[] for _ in ranges],
                         [(b.data[lo:hi], mem.views[i][id(b)]) for b in mem.scatter.get(k, [])
                          for i, (lo, hi) in enumerate(ranges)],
                         [(mem.views[i][id(b)], b.data[lo:hi]) for b in mem.gather.get(k, [])
                          for i, (lo, hi) in enumerate(ranges)]))
        for i, (acc, sc) in enumerate(zip(segs[-1][1], scratches)):
            acc.append(steps_mod._closure(plan, st, mem.arr(i), sc))
    plan.segments[t] = segs
    plan.part_views = mem.views
    return segs


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
    pool = _pool(max(len(seg[1]) for seg in segs if seg[0] == "parts") - 1)
    loss = 0.0
    for seg in segs:
        if seg[0] == "all":
            loss += _run_all(seg[1])
            continue
        _, runs, scatter, gather = seg
        for src, dst in scatter:
            np.copyto(dst, src)
        futures = [pool.submit(_run_all, part) for part in runs[1:]]
        try:
            loss += _run_all(runs[0])
        finally:
            for f in futures:
                loss += f.result()
        for src, dst in gather:
            np.copyto(dst, src)
    return loss
