"""A server: owns balanced slices of every dense param and applies the solver's update to them.

Per slice it keeps the values, the solver history (``n_history`` arrays, as the single-process
solver) and a :class:`~caffepy.dist.consistency.SliceClock`. A gradient slice ``g`` for step t is
turned into a step exactly as ``SGDSolver.apply_update`` does for a whole param (regularize with
the slice's values, then the solver class's static ``update_rule(g, hist, local_rate, param,
t + 1)`` with the lr policy's rate for iteration t; one implementation), then ``w -= g`` and the
slice's version goes up by one. Answers carry the new values (``PARAM``; ``step`` = the slowest
group's clock): under BSP without replicas the slice's own array, no copy (it is not written again
before every group answered pushed its next gradient, so has read it), else one snapshot shared by
the groups answered.

Server groups hold replicas: each sends the sum of its own steps to the other replicas every
``sync_frequency`` updates of a slice (``SYNC``), and on ``FLUSH`` (before checkpoints and
downloads) sends what is pending plus a marker, answering ``FLUSHED`` once every other replica's
marker has arrived.

With ``clip_gradients`` set, a completed update is held until the servers of the group agree on its
L2 norm (``CLIPNORM``, :mod:`caffepy.dist.clip`), then scaled and applied as above.

Other messages: ``INIT`` (first values from worker 0), ``CKPT`` (write ``step<N>-server<id>.bin``,
answer ``WRITTEN``), ``PULL`` (download: one ``SLICE`` per slice with values and history, then
``PULLED``), ``STOP``.
"""
import numpy as np

from ..errors import CaffeError
from ..log import fmt, info
from ..solvers import lr_policies
from . import checkpoint, transport as T
from .clip import BSP_KEY, ClipGate
from .consistency import SliceClock
from .routing import TableHost
from .sparse import step_array
from .topology import BSP


class _Slice(object):
    __slots__ = ("p", "k", "offset", "size", "values", "history", "version", "clock", "delta",
                 "n_local")


