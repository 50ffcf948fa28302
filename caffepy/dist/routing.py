"""SFB weights and sharded tables inside ``dist.train`` (BSP, one server group).

:func:`make_plan` decides, once, from the solver's train net and the :class:`CommOptions`:

- SFB params (:mod:`.sfb`): InnerProduct weights whose workers exchange sufficient factors
  (``SFB_FACTORS``, every worker to every worker) and step their own replica with the solver's
  update rule and a replica of its history; never on a server.
- sharded tables (:mod:`.sparse`): Embed weights, row r on server ``r % P`` of server group 0
  (:class:`TableHost`); workers send ``LOOKUP`` before the Embed layer's forward and
  ``SPARSE_GRAD`` (to every shard, empty where no id hit it) after backward. With ClusterParameter
  ``tables_sharded_for`` above ``nservers_per_group`` every table is scaled to fit
  (:func:`caffepy.dist.sparse.scaled_rows`: ``plan.rows``; ids hashed into the scaled table).

Both are left out of the topology's dense slices. Under ASYNC / SSP, with several server groups
(or, for tables, iter_size > 1) an explicit request is an error and the defaults stay dense.
Worker 0 seeds the SFB replicas of the other workers and the table shards (``INIT``); its READY
messages carry the SFB values and history for the coordinator's download; servers write their
shards into their checkpoint files (``DistSlice.table_shards``) and answer ``PULL`` with them
(``SLICE`` with ``flag = 1``).
"""
import numpy as np

from ..errors import CaffeError, SolverError
from ..log import info
from ..solvers import debug, lr_policies
from . import checkpoint, sfb, sparse, transport as T
from .topology import BSP, Topology, consistency_name

_NO_WAIT = 1 << 62


class Plan(object):
    def __init__(self):
        self.sfb = {}       # param -> layer index
        self.tables = {}    # param -> layer index
        self.shapes = {}    # param -> shape
        self.rows = {}      # table param -> rows the servers hold (scaled to fit, else its own)
        self.choices = {}   # layer name -> sfb.Choice (AUTO's cost model, with its inputs)
        self.mode = "exact"

    def __bool__(self):
        return bool(self.sfb or self.tables)
    __nonzero__ = __bool__

    def params(self):
        return set(self.sfb) | set(self.tables)


def _refuse(what, why):
    raise CaffeError("%s: only with %s" % (what, why))


def make_plan(net, cluster, opts, solver_param):
    plan = Plan()
    plan.mode = opts.sparse_update.lower()
    if plan.mode not in ("exact", "lazy"):
        raise CaffeError("sparse_update must be EXACT or LAZY (got %s)" % opts.sparse_update)
    clip = solver_param.clip_gradients >= 0     # the servers' norm covers dense slices only
    simple = consistency_name(cluster) == BSP and cluster.nserver_groups == 1 and not clip
    why = "BSP and one server group" + (", without clip_gradients" if clip else "")
    if opts.sfb_mode not in ("AUTO", "ALWAYS", "NEVER"):
        raise CaffeError("sfb_mode must be AUTO, ALWAYS or NEVER (got %s)" % opts.sfb_mode)
    both = set(opts.sfb_layers) & set(opts.dense_layers)
    if both:
        raise CaffeError("layers both in sfb_layer and dense_layer: %s" % ", ".join(sorted(both)))
    want_sfb = opts.sfb_mode != "NEVER" or bool(opts.sfb_layers)
    if want_sfb and not simple:
        if opts.sfb_mode == "ALWAYS" or opts.sfb_layers:
            _refuse("SFB", why)
        want_sfb = False           # AUTO (the default) quietly stays dense outside BSP
    if want_sfb:
        overrides = {n: False for n in opts.dense_layers}
        if opts.sfb_mode == "ALWAYS":
            shared = {o for o in net.param_owners if o >= 0}
            for li, p in sfb._weight_params(net).items():
                overrides.setdefault(net._layer_names[li], p not in shared)
        elif opts.sfb_mode == "NEVER":
            overrides.update({n: False for li, n in enumerate(net._layer_names)
                              if net.layers[li].type == "InnerProduct"})
        overrides.update({n: True for n in opts.sfb_layers})
        cost = sfb.CostModel(Topology(cluster, [int(b.count) for b in net.learnable_params]),
                             solver_param.iter_size)
        plan.sfb = {sl.param: li for li, sl in sfb.plan(net, overrides, cost, plan.choices).items()}
    if opts.shard_tables:
        names = opts.sharded_tables or [n for li, n in enumerate(net._layer_names)
                                        if net.layers[li].type == "Embed"]
        explicit = bool(opts.sharded_tables)
        if names and (not simple or solver_param.iter_size > 1):
            if explicit:
                _refuse("sharded tables", why + " and iter_size 1")
            names = []
        index = {li: p for p, (li, k) in enumerate(net.param_layer_indices) if k == 0}
        shared = {o for o in net.param_owners if o >= 0}
        for name in names:
            if name not in net._layer_names:
                raise CaffeError("sharded_table names an unknown layer '%s'" % name)
            li = net._layer_names.index(name)
            p = index.get(li)
            if net.layers[li].type != "Embed" or p is None or p in shared:
                if explicit:
                    raise CaffeError("layer '%s' (%s) cannot be sharded: not an Embed layer with its "
                                     "own table" % (name, net.layers[li].type))
                continue
            plan.tables[p] = li
    for p in plan.params():
        plan.shapes[p] = tuple(net.learnable_params[p].shape)
    if cluster.tables_sharded_for < 0:
        raise CaffeError("tables_sharded_for must be >= 0 (got %d)" % cluster.tables_sharded_for)
    for p in plan.tables:
        rows = plan.shapes[p][0]
        plan.rows[p] = sparse.scaled_rows(rows, cluster.nservers_per_group, cluster.tables_sharded_for)
    return plan


