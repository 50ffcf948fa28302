"""BSP / ASYNC / SSP at a server: when a slice's gradient is applied and when whom is answered.

A server keeps one :class:`SliceClock` per slice. ``clock[g]`` counts the updates applied from
worker group g (a group at clock c has pushed its gradients of steps < c).

- BSP: the gradients of step c are held until every group served has sent its own; their mean is
  applied once and every group is answered (all groups then read the same param version).
- ASYNC (Downpour): each group's gradient is applied on arrival and that group alone is answered.
- SSP (staleness s), Bösen's server side (Ho et al. 2013; Petuum Bösen's server keeps a vector
  clock of its clients and holds a row request for clock c until its min clock reaches c): each
  gradient is applied on arrival like ASYNC; the answer to group g (now at ``c = clock[g]``) goes
  out at once when ``min(clock) >= c - s``, else it is held until the slowest group gets there.
  Every answer carries ``step = min(clock)``. The worker does not wait for it: it computes on its
  cache while the cache's clock is within the bound (:meth:`caffepy.dist.worker.Worker.wait_fresh`),
  so a worker at clock c never reads a param missing an update of a step older than ``c - s``.

``max_staleness`` records the largest ``c - min(clock)`` ever answered (the instrumented bound;
the workers record the gap of what they compute on, ``c - cached clock``).
"""
from .topology import ASYNC, BSP


class SliceClock(object):
    def __init__(self, mode, groups, staleness, start=0):
        self.mode = mode
        self.groups = list(groups)
        self.staleness = staleness
        self.clock = {g: start for g in self.groups}
        self.pending = {}        # BSP: step -> {group: gradient}
        self.deferred = []       # SSP: groups whose answer waits for the slowest group
        self.max_staleness = 0

    def min_clock(self):
        return min(self.clock.values())

    def on_gradient(self, g, step, grad):
        """Returns ``(gradient to apply or None, [groups to answer now])``."""
        if self.mode == BSP:
            got = self.pending.setdefault(step, {})
            got[g] = grad
            if len(got) < len(self.groups):
                return None, []
            del self.pending[step]
            for h in self.groups:
                self.clock[h] = step + 1
            grads = [got[h] for h in self.groups]
            if len(grads) == 1:
                return grads[0], self._answer(self.groups)
            total = grads[0]        # (a pushed gradient is not read again by its sender: no copy)
            for other in grads[1:]:
                total += other
            total *= total.dtype.type(1.0) / total.dtype.type(len(grads))
            return total, self._answer(self.groups)
        self.clock[g] = step + 1
        if self.mode == ASYNC:
            return grad, self._answer([g])
        self.deferred.append(g)
        return grad, self._answer(self._releasable())

    def _releasable(self):
        low = self.min_clock()
        ready = [g for g in self.deferred if self.clock[g] - self.staleness <= low]
        self.deferred = [g for g in self.deferred if g not in ready]
        return ready

    def _answer(self, groups):
        low = self.min_clock()
        for g in groups:
            self.max_staleness = max(self.max_staleness, self.clock[g] - low)
        return list(groups)