class Server(object):
    def __init__(self, endpoint, topo, meta, solver_param, solver_cls, dtype, workspace,
                 start_step=0, current_step=0, restored=None, versions=None):
        self.ep, self.topo, self.meta = endpoint, topo, meta
        self.param, self.rule, self.dtype = solver_param, solver_cls.update_rule, dtype
        self.solver_type, self.n_history = solver_cls.type, solver_cls.n_history
        self.workspace = workspace
        self.start = start_step
        self.sg, self.j = topo.server_index(endpoint.id)
        groups = topo.groups_of_server_group(self.sg)
        self.stubs = {g: topo.stubs_of_group(g) for g in groups}     # per host of the group
        self.shares = {}         # (param, slice, group, step) -> {stub: its host's share}
        self.replicas = [topo.server(sg, self.j) for sg in range(topo.SG) if sg != self.sg]
        self.stable_answers = topo.consistency == BSP and not self.replicas
        self.lr_state = lr_policies.LrState(current_step)
        self._lr_it, self._lr = None, None
        self.slices = {}
        for p, k, off, size in topo.slices_of_server(self.j):
            s = _Slice()
            s.p, s.k, s.offset, s.size = p, k, off, size
            s.values = None
            s.history = [self._zeros(size) for _ in range(self.n_history)]
            s.version, s.n_local = 0, 0
            s.clock = SliceClock(topo.consistency, groups, topo.staleness, start_step)
            s.delta = self._zeros(size) if self.replicas else None
            if restored is not None:
                values, hist = restored[meta.names[p]]
                s.values = values[off:off + size].copy()
                s.version = int((versions or {}).get(meta.names[p], 0))   # continues
                for h, saved in zip(s.history, hist):
                    h[...] = saved[off:off + size]
            self.slices[(p, k)] = s
        plan = getattr(topo, "routing", None)
        self.tables = TableHost(self, plan, restored) if plan and plan.tables else None
        self.flush_markers, self.flushing = 0, False
        self.max_staleness = 0
        self.clip = None
        if solver_param.clip_gradients >= 0 and self.slices:
            peers = {j: topo.server(self.sg, j) for j in range(topo.P)
                     if j != self.j and topo.slices_of_server(j)}
            self.clip = ClipGate(solver_param.clip_gradients, solver_param.iter_size,
                                 len(self.slices), self.j, peers)

    def _zeros(self, n):
        return np.zeros(n, self.dtype)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, stopping):
        if all(s.values is not None for s in self.slices.values()) and self.slices:
            for s in self.slices.values():
                self._answer(s, list(self.stubs))
        handlers = {T.INIT: self._on_init, T.GRAD: self._on_grad, T.CKPT: self._on_ckpt,
                    T.PULL: self._on_pull, T.SYNC: self._on_sync, T.FLUSH: self._on_flush,
                    T.CLIPNORM: self._on_clipnorm}
        while not stopping.is_set():
            try:
                h, bufs = self.ep.recv(timeout=0.5)
            except T.TransportTimeout:
                continue
            if h.kind == T.STOP:
                return
            if self.tables is not None and self.tables.handles(h):
                self.tables.on_message(h, bufs)
                continue
            handler = handlers.get(h.kind)
            if handler is None:
                raise CaffeError("%s: unexpected message %s" % (self.topo.describe(self.ep.id),
                                                                T.KIND_NAMES.get(h.kind, h.kind)))
            handler(h, bufs)

    def _answer(self, s, groups):
        low = s.clock.min_clock()
        # BSP without replicas: the values stay as they are until every group answered here has
        # pushed its next gradient, i.e. has read them; else one snapshot for every group answered
        values = s.values if self.stable_answers else s.values.copy()
        # stubs in other processes first: once a local worker has its values it computes again,
        # and a remote answer sent after that waits for this rank's core
        local = self.ep.engine.inboxes
        stubs = [stub for g in groups for stub in self.stubs[g]]
        for stub in [st for st in stubs if st not in local] + [st for st in stubs if st in local]:
            self.ep.send(stub, T.header(T.PARAM, param=s.p, slice=s.k, offset=s.offset,
                                        version=s.version, step=low), [values])

    def _on_init(self, h, bufs):
        s = self.slices[(h.param, h.slice)]
        s.values = bufs[0].astype(self.dtype, copy=True)
        self._answer(s, list(self.stubs))

    def _group_gradient(self, g, h, buf):
        """Group g's gradient of a slice once each of its stubs (one per host) sent its share:
        their sum in stub order (the same bits whatever the arrival order); None until then."""
        stubs = self.stubs[g]
        if len(stubs) == 1:
            return buf
        got = self.shares.setdefault((h.param, h.slice, g, h.step), {})
        got[h.src] = buf
        if len(got) < len(stubs):
            return None
        del self.shares[(h.param, h.slice, g, h.step)]
        total = got[stubs[0]].copy()
        for stub in stubs[1:]:
            total += got[stub]
        return total

    def _on_grad(self, h, bufs):
        s = self.slices[(h.param, h.slice)]
        g = self.topo.group_of_stub(h.src)
        grad = self._group_gradient(g, h, bufs[0])
        if grad is None:
            return
        grad, answer = s.clock.on_gradient(g, h.step, grad)
        self.max_staleness = max(self.max_staleness, s.clock.max_staleness)
        if grad is not None and self.clip is not None:     # applied once the update's norm is known
            key = (BSP_KEY if self.topo.consistency == BSP else g, h.step)
            own = self.clip.hold(key, (s.p, s.k), (s, grad, h.step, answer))
            if own is not None:
                for peer in self.clip.peers.values():
                    self.ep.send(peer, T.header(T.CLIPNORM, group=key[0], step=key[1], server=self.j),
                                 [np.array([own])])
            self._release_clipped(key)
            return
        if grad is not None:
            self._apply(s, grad, h.step)
        if answer:
            self._answer(s, answer)

    def _on_clipnorm(self, h, bufs):
        key = (h.group, h.step)
        self.clip.add_partial(key, h.server, bufs[0][0])
        self._release_clipped(key)

    def _release_clipped(self, key):
        done = self.clip.ready(key)
        if done is None:
            return
        l2, scale, held = done
        if scale is not None and self.j == self.clip.first and self.sg == 0:
            info("sgd_solver.cpp:93", "Gradient clipping: scaling down gradients (L2 norm %s > %s) "
                 "by scale factor %s" % (fmt(l2), fmt(self.clip.clip), fmt(scale)))
        for s, grad, step, answer in held:
            if scale is not None:
                grad *= grad.dtype.type(scale)
            self._apply(s, grad, step)
            if answer:
                self._answer(s, answer)

    def _rate(self, it):
        if it != self._lr_it:
            self._lr = lr_policies.learning_rate(self.param, it, self.lr_state)
            self._lr_it = it
        return self._lr

    def _apply(self, s, g, it):
        """SGDSolver's normalize-free regularize → update rule → apply, on one slice (``g`` is
        left holding the step taken)."""
        step_array(s.values, g, s.history, self.rule, self.param, self._rate(it),
                   self.meta.lr_mult[s.p], self.meta.decay_mult[s.p], it)
        s.version += 1
        if s.delta is not None:
            s.delta -= g
            s.n_local += 1
            if s.n_local % self.topo.cluster.sync_frequency == 0:
                self._send_delta(s)

    def _send_delta(self, s):
        for r in self.replicas:
            self.ep.send(r, T.header(T.SYNC, param=s.p, slice=s.k), [s.delta])
        s.delta = self._zeros(s.size)

    def _on_sync(self, h, bufs):
        if h.param < 0:
            self.flush_markers += 1
            self._maybe_flushed()
            return
        self.slices[(h.param, h.slice)].values += bufs[0]

    def _on_flush(self, h, bufs):
        for s in self.slices.values():
            self._send_delta(s)
        for r in self.replicas:
            self.ep.send(r, T.header(T.SYNC, param=-1))
        self.flushing = True
        self._maybe_flushed()

    def _maybe_flushed(self):
        if self.flushing and self.flush_markers >= len(self.replicas):
            self.flush_markers -= len(self.replicas)
            self.flushing = False
            self.ep.send(self.topo.coordinator, T.header(T.FLUSHED))

    def _on_ckpt(self, h, bufs):
        slices = [checkpoint.make_slice(self.meta.names[s.p], s.p, s.k, s.offset, s.version,
                                        s.values, s.history, self.meta.counts[s.p],
                                        self.meta.shapes[s.p])
                  for s in self._ordered()]
        if self.tables is not None:
            slices += self.tables.checkpoint_slices()
        name = checkpoint.write_file(self.workspace, h.step, "server", self.ep.id - self.topo.W - self.topo.G,
                                     slices, self.lr_state.current_step, self.solver_type)
        self.ep.send(h.src, T.header(T.WRITTEN, step=h.step, text=name,
                                     lr_step=self.lr_state.current_step))

    def _on_pull(self, h, bufs):
        for s in self._ordered():
            self.ep.send(h.src, T.header(T.SLICE, param=s.p, slice=s.k, offset=s.offset,
                                         version=s.version), [s.values.copy()] + [x.copy() for x in s.history])
        for th, tbufs in (self.tables.pull_messages() if self.tables is not None else ()):
            self.ep.send(h.src, th, tbufs)
        self.ep.send(h.src, T.header(T.PULLED, staleness=self.max_staleness,
                                     lr_step=self.lr_state.current_step))

    def _ordered(self):
        return [self.slices[key] for key in sorted(self.slices)]
