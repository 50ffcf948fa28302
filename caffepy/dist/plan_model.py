"""The performance model behind ``caffepy plan`` (:mod:`caffepy.dist.plan`, whose module doc
gives the method): :class:`Model` simulates every message of a distributed solver's steps (the
compute on each rank's core, the dense params through stubs and servers, the SFB factors, the
sharded tables' rows) over the ranks' cores and the hosts' links; :class:`Result` holds its
prediction.
"""
import math

from ..errors import CaffeError
from . import routing, waitfree
from .simulate import Join, Scheduler, Signal, when_all
from .topology import BSP, SSP, Topology


class Result(object):
    """A prediction. ``step`` (s) and its parts on the busiest worker's core: ``compute``,
    ``server`` (slice updates, SFB rebuilds and replica steps), ``messages`` (engine and stub work),
    ``waiting`` (idle: the wire, other hosts), ``barrier`` (the slowest group's spread);
    ``routes``: per param (name, count, route, wire bytes per step of the cluster, the busiest
    host's bytes in + out). :func:`caffepy.dist.plan.predict` adds ``samples_per_s``,
    ``efficiency``, ``plain_step``."""

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
        self.topo = t = Topology(cluster, self.count, net.param_display_names,
                                 excluded=self.plan.params())
        n = t.n_processes
        if not 1 <= hosts <= n:
            servers = ", %d separate servers" % t.S if cluster.server_worker_separate else ""
            raise CaffeError("%d hosts for a cluster of %d ranks (%d worker groups x %d "
                             "workers%s): every host needs a rank"
                             % (hosts, n, t.G, t.K, servers))
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
            self._work(t1, r, self.fwd[i], "compute", c,
                       lambda t2: self._forward(w, c, i + 1, t2, k), compute=True)
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
            self.gathered[key] = Join(len(stubs),
                                      lambda t1: self._update(server, p, size, g, c, t1))
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
            self._msg(now, self.proc[stub], self.proc[w], size * self.itemsize, p, c,
                      self.gathered[key])

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
        seconds = self.topo.W * self.fwd[self.plan.sfb[p]] + \
            self.costs.array("update", self.count[p])
        self._work(now, self.proc[w], seconds, "server", c, self.version[w][p][c].fire,
                   compute=True)

    # -- sharded tables: rows to every shard; the next forward looks its rows up ----------------
    def _table(self, p):
        """(ids per shard, row width, rows per shard) of table param p (ids taken distinct)."""
        t, li = self.topo, self.plan.tables[p]
        ids = min(int(self.net.bottom_vecs[li][0].count) // t.K, self.plan.rows[p])
        return (ids / float(t.P), self.count[p] // self.plan.shapes[p][0],
                self.plan.rows[p] / float(t.P))

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
        compute = (sum(self.fwd) + sum(b for b, n in zip(self.bwd, need) if n)) * \
            self.param.iter_size

        def on_core(r, kind):                # step 0's work on rank r's own core
            return sum(v for (q, k, c, cpu), v in busy.items()
                       if q == r and k == kind and c == 0 and cpu)
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
