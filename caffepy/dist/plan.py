"""A performance model of the distributed solver: steps/s of a net on N hosts (``caffepy plan``).

**What is predicted.** The steady-state step time ``T`` of a :mod:`caffepy.dist.trainer` run, its
samples/s ``G B / T`` (G worker groups of batch B, K workers each at m = B / K) and its
efficiency ``E = samples/s / (G K m / T_1(m))``, T_1 the single-process solver's step: with one
worker per host, against as many hosts each training alone.

**The step, message by message.** One step of every worker is simulated as caffepy runs it, from
the routes of :func:`caffepy.dist.routing.make_plan` (the trainer's own decision, with its
:class:`~caffepy.dist.sfb.CostModel`) and the slices and placement of
:class:`~caffepy.dist.topology.Topology` (``set_hosts``: the ranks fill the hosts in order):

- compute: layer i's forward, then in reverse its backward, on the worker's core: ``f_i(m)``,
  ``b_i(m)`` at the sub-batch m = B / nworkers_per_group, iter_size passes;
- dense params: worker → its stub (with K > 1 the stub sums and scales: ``K_h add(n)``) → one
  message per slice to its server → the server, when its clock allows (BSP: once every group's
  stubs sent their share; ASYNC / SSP: each group's on arrival), sums the S shares
  (``S add(size)`` for S > 1) and steps the slice (``update(size)``; ``+ copy(size)`` where answers
  carry a snapshot: ASYNC, SSP, server-group replicas, which also get a SYNC every sync_frequency
  steps) → one answer per stub → the stub forwards it to each of its workers; param p's new
  version is at a worker when every slice is. SSP pushes carry a copy (``copy(n)``);
- SFB weights: the factors, ``r (N + K)`` numbers (r = rows per worker x iter_size), from every
  worker to every other; each worker rebuilds ``sum_w u_w^T v_w`` (W GEMMs the size of the
  layer's forward: ``W f_i(m)``) and steps its replica (``update(N K)``) on its own core;
- sharded tables: SPARSE_GRAD rows to every shard, the shard's step once every worker's rows are
  in (``update(rows / P x width)``), and the next forward's LOOKUP / ROWS round trip, answered
  once the shard took that step (ids taken distinct);
- waits: with wait-free backprop a layer's params leave as its backward ends and the next forward
  waits layer by layer; without it every param leaves after backward, last layer first, and the
  next step waits for all. BSP / ASYNC wait for the answer to step c - 1, SSP (staleness s) for
  the answer to step c - 1 - s.

**Costs of a message of n bytes** from rank a on host h_a to rank b on host h_b::

    same rank:    c_local                                   (a hand-over between role threads)
    other rank:   c_msg + c_byte n on a's core, then c_msg + c_byte n on b's core
    other host:   in between, w = 8 n / (eta R) on out(h_a), and w on in(h_b) from lam after the
                  egress began (the switch holds what a busy ingress cannot take yet, so a sender
                  is never blocked by another host's ingress: no head-of-line blocking)

c_local is measured in process (:mod:`caffepy.dist.calibrate`); the others are fitted from the
engine's one-way times t(n, R) between two emulated hosts (bench_transport.py): ``lam`` = plain
mpi4py's 64 B time, ``c_msg = (engine - plain) / 2`` at 64 B, and the large-message slopes at two
rates, ``s(R) = 2 c_byte + 8 / (eta R)``, solved for eta (the share of R TCP delivers) and c_byte.
Array work (sums, updates, copies) costs ``a + c n`` for n elements, measured.

**Resources and order.** Each rank has one core (as measured: a rank's worker, stub, server and
communication threads share it; ``spare_core``: its communication and server work get a core of
their own). Each host has an egress and an ingress link of rate R (full duplex, a non-blocking
fabric: a host's own link is the only wire it shares). Each resource serves work first come, first
served, one job at a time, to its end (:mod:`caffepy.dist.simulate`); a layer's forward or
backward is not interrupted (the engine makes its progress rounds between layers).

**Steady state and the barrier.** T is the mean spacing of the ends of backward over the last
intervals of the simulated steps (BSP / ASYNC: 5, SSP: 2 s + 7; an even number of intervals, as
a step whose communication runs into the next forward can make steps alternate long and short),
and at least the work per step of the busiest core or link (its busy time / steps). The
simulated workers are identical; a real BSP step also waits for the slowest of G groups, ``E[max of G] - mean ~ sigma C sqrt(2 ln G)`` (Gaussian
extremes; sigma: the measured coefficient of variation of a pass, C: the compute), which SSP's
slack spreads over s + 1 steps (``/ (s + 1)``). Not modelled: data loading, test passes,
checkpoints, the coordinator, any straggler beyond that spread, TCP slow start, and the engine's
CPU beyond its measured per-message and per-byte costs (polling, the GIL, thread wake-ups).
"""
import math

