"""List scheduling of jobs over resources: the event loop under the performance model (:mod:`.plan`).

A job is a chain of stages ``(resources, busy, delay)``. A stage is ready when the stage before it
ended (the first: when the job is submitted); it starts once every resource it names is free::

    start = max(ready, free(r) for r in resources);   free(r) = start + busy  for each r
    next stage ready at start + busy + delay          (delay: a wire's latency, holding nothing)

Stages are taken in the order they become ready (ties in the order submitted), and a resource
serves one stage at a time, to its end: first come, first served, without preemption. When a job's
last stage ends its ``then(t)`` runs and may submit further jobs, so dependencies are callbacks:
:class:`Join` (after n arrivals) and :class:`Signal` (a time that is learnt once, awaited by
many). Busy time is summed per ``tag`` of a job's first stage (with whether its first resource is
a ``"cpu"``) and per resource (``load``).
"""
import heapq


class Scheduler(object):
    def __init__(self):
        self.heap, self.seq, self.free, self.busy, self.load = [], 0, {}, {}, {}

    def submit(self, t, stages, then=None, tag=None):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, stages, 0, then, tag))

    def run(self):
        heap, free, busy, load = self.heap, self.free, self.busy, self.load
        push, pop = heapq.heappush, heapq.heappop
        while heap:
            now, _, stages, k, then, tag = pop(heap)
            res, dur, delay = stages[k]
            start = now
            for x in res:
                f = free.get(x, 0.0)
                if f > start:
                    start = f
            end = start + dur
            for x in res:
                free[x] = end
                load[x] = load.get(x, 0.0) + dur
            if tag is not None:
                key = tag + (res[0][0] == "cpu",)
                busy[key] = busy.get(key, 0.0) + dur
            end += delay
            if k + 1 < len(stages):
                self.seq += 1
                push(heap, (end, self.seq, stages, k + 1, then, None))
            elif then is not None:
                then(end)


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
