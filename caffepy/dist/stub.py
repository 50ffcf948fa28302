"""A stub: one per worker group, between the group's workers and the servers.

``GRAD`` from a worker (param p, step t): held per param until all K workers of the group have
sent theirs, then summed in worker order (the same bits whatever the arrival order); the mean is
cut into the param's slices and each slice goes to its server in the group's server group
(``GRAD``, one message per slice).

``PARAM`` from a server (a slice's new values): forwarded to every worker of the group as it comes
(the same buffer: no copy in process); when the last slice of param p has come, the stub bumps p's
version and marks that forward ``flag = 1`` with ``version`` = the new param version (0 for the
first values), so a worker knows p is complete. At most one round per param is in flight.

Wait-free backprop needs nothing new here: workers may push params in any order and at any time.
"""
from ..errors import CaffeError
from . import transport as T


class Stub(object):
    def __init__(self, endpoint, topo, group):
        self.ep, self.topo, self.g = endpoint, topo, group
        self.workers = topo.workers_of_group(group)
        self.sg = topo.server_group_of(group)
        n = len(topo.slices)
        self.acc = [None] * n     # per param: {worker: gradient} of the step being gathered
        self.received = [0] * n
        self.version = [-1] * n

    def run(self, stopping):
        while not stopping.is_set():
            try:
                h, bufs = self.ep.recv(timeout=0.5)
            except T.TransportTimeout:
                continue
            if h.kind == T.GRAD:
                self._on_grad(h, bufs)
            elif h.kind == T.PARAM:
                self._on_param(h, bufs)
            elif h.kind == T.STOP:
                return
            else:
                raise CaffeError("stub %d: unexpected message %s"
                                 % (self.g, T.KIND_NAMES.get(h.kind, h.kind)))

    def _on_grad(self, h, bufs):
        p = h.param
        parts = self.acc[p] = self.acc[p] or {}
        parts[h.src] = bufs[0]
        if len(parts) < len(self.workers):
            return
        self.acc[p] = None
        # summed in worker order, not arrival order: the same bits whichever worker was first
        acc = parts[self.workers[0]].copy()
        for w in self.workers[1:]:
            acc += parts[w]
        if len(self.workers) > 1:
            acc *= acc.dtype.type(1.0) / acc.dtype.type(len(self.workers))
        for k, (off, size, j) in enumerate(self.topo.slices[p]):
            self.ep.send(self.topo.server(self.sg, j),
                         T.header(T.GRAD, param=p, slice=k, step=h.step, offset=off),
                         [acc[off:off + size]])

    def _on_param(self, h, bufs):
        p = h.param
        self.received[p] += 1
        flag, version = 0, h.version
        if self.received[p] == len(self.topo.slices[p]):
            self.received[p] = 0
            self.version[p] += 1
            flag, version = 1, self.version[p]
        for w in self.workers:
            self.ep.send(w, T.header(T.PARAM, param=p, slice=h.slice, offset=h.offset, step=h.step,
                                     version=version, flag=flag), bufs)
