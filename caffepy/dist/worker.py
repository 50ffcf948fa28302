"""A worker: runs the net on its sub-batch, pushes gradients to its stub, waits for fresh params.

One step at clock c (c = start_step ... max_iter - 1)::

    [barrier at c if c is a checkpoint / snapshot step: write step<c>-worker<id>.bin, READY, wait GO]
    [SSP: wait_fresh(c), see below]
    clear diffs; loss = mean over iter_size of forward_backward   (diffs / iter_size)
    push GRAD(p, step c, diff) for each learnable param, last layer first
    BSP / ASYNC: wait until every param's version is c - start_step + 1 (PARAM slices written
                 in place)

Params arrive as slices written straight into the net's blobs, so a worker never holds a second
copy. Under BSP / ASYNC the worker names those blobs as the engine's receive target
(:meth:`~caffepy.dist.transport.Engine.set_target`) for its own endpoint and, for the first worker
of a group, for its group's stub (same process): a slice from another rank is then received
straight into the weights (no temporary, no second copy) and the worker's write is skipped. Under
SSP the worker computes while answers arrive, so they land in pooled buffers and are written
between steps. Each PARAM slice carries ``step`` = the slowest group's clock at its server when it was sent
(every group's updates of steps < step are in it); the worker keeps that clock per slice
(``slice_clock``), the clock of its cached copy.

SSP (Bösen's client cache, Ho et al. 2013): the net's blobs are the cache. A worker does not wait
for the answer to its own push: before step c it applies whatever PARAM slices have arrived (the
updates come in asynchronously, its own included once the server answered it) and blocks only
while some param's cached clock is below ``c - staleness``, as Bösen's ``Get`` does
(``stalest_clock = clock - staleness``; a fresher row is awaited from the server, which holds the
answer until its min clock reaches it: :mod:`.consistency`). Several of a worker's pushes may be
in flight, so a push sends a copy of the diff. The gap ``c - (oldest cached clock)`` is recorded
when a step starts (``max_staleness``; never above ``staleness``). Read-my-writes: Bösen adds a
client's own increments to its cache at once; here the step a gradient becomes (momentum, Adam
history) is computed at the server, so a worker reads its own update when the server's answer
arrives, not before. BSP / ASYNC record ``max_staleness`` from the slices read after each step.

Hooks for wait-free backprop: :meth:`push` (one param) is what a ``net.on_backward_layer``
callback would call from a sender thread, and :meth:`wait_params` takes the params a layer needs,
so the next forward can wait layer by layer instead of for all of them at once.
"""
import contextlib
import time

import numpy as np

from ..errors import CaffeError, SolverError
from ..solvers import debug
from . import checkpoint, transport as T
from .topology import SSP


class Stopped(Exception):
    """The coordinator stopped the job."""


