"""List scheduling of jobs over resources: the event loop under the performance model (:mod:`.plan`).

A job is a chain of stages ``(resource, busy, delay, tag)``. A stage is ready when the stage
before it ended (the first: when the job is submitted); it starts once its resource is free::

    start = max(ready, free(r));   free(r) = start + busy
    next stage ready at start + busy + delay          (delay: a wire's latency, holding nothing;
                                                       negative: the next stage overlaps this one)

Stages are taken in the order they become ready (ties in the order submitted), and a resource
serves one stage at a time, to its end: first come, first served, without preemption. When a job's
last stage ends its ``then(t)`` runs and may submit further jobs, so dependencies are callbacks:
:class:`Join` (after n arrivals) and :class:`Signal` (a time that is learnt once, awaited by
many). Busy time is summed per stage ``tag`` and per resource (``load``).
"""
import heapq


class Scheduler(object):
    """Resources are the integers ``0 .. n - 1``; ``busy`` sums by tag, ``load`` by resource."""

    def __init__(self, n):
        self.heap, self.seq, self.free, self.load, self.busy = [], 0, [0.0] * n, [0.0] * n, {}

    def submit(self, t, stages, then=None):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, stages, 0, then))

    def run(self):
        heap, free, busy, load = self.heap, self.free, self.busy, self.load
        push, pop = heapq.heappush, heapq.heappop
        while heap:
            now, _, stages, k, then = pop(heap)
            x, dur, delay, tag = stages[k]
            start = free[x]
            if now > start:
                start = now
            end = free[x] = start + dur
            load[x] += dur
            if tag is not None:
                busy[tag] = busy.get(tag, 0.0) + dur
            if k + 1 < len(stages):
                self.seq += 1
                push(heap, (end + delay, self.seq, stages, k + 1, then))
            elif then is not None:
                then(end + delay)


class Join(object):
    """Calls ``then(t)`` with the latest of ``n`` arrival times once all came."""
    __slots__ = ("n", "t", "then")

    def __init__(self, n, then):
        self.n, self.t, self.then = n, 0.0, then

    def __call__(self, t):
        self.n -= 1
        if t > self.t:
            self.t = t
        if self.n == 0:
            self.then(self.t)


class Signal(object):
    """A time that becomes known once; ``then(fn)`` runs fn with it (now, or when it fires)."""
    __slots__ = ("t", "waiting")

    def __init__(self, t=None):
        self.t, self.waiting = t, []

    def fire(self, t):
        self.t = t
        waiting, self.waiting = self.waiting, []
        for fn in waiting:
            fn(t)

    def then(self, fn):
        if self.t is None:
            self.waiting.append(fn)
        else:
            fn(self.t)


def when_all(signals, then, t0=0.0):
    """``then(t)``: t the latest of ``t0`` and the signals' times, once every signal fired."""
    join = Join(len(signals) + 1, then)
    for s in signals:
        s.then(join)
    join(t0)