from ..errors import CaffeError
from . import routing, waitfree
from .calibrate import build_net, net_batch
from .simulate import Join, Scheduler, Signal, when_all
from .topology import BSP, SSP, Topology

_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def parse_link(text):
    """'10gbit' → 1e10 bits/s (kbit, mbit, gbit)."""
    t = str(text).strip().lower()
    for unit, scale in _UNITS.items():
        if t.endswith(unit):
            try:
                value = float(t[:-len(unit)])
            except ValueError:
                break
            if value > 0 and math.isfinite(value):
                return value * scale
    raise ValueError("link rate '%s': expected a positive number with kbit, mbit or gbit "
                     "(e.g. 10gbit)" % text)


class Result(object):
    """A prediction. ``step`` (s) and its parts on the busiest worker's core: ``compute``,
    ``server`` (slice updates, SFB rebuilds and replica steps), ``messages`` (engine and stub work),
    ``waiting`` (idle: the wire, other hosts), ``barrier`` (the slowest group's spread);
    ``routes``: per param (name, count, route, wire bytes per step of the cluster, the busiest
    host's bytes in + out). :func:`predict` adds ``samples_per_s``, ``efficiency``, ``plain_step``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


class Model(object):
    """One net, cluster and link rate; :meth:`predict` simulates its steps.

    ``net``: the train net built at a worker group's batch (shapes only is enough; the routes are
    decided on it as the trainer does); ``layer_times``: (forward s, backward s, cv) per layer at a
    worker's sub-batch; ``hosts``: the ranks fill that many hosts in rank order, in blocks as equal
    as they divide."""

    def __init__(self, net, solver_param, cluster, opts, costs, layer_times, hosts, rate,
                 spare_core=False):
        self.net, self.param, self.opts, self.costs = net, solver_param, opts, costs
        self.fwd, self.bwd, self.cv = layer_times
        self.rate, self.spare = float(rate), spare_core
        self.plan = routing.make_plan(net, cluster, opts, solver_param)
        self.count = [int(b.count) for b in net.learnable_params]
        self.topo = t = Topology(cluster, self.count, net.param_display_names, excluded=self.plan.params())
        n = t.n_processes
        if not 1 <= hosts <= n:
            raise CaffeError("%d hosts for a cluster of %d ranks (%d worker groups x %d workers%s): "
                             "every host needs a rank" % (hosts, n, t.G, t.K, ", %d separate servers"
                                                           % t.S if cluster.server_worker_separate else ""))
        self.host = [r * hosts // n for r in range(n)]      # blocks of consecutive ranks
        self.hosts = hosts
        t.set_hosts(["h%d" % h for h in self.host])
        self.proc = [t.process_of(ep) for ep in range(t.n_endpoints)]
        # resources: rank r's core r, its communication core n + r (a spare core) or r, host h's
        # egress 2n + h and ingress 2n + H + h
        self.cpu = list(range(n))
        self.comm = [n + r for r in range(n)] if spare_core else self.cpu
        self.links = [(2 * n + h, 2 * n + self.hosts + h) for h in range(self.hosts)]
        self.n_resources = 2 * n + 2 * self.hosts
        self.lp = waitfree.LayerParams(net)
        self.itemsize = net.learnable_params[0].dtype.itemsize if self.count else 4
        bsp = t.consistency == BSP
        self.answer_groups = {g: (t.groups_of_server_group(t.server_group_of(g)) if bsp else [g])
                              for g in range(t.G)}
        self.stubs_of = {g: sum((t.stubs_of_group(h) for h in self.answer_groups[g]), [])
                         for g in range(t.G)}

    # -- work and messages ----------------------------------------------------------------------
    def _tag(self, r, kind, c, cpu):
        """The busy-time key: (rank, kind, step, on the rank's own core)."""
        key = (r, kind, c, cpu)
        return self.tags.setdefault(key, key)

    def _work(self, t, r, seconds, kind, c, then, compute=False):
        """``seconds`` on rank r's core (compute) or its communication core (the same without a
        spare core)."""
        x = self.cpu[r] if compute else self.comm[r]
        self.sched.submit(t, [(x, seconds, 0.0, self._tag(r, kind, c, x == r))], then)

    def _msg(self, t, a, b, nbytes, p, c, then):
        """A message of ``nbytes`` from rank a to rank b; ``then(arrival)``."""
        cost, ha, hb = self.costs, self.host[a], self.host[b]
        on = not self.spare
        if a == b:
            return self.sched.submit(t, [(self.comm[a], cost.local, 0.0,
                                          self._tag(a, "messages", c, on))], then)
        end = cost.msg + cost.byte * nbytes
        send = (self.comm[a], end, 0.0, self._tag(a, "messages", c, on))
        recv = (self.comm[b], end, 0.0, self._tag(b, "messages", c, on))
        if ha == hb:
            return self.sched.submit(t, [send, recv], then)
        if c == 0:
            row = self.wire.setdefault(p, [0, {}])
            row[0] += nbytes
            row[1][ha] = row[1].get(ha, 0) + nbytes
            row[1][hb] = row[1].get(hb, 0) + nbytes
        wire = 8.0 * nbytes / (cost.eta * self.rate)   # egress, then ingress from lam on
        self.sched.submit(t, [send, (self.links[ha][0], wire, cost.lat - wire, None),
                              (self.links[hb][1], wire, 0.0, None), recv], then)

    # -- the step -------------------------------------------------------------------------------
    def predict(self, steps=None):
        """Simulate ``steps`` steps of every worker (BSP / ASYNC: 5, SSP: 2 s + 7) and return the
        :class:`Result` of the steady state."""
        t = self.topo
        ssp = t.consistency == SSP
        s = t.staleness if ssp else 0
        steps = steps or (2 * s + 7 if ssp else 5)
        self.sched, self.wire, self.gathered, self.applied = Scheduler(self.n_resources), {}, {}, {}
        self.tags = {}
        # version[w][p][c]: the answer to step c's push of param p has reached worker w
        self.version = [[[Signal() for _ in range(steps)] for _ in self.count] for _ in range(t.W)]
        self.ends = [[0.0] * steps for _ in range(t.W)]
        self.steps = steps
        for w in t.workers():
            self._forward(w, 0, 0, 0.0)
        self.sched.run()
        ends = [max(e[c] for e in self.ends) for c in range(steps)]
        k = max(1, (steps - 1) // 4 * 2)        # an even number of the last intervals
        spacing = (ends[-1] - ends[-1 - k]) / float(k)
        # in the steady state no core or link can do more than a step's work per step
        return self._result(max([spacing] + [v / steps for v in self.sched.load]),
                            s if ssp else None)

    def _forward(self, w, c, i, now, k=0):
        """Forward of layer i in pass k of step c, once the params it reads are fresh enough."""
        if c >= self.steps:
            return
        if i == len(self.net.layers):
            return self._backward(w, c, i - 1, now, k)
        t, lp = self.topo, self.lp
        need = []
        back = c - 1 - (t.staleness if t.consistency == SSP else 0)
        if k == 0 and back >= 0 and (i == 0 or self.opts.wait_free):
            params = lp.reads[i] if self.opts.wait_free else range(len(self.count))
            need = [self.version[w][p][back] for p in params if p not in self.plan.tables]
        r = self.proc[w]

        def go(t1):
            self._work(t1, r, self.fwd[i], "compute", c, lambda t2: self._forward(w, c, i + 1, t2, k),
                       compute=True)
        tables = [p for p in lp.reads[i] if p in self.plan.tables] if k == 0 else []
        when_all(need, (lambda t1: self._lookup(w, c, tables[0], t1, go)) if tables else go, now)

    def _backward(self, w, c, i, now, k):
        lp, last = self.lp, k == self.param.iter_size - 1
        if i < 0:
            if not last:
                return self._forward(w, c, 0, now, k + 1)
            self.ends[w][c] = now
            for p in lp.leftover if self.opts.wait_free else reversed(range(len(self.count))):
                self._push(w, p, c, now)
            return self._forward(w, c + 1, 0, now)

        def after(t2):
            if last and self.opts.wait_free:
                for p in lp.ready_after[i]:
                    self._push(w, p, c, t2)
            self._backward(w, c, i - 1, t2, k)
        if self.net.layer_need_backward[i]:
            self._work(now, self.proc[w], self.bwd[i], "compute", c, after, compute=True)
        else:
            after(now)

    # -- dense params: worker → stub → servers → stubs → workers --------------------------------
    def _push(self, w, p, c, now):
        if p in self.plan.sfb:
            return self._push_factors(w, p, c, now)
        if p in self.plan.tables:
            return self._push_rows(w, p, c, now)
        t, n = self.topo, self.count[p]
        stub = t.stub_of_worker(w)
        if t.consistency == SSP:             # a push carries a copy of the diff
            self._work(now, self.proc[w], self.costs.array("copy", n), "messages", c, None)
        key = ("stub", stub, p, c)
        if key not in self.gathered:
            self.gathered[key] = Join(len(t.workers_of_stub(stub)),
                                      lambda t1: self._stub_send(stub, p, c, t1))
        self._msg(now, self.proc[w], self.proc[stub], n * self.itemsize, p, c, self.gathered[key])

    def _stub_send(self, stub, p, c, now):
        """The stub's sum of its workers' gradients (times 1 / K), one message per slice."""
        t, n = self.topo, self.count[p]
        g, rs, k = t.group_of_stub(stub), self.proc[stub], len(t.workers_of_stub(stub))
        sg = t.server_group_of(g)

        def send(t1):
            for sl, (off, size, j) in enumerate(t.slices[p]):
                server = t.server(sg, j)
                self._msg(t1, rs, self.proc[server], size * self.itemsize, p, c,
                          self._server_join(server, p, sl, size, g, c))
        if t.K > 1:
            self._work(now, rs, k * self.costs.array("add", n), "messages", c, send)
        else:
            send(now)

    def _server_join(self, server, p, sl, size, g, c):
        bsp = self.topo.consistency == BSP
        key = ("server", server, p, sl, c, None if bsp else g)
        if key not in self.gathered:
            stubs = self.stubs_of[g]
            self.gathered[key] = Join(len(stubs), lambda t1: self._update(server, p, size, g, c, t1))
        return self.gathered[key]

    def _update(self, server, p, size, g, c, now):
        """Sum the shares (BSP: of every group), step the slice, answer the stubs."""
        t, cost = self.topo, self.costs
        rs, stubs = self.proc[server], self.stubs_of[g]
        shares = len(stubs) if len(stubs) > 1 else 0          # sums and the 1 / G scaling
        seconds = shares * cost.array("add", size) + cost.array("update", size)
        if t.consistency != BSP or t.SG > 1:      # answers carry a snapshot
            seconds += cost.array("copy", size)
        nbytes = size * self.itemsize
        sync = t.SG > 1 and (c + 1) % t.cluster.sync_frequency == 0

        def answer(t1):
            if sync:                              # the replicas of the slice in other groups
                sg, j = t.server_index(server)
                for other in range(t.SG):
                    if other != sg:
                        q = self.proc[t.server(other, j)]
                        self._msg(t1, rs, q, nbytes, p, c, lambda t2, q=q: self._work(
                            t2, q, cost.array("add", size), "server", c, None))
            for stub in stubs:
                self._msg(t1, rs, self.proc[stub], nbytes, p, c,
                          lambda t2, st=stub: self._forward_param(st, p, size, c, t2))
        self._work(now, rs, seconds, "server", c, answer)

    def _forward_param(self, stub, p, size, c, now):
        t = self.topo
        for w in t.workers_of_stub(stub):
            key = ("param", w, p, c)
            if key not in self.gathered:
                self.gathered[key] = Join(len(t.slices[p]), self.version[w][p][c].fire)
            self._msg(now, self.proc[stub], self.proc[w], size * self.itemsize, p, c, self.gathered[key])

    # -- SFB weights: factors to every worker, a rebuild and a replica step at each -------------
    def _push_factors(self, w, p, c, now):
        t, layer = self.topo, self.net.layers[self.plan.sfb[p]]
        rows = layer.m // t.K * self.param.iter_size
        nbytes = rows * (layer.num_output + layer.k) * self.itemsize
        for v in t.workers():
            key = ("sfb", v, p, c)
            if key not in self.gathered:
                self.gathered[key] = Join(t.W, lambda t1, v=v: self._rebuild(v, p, c, t1))
            if v == w:
                self.gathered[key](now)
            else:
                self._msg(now, self.proc[w], self.proc[v], nbytes, p, c, self.gathered[key])

    def _rebuild(self, w, p, c, now):
        seconds = self.topo.W * self.fwd[self.plan.sfb[p]] + self.costs.array("update", self.count[p])
        self._work(now, self.proc[w], seconds, "server", c, self.version[w][p][c].fire, compute=True)

    # -- sharded tables: rows to every shard; the next forward looks its rows up ----------------
    def _table(self, p):
        """(ids per shard, row width, rows per shard) of table param p (ids taken distinct)."""
        t, li = self.topo, self.plan.tables[p]
        ids = min(int(self.net.bottom_vecs[li][0].count) // t.K, self.plan.rows[p])
        return ids / float(t.P), self.count[p] // self.plan.shapes[p][0], self.plan.rows[p] / float(t.P)

    def _push_rows(self, w, p, c, now):
        t = self.topo
        per, width, held = self._table(p)
        for j in range(t.P):
            rs = self.proc[t.server(0, j)]
            key = ("rows", j, p, c)
            if key not in self.gathered:
                done = self.applied.setdefault((p, j, c), Signal())
                self.gathered[key] = Join(t.W, lambda t1, rs=rs, done=done: self._work(
                    t1, rs, self.costs.array("update", int(held * width)), "server", c, done.fire))
            self._msg(now, self.proc[w], rs, int(per * (8 + width * self.itemsize)), p, c,
                      self.gathered[key])

    def _lookup(self, w, c, p, now, then):
        t = self.topo
        per, width, _ = self._table(p)
        r, done = self.proc[w], Join(t.P, then)
        for j in range(t.P):
            rs = self.proc[t.server(0, j)]
            prev = [self.applied.setdefault((p, j, c - 1), Signal())] if c else []

            def serve(t1, rs=rs, prev=prev):       # held until the shard took the last step
                when_all(prev, lambda t2: self._work(
                    t2, rs, self.costs.array("copy", int(per * width)), "server", c,
                    lambda t3: self._msg(t3, rs, r, int(per * (8 + width * self.itemsize)), p, c,
                                         done)), t1)
            self._msg(now, r, rs, int(per * 8), p, c, serve)

    # -- the result -----------------------------------------------------------------------------
    def _result(self, period, staleness):
        t, busy = self.topo, self.sched.busy
        need = self.net.layer_need_backward
        compute = (sum(self.fwd) + sum(b for b, n in zip(self.bwd, need) if n)) * self.param.iter_size

        def on_core(r, kind):                # step 0's work on rank r's own core
            return sum(v for (q, k, c, cpu), v in busy.items() if q == r and k == kind and c == 0 and cpu)
        ranks = sorted({self.proc[w] for w in t.workers()})
        r = max(ranks, key=lambda q: on_core(q, "server") + on_core(q, "messages"))
        server, messages = on_core(r, "server"), on_core(r, "messages")
        barrier = self.cv * compute * math.sqrt(2 * math.log(t.G)) if t.G > 1 else 0.0
        if staleness is not None:
            barrier /= staleness + 1.0
        routes = []
        for p, name in enumerate(self.net.param_display_names):
            wire, hosts = self.wire.get(p, [0, {}])
            route = "sfb" if p in self.plan.sfb else "table" if p in self.plan.tables else "dense"
            routes.append((name, self.count[p], route, wire, max(hosts.values()) if hosts else 0))
        return Result(step=period + barrier, compute=compute, server=server, messages=messages,
                      waiting=max(0.0, period - compute - server - messages), barrier=barrier,
                      routes=routes, hosts=self.hosts, groups=t.G)


def default_cluster(hosts):
    """One worker group of one worker per host; one server group, a server on every host."""
    from ..proto import caffe_pb2
    c = caffe_pb2.ClusterParameter()
    c.nworker_groups, c.nservers_per_group = hosts, hosts
    return c


def predict(net_param, solver_param, cluster, costs, hosts, rate, batch=None, host=None,
            spare_core=False, opts=None, net=None):
    """The :class:`Result` for ``net_param`` trained by ``solver_param`` on ``cluster`` over
    ``hosts`` hosts linked at ``rate`` bits/s. ``batch``: a worker group's (default: the net's);
    ``host``: a measured host of the calibration file (default: the compute times measured on this
    machine); ``net``: the net already built at that batch. Adds ``samples_per_s``, ``plain_step``
    (the single-process solver's step at a worker's sub-batch m: compute + every param's update; a
    host profile's measured step) and ``efficiency`` = samples/s / (W m / plain_step), W workers:
    with one worker per host, against that many hosts each training alone."""
    batch = batch or net_batch(net_param)
    K = cluster.nworkers_per_group
    if batch % K:
        raise CaffeError("batch %d does not split into %d workers per group" % (batch, K))
    net = net or build_net(net_param, batch)
    names = net._layer_names
    times = costs.layer_times(net_param.name, names, batch // K, host)
    model = Model(net, solver_param, cluster, opts or waitfree.options(cluster), costs, times,
                  hosts, rate, spare_core)
    result = model.predict()
    compute = sum(times[0]) + sum(b for b, n in zip(times[1], net.layer_need_backward) if n)
    plain = compute * solver_param.iter_size   # a host profile's measured step has its update
    if not host:
        plain += sum(costs.array("update", n) for n in model.count)
    result.batch, result.plain_step, result.model = batch, plain, model
    result.samples_per_s = cluster.nworker_groups * batch / result.step
    result.efficiency = result.samples_per_s / (model.topo.W * (batch // K) / plain)
    return result