class Worker(object):
    computing = False       # inside compute(), outside its waits (see set_computing)

    def __init__(self, endpoint, topo, net, solver_param, workspace, start_step, send_init):
        self.ep, self.topo, self.net = endpoint, topo, net
        self.param, self.workspace = solver_param, workspace
        self.start, self.send_init = start_step, send_init
        self.g = topo.group_of_worker(endpoint.id)
        self.stub = topo.stub_of_worker(endpoint.id)     # this group's stub on this host
        self.version = [-1] * len(net.learnable_params)
        self.blobs = list(net.learnable_params)
        self.flat = [b.data.reshape(-1) for b in self.blobs]
        self.timeout = topo.cluster.timeout
        self.max_staleness = 0
        self.ssp = topo.consistency == SSP
        self.bound = topo.staleness
        # per param, per slice: the server clock of the cached values (-1: none yet)
        self.slice_clock = [[-1] * len(sl) for sl in topo.slices]
        self.t_compute = self.t_wait = 0.0
        self.steps = 0
        # hooks for caffepy.dist.routing (SFB weights, sharded tables): other message kinds,
        # params left out of this worker's checkpoint file, extra READY buffers
        self.routes = {}
        self.not_checkpointed = set()
        self.early = []          # routed messages of the next step that came before our GO
        self.progress = None     # the first worker of each group logs its group's progress
        self.clock = start_step  # the step being run (its boundary passed)
        self.stop_at = None      # a preempted job's last step (STOPAT), every worker's the same
        if solver_param.display and endpoint.id % topo.K == 0:
            from .report import GroupProgress
            self.progress = GroupProgress(solver_param, self.g, topo.G, start_step)

    def barrier_step(self, step):
        p = self.param
        return checkpoint.is_checkpoint_step(step, p) or bool(p.snapshot and step % p.snapshot == 0)

    def run(self, stopping):
        self.receive_in_place(True)
        try:
            self._run_steps(stopping)
        finally:
            self.receive_in_place(False)

    def receive_in_place(self, on):
        """Name (or stop naming) the net's weights as where PARAM slices for this worker, and for
        its stub when the stub lives in this process, are received (BSP / ASYNC only)."""
        if self.ssp:
            return
        engine = self.ep.engine
        target = self.param_target if on else None
        engine.set_target(self.ep.id, target)
        if self.stub in engine.inboxes and self.ep.id == self.topo.worker(self.g, 0):
            engine.set_target(self.stub, target)

    def param_target(self, h, dtype, size):
        """The weights a PARAM slice's values go to (a view of param ``h.param``), else None."""
        if h.kind != T.PARAM or not 0 <= h.param < len(self.flat):
            return None
        flat = self.flat[h.param]
        if flat.dtype != dtype or h.offset < 0 or h.offset + size > flat.size:
            return None
        self.blobs[h.param].data  # noqa: B018  (the host copy current; a device copy follows)
        return flat[h.offset:h.offset + size]

    def _run_steps(self, stopping):
        if self.send_init:
            self._push_init()
        self.wait_params(0, self.start)
        for c in range(self.start, self.param.max_iter):
            if c == self.stop_at:                       # preempted: a final barrier at c
                self.wait_params(c - self.start, c)
                self.barrier(c, final=True)
                return
            self.clock = c
            if c > self.start and self.barrier_step(c):
                self.wait_params(c - self.start, c)     # SSP: every push answered first
                self.barrier(c, final=False)
            if self.ssp:
                t0 = time.time()
                self.wait_fresh(c)
                self.t_wait += time.time() - t0
            t0 = time.time()
            self.set_computing(True)
            try:
                loss = self.compute(c)
            finally:
                self.set_computing(False)
            self.t_compute += time.time() - t0
            for p in reversed(range(len(self.flat))):
                self.push(p, c)
            if not self.ssp:
                t0 = time.time()
                self.wait_params(c - self.start + 1, c + 1)
                self.t_wait += time.time() - t0
            self.steps += 1
            if self.progress and c % self.param.display == 0:
                self.progress.log("worker.py", c, loss)
        self.wait_params(self.param.max_iter - self.start, self.param.max_iter)
        self.barrier(self.param.max_iter, final=True)

    def _push_init(self):
        for p, pieces in enumerate(self.topo.slices):
            for k, (off, size, j) in enumerate(pieces):
                for sg in range(self.topo.SG):
                    self.ep.send(self.topo.server(sg, j), T.header(T.INIT, param=p, slice=k, offset=off),
                                 [self.flat[p][off:off + size]])

    def compute(self, c):
        net, n = self.net, self.param.iter_size
        net.clear_param_diffs()
        loss = 0.0
        for _ in range(n):
            loss += net.forward_backward()
        loss /= n
        if not np.isfinite(loss):
            raise SolverError(debug.nonfinite_message(net, c, loss))
        if n > 1:
            for b in net.learnable_params:
                b.diff[...] *= b.dtype.type(1.0) / b.dtype.type(n)
        return loss

    def push(self, p, c):
        diff = self.net.learnable_params[p].diff
        # SSP goes on computing before the stub has read the diff: send a copy
        self.ep.send(self.stub, T.header(T.GRAD, param=p, step=c),
                     [diff.copy() if self.ssp else diff])

    def cache_clock(self, p):
        """The server clock of param p's cached values (the oldest of its slices)."""
        clocks = self.slice_clock[p]
        return min(clocks) if clocks else self.param.max_iter

    def wait_fresh(self, c, params=None):
        """SSP, before step c: apply the PARAM slices that have arrived, then take more only while
        a param in ``params`` (default all) has a cached clock below ``c - staleness`` (or has
        not had its first values: those carry clock ``start``)."""
        wanted = range(len(self.flat)) if params is None else params
        while self.ep.probe():
            self.take_message(c)
        need = max(c - self.bound, self.start)      # and never before the first values
        low = min([self.cache_clock(p) for p in wanted] or [c])
        if low < need:
            with self.waiting():
                while low < need:
                    self.take_message(c)
                    low = min(self.cache_clock(p) for p in wanted)
        self.max_staleness = max(self.max_staleness, c - low)

    def set_computing(self, on):
        """Tell the engine this worker computes (its polling threads keep off the core) or not."""
        self.computing = on
        self.ep.engine.computing(self.ep.id, on)

    def wait_params(self, version, clock, params=None):
        """Take PARAM slices until every param in ``params`` (default all) reached ``version``
        (not computing meanwhile: the engine may poll)."""
        wanted = range(len(self.flat)) if params is None else params
        if all(self.version[p] >= version for p in wanted):
            return
        with self.waiting():
            while any(self.version[p] < version for p in wanted):
                self.take_message(clock)

    @contextlib.contextmanager
    def waiting(self):
        """A wait inside compute(): not computing meanwhile."""
        was = self.computing
        if was:
            self.set_computing(False)
        try:
            yield
        finally:
            if was:
                self.set_computing(True)

    def take_message(self, clock):
        """Receive one message: a PARAM slice, or a kind in ``self.routes``."""
        if self.early:
            h, bufs = self.early.pop(0)
        else:
            h, bufs = self.ep.recv(self.timeout, "parameters from stub %d" % self.g)
        if h.kind == T.STOP:
            raise Stopped()
        if h.kind == T.PREEMPT:
            self._agree_stop()
            return
        if h.kind in self.routes:
            self.routes[h.kind](h, bufs)
            return
        if h.kind != T.PARAM:
            raise CaffeError("worker %d: unexpected message %s while waiting for parameters"
                             % (self.ep.id, T.KIND_NAMES.get(h.kind, h.kind)))
        values = bufs[0]
        self.blobs[h.param].data  # noqa: B018  (in GPU mode: the device copy follows)
        dst = self.flat[h.param][h.offset:h.offset + values.size]
        if values.__array_interface__["data"][0] != dst.__array_interface__["data"][0]:
            dst[...] = values           # (received elsewhere than in place)
        self.slice_clock[h.param][h.slice] = h.step
        if not self.ssp:
            self.max_staleness = max(self.max_staleness, clock - h.step)
        if h.flag:
            self.version[h.param] = h.version

    def barrier(self, step, final):
        files = ""
        if final or checkpoint.is_checkpoint_step(step, self.param):
            files = self._write_checkpoint(step)
        text = "file=%s;compute=%r;wait=%r;steps=%d;stale=%d" % (
            files, self.t_compute, self.t_wait, self.steps, self.max_staleness)
        self.ep.send(self.topo.coordinator, T.header(T.READY, step=step, flag=int(final), text=text),
                     self.ready_buffers())
        while True:
            h, bufs = self.ep.recv(None)
            if h.kind == T.PREEMPT:     # stopped here: the next boundary is step + 1
                self._send_clock(step + 1)
                continue
            if h.kind == T.STOPAT:      # (before the GO: the coordinator sent it first)
                self.stop_at = int(h.step)
                continue
            if h.kind not in self.routes:
                break
            # a peer that got its GO first already sent this step's SFB factors / table rows
            self.early.append((h, bufs))
        if h.kind == T.STOP:
            raise Stopped()
        if h.kind != T.GO:
            raise CaffeError("worker %d: expected GO after the barrier of step %d, got %s"
                             % (self.ep.id, step, T.KIND_NAMES.get(h.kind, h.kind)))

    def _send_clock(self, boundary):
        self.ep.send(self.topo.coordinator, T.header(
            T.CLOCK, step=min(max(boundary, self.start + 1), self.param.max_iter)))

    def _agree_stop(self):
        """PREEMPT from the coordinator: say the next step boundary this worker can stop at, then
        wait (holding what else comes, in order) for the step every worker stops at, so that no
        worker passes it meanwhile."""
        self._send_clock(self.clock + 1)
        while True:
            h, bufs = self.ep.recv(None)
            if h.kind == T.STOP:
                raise Stopped()
            if h.kind == T.STOPAT:
                self.stop_at = int(h.step)
                return
            self.early.append((h, bufs))

    def ready_buffers(self):
        return []

    def param_history(self, p):
        return ()

    def _write_checkpoint(self, step):
        """step<N>-worker<id>.bin: the params this worker owns (group 0) and, for every worker, where
        its data layers stand and its random generator (caffepy.data.state), for an exact resume."""
        from .. import common
        from ..data import state as data_state
        k = self.ep.id
        owned = [p for p in range(len(self.flat))
                 if self.g == 0 and self.topo.owner_worker(p) == k and p not in self.not_checkpointed]
        names = self.net.param_display_names
        slices = [checkpoint.make_slice(names[p], p, 0, 0, self.version[p], self.flat[p],
                                        self.param_history(p), shape=self.net.learnable_params[p].shape) for p in owned]
        return checkpoint.write_file(self.workspace, step, "worker", k, slices,
                                     layer_state=data_state.net_state(self.net),
                                     random=data_state.rng_state(common.rng()))

    def restore_state(self, ck, source):
        """Put back the data layers' state and the generator saved in a worker file."""
        from .. import common
        from ..data import state as data_state
        data_state.restore_net(self.net, ck.layer_state, source)
        if ck.HasField("random"):
            data_state.restore_rng(common.rng(), ck.random)
