"""The coordinator: barriers (checkpoint, snapshot, final), the download phase, failure detection.

It lives in process 0. Workers announce ``READY`` at a barrier step; once all have, the coordinator
flushes server-group replicas (``FLUSH``), has every server write its checkpoint file (``CKPT`` →
``WRITTEN``) and writes the manifest last, and for snapshots and the end runs the download phase:
``PULL`` to the servers of server group 0, whose ``SLICE`` answers are written straight into the
solver's net (and its history) — the only place a full gathered copy exists — before
``solver.snapshot()``. Then ``GO`` (or, at the end, ``STOP`` to everybody).

Failures: an ``ERROR`` from any role, a role thread that died (in process), or a process whose
heartbeats stop for ``timeout`` seconds (MPI) ends the job with a :class:`DistError` naming the
role and the last complete checkpoint. (Under MPI a killed process is reported by the watchdog.)
"""

from ..errors import CaffeError
from ..log import info
from . import checkpoint, routing, transport as T


class DistError(CaffeError):
    """The distributed job stopped."""


def parse_text(text):
    out = {}
    for part in text.split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


class Coordinator(object):
    def __init__(self, endpoint, topo, solver, workspace, health=None):
        self.ep, self.topo, self.solver = endpoint, topo, solver
        self.param, self.workspace = solver.param, workspace
        self.health = health or (lambda h=None: None)
        self.ready = {}
        self.reports = {}
        self.pulled_versions = {}   # (param, offset) -> a dense slice's version at the last download
        self.max_staleness = 0
        self.last_checkpoint = None
        self.routed = []      # worker 0's last READY buffers: SFB values and history
        self.pending = []     # messages that came while the workers agreed on a stop step
        self.preempted = None     # the signal that stops the job early (see preempt)
        self.stop_at = None
        self.last_manifest = None

    def fail(self, why):
        raise DistError("%s; %s" % (why, checkpoint.describe_latest(self.workspace)))

    def _recv(self):
        """The next message that is not a heartbeat (an ERROR ends the job)."""
        while True:
            try:
                h, bufs = self.ep.recv(timeout=self.topo.cluster.heartbeat_interval)
            except T.TransportTimeout:
                self.health()
                continue
            if h.kind == T.ERROR:
                self.fail(h.text)
            if h.kind == T.HEARTBEAT:
                self.health(h)
                continue
            self.health()
            return h, bufs

    def recv(self, what):
        while True:
            if self.pending:
                return self.pending.pop(0)
            h, bufs = self._recv()
            if h.kind == T.PREEMPT:
                self.preempt(h.text or "a signal")
                continue
            return h, bufs

    def preempt(self, why):
        """A rank got SIGTERM (or another stopping signal): ask every worker for the next step
        boundary it can stop at (each waits for the answer), take the largest and send it to all
        (STOPAT): there every worker joins a final barrier, which checkpoints. What else arrives
        meanwhile is kept, in order, for :meth:`recv`."""
        if self.preempted:
            return
        self.preempted = why
        for w in self.topo.workers():
            self.ep.send(w, T.header(T.PREEMPT, text=why))
        clocks = []
        while len(clocks) < self.topo.W:
            h, bufs = self._recv()
            if h.kind == T.CLOCK:
                clocks.append(int(h.step))
            elif h.kind != T.PREEMPT:
                self.pending.append((h, bufs))
        self.stop_at = max(clocks)
        for w in self.topo.workers():
            self.ep.send(w, T.header(T.STOPAT, step=self.stop_at))
        info("coordinator.py", "%s: every worker stops at step %d and checkpoints there"
             % (why, self.stop_at))

    def collect(self, counts, on_message=None):
        """Receive until ``counts`` ({kind: n}) messages have come; returns them by kind."""
        got = {kind: [] for kind in counts}
        while any(len(got[k]) < n for k, n in counts.items()):
            h, bufs = self.recv("/".join(T.KIND_NAMES[k] for k in counts))
            if h.kind not in counts:
                raise DistError("coordinator: expected %s, got %s from %s"
                                % ("/".join(T.KIND_NAMES[k] for k in counts),
                                   T.KIND_NAMES.get(h.kind, h.kind), self.topo.describe(h.src)))
            if on_message:
                on_message(h, bufs)
            got[h.kind].append(h)
        return got

    def run(self):
        while True:
            h, bufs = self.recv("READY")
            if h.kind != T.READY:
                raise DistError("coordinator: unexpected %s from %s"
                                % (T.KIND_NAMES.get(h.kind, h.kind), self.topo.describe(h.src)))
            if h.src == 0:
                self.routed = bufs
            got = self.ready.setdefault(h.step, [])
            got.append(h)
            if len(got) == self.topo.W:
                del self.ready[h.step]
                final = bool(got[0].flag)
                self.barrier(h.step, got, final)
                if final:
                    if self.preempted and h.step < self.param.max_iter:
                        info("coordinator.py", "Stopped by %s at step %d: checkpoint %s; continue "
                             "with --resume" % (self.preempted, h.step, self.last_manifest))
                    return h.step

    def barrier(self, step, readies, final):
        files = [parse_text(r.text).get("file", "") for r in readies]
        if final:
            self.reports = {r.src: parse_text(r.text) for r in readies}
        if self.topo.SG > 1:
            for s in self.topo.servers():
                self.ep.send(s, T.header(T.FLUSH, step=step))
            self.collect({T.FLUSHED: self.topo.S})
        if final or checkpoint.is_checkpoint_step(step, self.param):
            for s in self.topo.servers():
                self.ep.send(s, T.header(T.CKPT, step=step))
            written = self.collect({T.WRITTEN: self.topo.S})[T.WRITTEN]
            files += [w.text for w in written]
            current_step = max(int(w.lr_step) for w in written)
            try:
                self.last_manifest = checkpoint.write_manifest(
                    self.workspace, step, [f for f in files if f], current_step, self.solver.type,
                    self.topo.S, self.topo.W, keep=self.topo.cluster.checkpoint_keep,
                    shape=getattr(self.topo, "shape", None))
            except CaffeError as e:      # (disk full): the step stays incomplete, say which is not
                self.fail("checkpoint of step %d not written: %s" % (step, e))
            self.last_checkpoint = step
        if final or (self.param.snapshot and step % self.param.snapshot == 0):
            self.download(step)
            if not final or self.param.snapshot_after_train:
                try:
                    self.solver.snapshot()
                except CaffeError as e:
                    self.fail(str(e))
        if final:
            return
        for w in self.topo.workers():
            self.ep.send(w, T.header(T.GO, step=step))

    def download(self, step):
        """Gather every param from server group 0 into the solver's net (values and history);
        sharded tables come back as shards (``flag`` = 1), SFB weights from worker 0's READY."""
        net = self.solver.net
        flats = [b.data.reshape(-1) for b in net.learnable_params]
        history = getattr(self.solver, "history", None)
        n = len(flats)
        plan = getattr(self.topo, "routing", None)
        P = self.topo.P

        def put(p, target, lo, values, shard):
            if shard:           # rows shard, shard + P, ... of a table (of its scaled rows)
                rows = net.learnable_params[p].shape[0]
                target.reshape(rows, -1)[lo:plan.rows[p]:P] = values.reshape(-1, target.size // rows)
            else:
                target[lo:lo + values.size] = values

        def on_slice(h, bufs):
            if h.kind != T.SLICE:
                return
            lo = h.slice if h.flag else h.offset
            put(h.param, flats[h.param], lo, bufs[0], h.flag)
            if not h.flag:
                self.pulled_versions[(h.param, lo)] = int(h.version)
            if history is not None and len(history) == n * (len(bufs) - 1):
                for k, hb in enumerate(bufs[1:]):
                    put(h.param, history[k * n + h.param].reshape(-1), lo, hb, h.flag)

        servers = [self.topo.server(0, j) for j in range(P)]
        for s in servers:
            self.ep.send(s, T.header(T.PULL, step=step))
        expected = sum(len(self.topo.slices_of_server(j)) for j in range(P))
        expected += len(plan.tables) * P if plan else 0
        pulled = self.collect({T.SLICE: expected, T.PULLED: len(servers)}, on_slice)[T.PULLED]
        if plan and plan.tables:
            routing.expand_tables(plan, net, history)
        if plan and plan.sfb:
            per = len(self.routed) // len(plan.sfb)
            for i, p in enumerate(sorted(plan.sfb)):
                bufs = self.routed[i * per:(i + 1) * per]
                flats[p][...] = bufs[0]
                if history is not None and len(history) == n * (per - 1):
                    for k, hb in enumerate(bufs[1:]):
                        history[k * n + p].reshape(-1)[...] = hb
        self.max_staleness = max([self.max_staleness] + [int(p.staleness) for p in pulled])
        self.solver.iter = step
        self.solver.current_step = max(int(p.lr_step) for p in pulled)
        info("coordinator.py", "Downloaded parameters of step %d from %d servers" % (step, len(servers)))

    def stop_all(self):
        for ep in range(self.topo.n_endpoints):
            if ep != self.ep.id:
                self.ep.send(ep, T.header(T.STOP))