def log_tables(plan, net, cluster):
    """One line per sharded table whose rows were scaled to fit fewer servers."""
    for p in sorted(plan.tables):
        if plan.rows[p] < plan.shapes[p][0]:
            info("routing.py", "Sharded table '%s' sized for %d servers, held by %d: %d rows scaled "
                 "to %d (ids hashed modulo %d)" % (net.param_display_names[p],
                                                   cluster.tables_sharded_for,
                                                   cluster.nservers_per_group, plan.shapes[p][0],
                                                   plan.rows[p], plan.rows[p]))


def log_choices(plan):
    """One line per InnerProduct weight the SFB cost model decided (AUTO), with its inputs."""
    for name in sorted(plan.choices):
        info("routing.py", plan.choices[name].describe())


def expand_tables(plan, net, history=None):
    """After a download: a scaled table's rows ``[0, R')`` hold the servers' table; every row i of
    the net's table (and of its history) gets the scaled row ``i % R'`` its id reads."""
    n = len(net.learnable_params)
    for p in plan.tables:
        scaled, rows = plan.rows[p], plan.shapes[p][0]
        if scaled == rows:
            continue
        targets = [net.learnable_params[p].data]
        if history is not None and len(history) % n == 0:
            targets += [history[k * n + p] for k in range(len(history) // n)]
        for t in targets:
            full = t.reshape(rows, -1)
            full[scaled:] = full[np.arange(scaled, rows) % scaled]


class RoutedMixin(object):
    """Worker side: SFB factors and replicas, table lookups and gradient rows."""

    def setup_routes(self, plan, solver_cls, current_step, restored):
        net, topo = self.net, self.topo
        self.plan, self.rule = plan, solver_cls.update_rule
        self.lr_state = lr_policies.LrState(current_step)
        self.sfb_layers = {li: sfb.SFBLayer(li, p, net.layers[li]) for p, li in plan.sfb.items()}
        self.sfb_of = {sl.param: sl for sl in self.sfb_layers.values()}
        self.collector = sfb.FactorCollector(net, self.sfb_layers) if self.sfb_layers else None
        self.sfb_hist = {p: [np.zeros(plan.shapes[p], net.learnable_params[p].dtype)
                             for _ in range(solver_cls.n_history)] for p in plan.sfb}
        self.sfb_pending = {}
        servers = [topo.server(0, j) for j in range(topo.P)]
        self.clients = {p: sparse.SparseTableClient(p, net.learnable_params[p], servers, plan.rows[p])
                        for p in plan.tables}
        self.table_layer = {li: p for p, li in plan.tables.items()}
        self.table_ids, self.rows_pending = {}, 0
        for p in plan.tables:
            self.version[p] = _NO_WAIT
        names = net.param_display_names
        for p in plan.sfb:
            if restored is not None:
                values, hist = restored[names[p]]
                self.flat[p][...] = values
                for h, saved in zip(self.sfb_hist[p], hist):
                    h.reshape(-1)[...] = saved
            if restored is not None or self.send_init:
                self.version[p] = 0
        self.not_checkpointed = set(plan.tables)
        self.routes = {T.INIT: self._on_init, sfb.SFB_FACTORS: self._on_factors,
                       sparse.ROWS: self._on_rows}

    def run(self, stopping):
        try:
            super(RoutedMixin, self).run(stopping)
        finally:
            if self.collector is not None:
                self.collector.detach()

    # -- init -----------------------------------------------------------------------------------
    def _push_init(self):
        super(RoutedMixin, self)._push_init()
        for p, client in self.clients.items():
            for s, shard in enumerate(client.map.scatter(client.table.data[:client.rows])):
                self.ep.send(client.servers[s], T.header(T.INIT, param=p, slice=s), [shard])
        for p in self.plan.sfb:
            for w in self.topo.workers():
                if w != self.ep.id:
                    self.ep.send(w, T.header(T.INIT, param=p), [self.flat[p].copy()])

    def _on_init(self, h, bufs):
        self.flat[h.param][...] = bufs[0]
        self.version[h.param] = 0
        self._apply_ready(h.param)

    # -- gradients ------------------------------------------------------------------------------
    def push(self, p, c):
        if p in self.sfb_of:
            pairs, self.collector.factors[p] = self.collector.factors[p], []
            u = np.concatenate([a for a, _ in pairs])
            v = np.concatenate([b for _, b in pairs])
            n = self.param.iter_size
            if n > 1:
                u *= u.dtype.type(1.0) / u.dtype.type(n)
            h, bufs = sfb.message(p, c, self.ep.id, u, v)
            for w in self.topo.workers():
                self.ep.send(w, h, bufs)
        elif p in self.clients:
            client = self.clients[p]
            by_shard = client.grad_parts(self.table_ids.pop(c))
            width = client.table.shape[1:]
            for s, dst in enumerate(client.servers):
                local, rows = by_shard.get(s, (np.zeros(0, np.int64),
                                               np.zeros((0,) + width, client.table.dtype)))
                self.ep.send(dst, T.header(sparse.SPARSE_GRAD, param=p, step=c), [local, rows])
        else:
            super(RoutedMixin, self).push(p, c)

    def _on_factors(self, h, bufs):
        sl = self.sfb_of[h.param]
        w, u, v = sfb.unpack(h, bufs, sl)
        self.sfb_pending.setdefault((h.param, int(h.step)), {})[w] = (u, v)
        self._apply_ready(h.param)

    def _apply_ready(self, p):
        """Step p's replica with every complete step of factors, in step order."""
        while self.version[p] >= 0:
            step = self.start + self.version[p]
            got = self.sfb_pending.get((p, step))
            if got is None or len(got) < self.topo.W:
                return
            del self.sfb_pending[(p, step)]
            blob = self.net.learnable_params[p]
            g = sfb.rebuild(got, self.topo.W)
            rate = lr_policies.learning_rate(self.param, step, self.lr_state)
            sparse.step_array(blob.data, g, self.sfb_hist[p], self.rule, self.param, rate,
                              self.net.params_lr[p], self.net.params_weight_decay[p], step)
            self.version[p] += 1

    # -- lookups --------------------------------------------------------------------------------
    def lookup(self, li, c):
        p = self.table_layer[li]
        ids = self.net.bottom_vecs[li][0].data
        self.table_ids[c] = np.array(ids)
        msgs = self.clients[p].lookup_messages(ids, c)
        self.rows_pending += len(msgs)
        for dst, h, bufs in msgs:
            self.ep.send(dst, h, bufs)
        while self.rows_pending:
            self.take_message(c)

    def _on_rows(self, h, bufs):
        self.clients[h.param].on_rows(h, bufs)
        self.rows_pending -= 1

    def compute(self, c):
        """The plain worker's step, with lookups before each table layer (iter_size is 1)."""
        if not self.table_layer or hasattr(self, "layer_params"):
            return super(RoutedMixin, self).compute(c)
        net = self.net
        net.clear_param_diffs()
        loss, start = 0.0, 0
        for li in sorted(self.table_layer):
            if li > start:
                loss += net.forward_from_to(start, li - 1)
            self.lookup(li, c)
            start = li
        loss += net.forward_from_to(start)
        net.backward_from_to()
        if not np.isfinite(loss):
            raise SolverError(debug.nonfinite_message(net, c, loss))
        return loss

    def _wait_layer(self, i, version, c):      # WaitFreeWorker
        if i in self.table_layer:
            self.lookup(i, c)
        super(RoutedMixin, self)._wait_layer(i, version, c)

    # -- barriers -------------------------------------------------------------------------------
    def ready_buffers(self):
        if self.ep.id != 0:
            return []
        out = []
        for p in sorted(self.plan.sfb):
            out += [self.flat[p].copy()] + [h.reshape(-1).copy() for h in self.sfb_hist[p]]
        return out

    def param_history(self, p):
        return [h.reshape(-1) for h in self.sfb_hist.get(p, ())]


def worker_class(base, plan):
    if not plan:
        return base
    return type("Routed" + base.__name__, (RoutedMixin, base), {})


class TableHost(object):
    """Server side: this server's shard of each sharded table, lookups held until it is current."""

    def __init__(self, server, plan, restored):
        self.server, self.plan = server, plan
        topo = server.topo
        self.nworkers, self.j, self.P = topo.W, server.j, topo.P
        self.start = server.start
        self.shards, self.applied, self.deferred = {}, {}, []
        names = server.meta.names
        if server.sg != 0:
            return
        for p in plan.tables:
            self.applied[p] = 0
            if restored is not None:
                values, hist = restored[names[p]]
                self._make(p, values.reshape(self._shape(p))[self.j::self.P], hist)

    def _shape(self, p):
        """The table the servers hold: the net's, or its rows scaled to fit."""
        return (self.plan.rows[p],) + self.plan.shapes[p][1:]

    def _make(self, p, values, hist=()):
        shape = self._shape(p)
        smap = sparse.ShardMap(shape[0], self.P)
        shard = sparse.TableShard(smap, self.j, values.reshape((-1,) + shape[1:]).astype(
            self.server.dtype), self.server.n_history, self.plan.mode)
        for h, saved in zip(shard.history, hist):
            h[...] = saved.reshape(shape)[self.j::self.P]
        self.shards[p] = shard

    def handles(self, h):
        return h.param in self.plan.tables and h.kind in (T.INIT, sparse.LOOKUP, sparse.SPARSE_GRAD)

    def on_message(self, h, bufs):
        if h.kind == T.INIT:
            self._make(h.param, bufs[0])
            self._retry()
            return
        if not self._ready(h):
            self.deferred.append((h, bufs))
            return
        self._serve(h, bufs)

    def _ready(self, h):
        if h.param not in self.shards:
            return False
        return h.kind != sparse.LOOKUP or self.applied[h.param] >= h.step - self.start

    def _serve(self, h, bufs):
        shard = self.shards[h.param]
        answer = sparse.serve(shard, h, bufs)
        if answer is not None:
            self.server.ep.send(h.src, *answer)
            return
        if shard.received == self.nworkers:
            s = self.server
            shard.apply(self.nworkers, s.rule, s.param, s._rate(h.step), s.meta.lr_mult[h.param],
                        s.meta.decay_mult[h.param], h.step)
            self.applied[h.param] += 1
            self._retry()

    def _retry(self):
        waiting, self.deferred = self.deferred, []
        for h, bufs in waiting:
            self.on_message(h, bufs)

    def pull_messages(self):
        for p in sorted(self.shards):
            shard = self.shards[p]
            yield T.header(T.SLICE, param=p, slice=self.j, flag=1, version=self.applied[p]), \
                [shard.values.copy()] + [x.copy() for x in shard.history]

    def checkpoint_slices(self):
        out = []
        for p in sorted(self.shards):
            shard = self.shards[p]
            shape = self._shape(p)
            s = checkpoint.make_slice(self.server.meta.names[p], p, self.j, 0, self.applied[p],
                                      shard.values, shard.history, int(np.prod(shape)), shape)
            s.table_shards = self.P
            out.append(s)
        return out
