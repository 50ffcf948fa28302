"""A stub: one per worker group and host of its workers, between those workers and the servers.

``GRAD`` from a worker (param p, step t): held per (param, step) until every worker of this stub
(the group's workers on its host: all K when the group sits on one host) has sent its own (under
SSP a worker may push step t + 1 before a peer pushed step t), then summed in worker order (the same
bits whatever the arrival order) and scaled by ``1/K``: the group's mean, or this host's share of
it. It is cut into the param's slices and each slice goes to its server in the group's server group
(``GRAD``, one message per slice: per host, not per worker); the server adds the shares of the
group's stubs (:mod:`.topology`, per-host sums). A group of one worker sends that worker's buffer
as it is, no copy: a worker does not write a pushed diff before the step's answer (the servers may
use it as scratch: the update rules work in place), and under SSP it pushes a copy.

``PARAM`` from a server (a slice's new values): forwarded to every worker of the group as it comes
(the same buffer: no copy in process); every stub of the group gets every answer. The stub counts the answers per slice; param p's version is
the number of rounds every one of its slices has had (minus one: 0 for the first values), and the
forward that completes a version is marked ``flag = 1`` with ``version`` = that version, so a worker
knows p is complete. A server answers in order, so counting per slice stays right when several
rounds of p are in flight (SSP) and answers of different servers interleave.

Wait-free backprop needs nothing new here: workers may push params in any order and at any time.
"""
from ..errors import CaffeError
from . import transport as T


class Stub(object):
    def __init__(self, endpoint, topo, group):
        self.ep, self.topo, self.g = endpoint, topo, group
        self.workers = topo.workers_of_stub(endpoint.id)
        self.K = topo.K
        self.sg = topo.server_group_of(group)
        self.acc = {}             # (param, step) -> {worker: gradient} being gathered
        self.answers = [[0] * len(sl) for sl in topo.slices]   # per param, per slice
        self.version = [-1] * len(topo.slices)

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
        parts = self.acc.setdefault((p, h.step), {})
        parts[h.src] = bufs[0]
        if len(parts) < len(self.workers):
            return
        del self.acc[(p, h.step)]
        if len(self.workers) == 1 and self.K == 1:      # the one worker's buffer as it is: no copy
            acc = parts[self.workers[0]]
        else:   # summed in worker order, not arrival order: the same bits whichever came first
            acc = parts[self.workers[0]].copy()
            for w in self.workers[1:]:
                acc += parts[w]
            if self.K > 1:
                acc *= acc.dtype.type(1.0) / acc.dtype.type(self.K)
        for k, (off, size, j) in enumerate(self.topo.slices[p]):
            self.ep.send(self.topo.server(self.sg, j),
                         T.header(T.GRAD, param=p, slice=k, step=h.step, offset=off),
                         [acc[off:off + size]])

    def _on_param(self, h, bufs):
        p = h.param
        counts = self.answers[p]
        counts[h.slice] += 1
        flag, version = 0, h.version
        if min(counts) - 1 > self.version[p]:
            self.version[p] = min(counts) - 1
            flag, version = 1, self.version[p]
        for w in self.workers:
            self.ep.send(w, T.header(T.PARAM, param=p, slice=h.slice, offset=h.offset, step=h.step,
                                     version=version, flag=flag), bufs)
