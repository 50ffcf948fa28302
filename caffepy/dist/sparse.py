"""Sharded sparse parameters: Embed-like row tables spread over servers, row by row.

Row ``r`` of a table with ``R`` rows lives on server ``r % S`` at local row ``r // S``
(:class:`ShardMap`); server ``s`` stores only its ``ceil((R - s) / S)`` rows (:class:`TableShard`),
with the solver history of those rows. A worker never ships the table:

- forward: the ids of the batch → the unique ids → one ``LOOKUP`` per server holding some of them
  (local row ids) → ``ROWS`` answers written into the worker's copy of the table (only those rows);
- backward: the gradient rows of the unique ids (the layer accumulated repeated ids already) →
  one ``SPARSE_GRAD`` per server (local row ids + rows).

At a server the gradient rows of all workers of a BSP step are summed into the shard, divided by
the number of workers and stepped with the solver's own ``update_rule`` (one implementation,
:func:`step_array`): ``exact`` (default) steps the whole shard, so momentum and weight decay act on
untouched rows exactly as the dense solver does; ``lazy`` steps only the touched rows (the usual
sparse-SGD shortcut: cheaper, equal to the dense path only without momentum, decay or history).

Downloading (:meth:`ShardMap.assemble`) interleaves the shards back into the original row order.
:func:`reshard` moves a table onto another number of servers; with one server (evaluation) the
single shard is the whole table (shard sizes scale as ``ceil(R / S)``), and as ids are always
global the mapping is invisible to the trainer.

Fewer servers than the tables were sized for (ClusterParameter ``tables_sharded_for`` N >
``nservers_per_group`` P; the seed of Caffe2's parameter servers): every table's rows (its hash
size) are scaled by the one factor P / N, ``R' = ceil(R P / N)`` (:func:`scaled_rows`), so each
server keeps about the ``R / N`` rows it was sized for; id ``i`` of the net then reads and updates
row ``i % R'`` (ids that collide share a row, as hashed features do). The run equals the single
process on a net whose table has R' rows and whose ids are taken modulo R'. Downloaded, the
net's R-row table holds at row i the scaled row ``i % R'``, so the plain net reads what training
used; checkpoints hold the scaled table (R' rows), which a resume with the same setting reads.

Wire format: a ``DistHeader`` (kind, param = table index, step, flag = number of workers summed)
plus raw numpy buffers: ``LOOKUP`` [local ids int64], ``ROWS`` [local ids int64, rows],
``SPARSE_GRAD`` [local ids int64, rows]. No pickle.
"""
import numpy as np

from ..errors import CaffeError
from . import transport as T

LOOKUP, ROWS, SPARSE_GRAD = 40, 41, 42
T.KIND_NAMES.update({LOOKUP: "LOOKUP", ROWS: "ROWS", SPARSE_GRAD: "SPARSE_GRAD"})


def step_array(values, g, hist, rule, solver_param, rate, lr_mult, decay_mult, it):
    """SGDSolver's regularize → update rule → apply on one array (a slice, shard or rows)."""
    dt = values.dtype.type
    local_decay = dt(solver_param.weight_decay) * dt(decay_mult)
    if local_decay:
        if solver_param.regularization_type == "L2":
            g += local_decay * values
        else:
            g += local_decay * np.sign(values)
    rule(g, hist, dt(rate) * dt(lr_mult), solver_param, it + 1)
    values -= g


class ShardMap(object):
    """Row ``r`` of ``rows`` on shard ``r % nshards`` at local row ``r // nshards``."""

    def __init__(self, rows, nshards):
        if rows < 1 or nshards < 1:
            raise CaffeError("a sharded table needs rows >= 1 and shards >= 1 (got %d, %d)"
                             % (rows, nshards))
        self.rows, self.S = int(rows), int(nshards)

    def shard_rows(self, s):
        """How many rows shard ``s`` holds: ceil((rows - s) / S)."""
        return max(0, (self.rows - s + self.S - 1) // self.S)

    def global_ids(self, s):
        return np.arange(s, self.rows, self.S, dtype=np.int64)

    def split(self, ids):
        """Unique global ids of ``ids`` → (unique ids, [(shard, positions in unique, local ids)])."""
        uniq = np.unique(np.asarray(ids).astype(np.int64).reshape(-1))
        if uniq.size and (uniq[0] < 0 or uniq[-1] >= self.rows):
            bad = uniq[0] if uniq[0] < 0 else uniq[-1]
            raise CaffeError("row id %d outside the table's %d rows" % (bad, self.rows))
        owner = uniq % self.S
        parts = []
        for s in range(self.S):
            pos = np.nonzero(owner == s)[0]
            if pos.size:
                parts.append((s, pos, uniq[pos] // self.S))
        return uniq, parts

    def scatter(self, table):
        """The shards of a full table (copies)."""
        return [np.array(table[s::self.S]) for s in range(self.S)]

    def assemble(self, shards):
        """The full table, rows in the original order, from every shard's values."""
        shards = list(shards)
        if len(shards) != self.S:
            raise CaffeError("assembling a table of %d shards from %d" % (self.S, len(shards)))
        out = np.empty((self.rows,) + shards[0].shape[1:], shards[0].dtype)
        for s, values in enumerate(shards):
            if values.shape[0] != self.shard_rows(s):
                raise CaffeError("shard %d has %d rows, expected %d"
                                 % (s, values.shape[0], self.shard_rows(s)))
            out[s::self.S] = values
        return out


def reshard(shards, rows, nshards):
    """The shards of a table held by ``len(shards)`` servers, moved onto ``nshards`` servers."""
    return ShardMap(rows, nshards).scatter(ShardMap(rows, len(shards)).assemble(shards))


class TableShard(object):
    """Server ``s``'s rows of one table: values, history, and the BSP gradient sum of a step."""

    def __init__(self, smap, s, values, n_history=1, mode="exact"):
        if mode not in ("exact", "lazy"):
            raise CaffeError("sparse update mode must be exact or lazy (got '%s')" % mode)
        if values.shape[0] != smap.shard_rows(s):
            raise CaffeError("shard %d of a %d-row table over %d servers has %d rows, got %d"
                             % (s, smap.rows, smap.S, smap.shard_rows(s), values.shape[0]))
        self.map, self.s, self.mode = smap, s, mode
        self.values = np.array(values)
        self.history = [np.zeros_like(self.values) for _ in range(n_history)]
        self.grad = np.zeros_like(self.values)
        self.touched = np.zeros(self.values.shape[0], bool)
        self.pending = {}        # src -> [(local ids, gradient rows)] of the step being gathered

    @property
    def received(self):
        """SPARSE_GRAD messages held for the step being gathered."""
        return sum(len(v) for v in self.pending.values())

    @property
    def row_ids(self):
        """The global ids of the rows held here (in local order)."""
        return self.map.global_ids(self.s)

    @property
    def nbytes(self):
        return sum(a.nbytes for a in [self.values] + self.history)

    def lookup(self, local):
        return self.values[local]

    def accumulate(self, local, rows, src=0):
        """Hold worker ``src``'s gradient rows; :meth:`apply` sums them in worker order, so the
        sum does not depend on the order the messages arrived in (bit-reproducible BSP runs)."""
        self.pending.setdefault(src, []).append((local, rows))

    def _gather(self):
        for src in sorted(self.pending):
            for local, rows in self.pending[src]:
                np.add.at(self.grad, local, rows)
                self.touched[local] = True
        self.pending = {}

    def apply(self, nworkers, rule, solver_param, rate, lr_mult, decay_mult, it):
        """Step the shard with the mean of ``nworkers`` workers' gradients; clear the sum."""
        self._gather()
        dt = self.values.dtype.type
        if self.mode == "exact":
            g = self.grad
            if nworkers > 1:
                g *= dt(1.0) / dt(nworkers)
            step_array(self.values, g, self.history, rule, solver_param, rate, lr_mult,
                       decay_mult, it)
            self.grad = np.zeros_like(self.values)
        else:
            rows = np.nonzero(self.touched)[0]
            g = self.grad[rows]
            if nworkers > 1:
                g *= dt(1.0) / dt(nworkers)
            values, hist = self.values[rows], [h[rows] for h in self.history]
            step_array(values, g, hist, rule, solver_param, rate, lr_mult, decay_mult, it)
            self.values[rows] = values
            for h, part in zip(self.history, hist):
                h[rows] = part
            self.grad[rows] = 0
        self.touched[:] = False


def scaled_rows(rows, servers, sized_for):
    """Caffe2's fit for fewer servers: a table of ``rows`` sized for ``sized_for`` servers, held by
    ``servers`` < ``sized_for``, keeps ``ceil(rows * servers / sized_for)`` rows (one factor for
    every table, so each server keeps the share it was sized for); otherwise ``rows``."""
    if sized_for <= servers:
        return rows
    return max(1, (rows * servers + sized_for - 1) // sized_for)


class SparseTableClient(object):
    """A worker's side of one sharded table: lookups before forward, gradient rows after backward.

    ``table`` is the worker net's param Blob (``(rows, dim)``); only the rows a batch touches are
    ever written into it. ``servers`` lists the endpoint of shard 0..S-1. ``rows`` (default: the
    blob's) is the hash size the servers hold: an id ``i`` of the net reads and updates the
    servers' row ``i % rows`` (scaled tables, :func:`scaled_rows`); the worker writes that row into
    its table at ``i`` and sends, per server row, the sum of the gradient rows of its ids.
    """

    def __init__(self, index, table, servers, rows=None):
        self.index, self.table = index, table
        self.rows = int(table.shape[0] if rows is None else rows)
        self.map = ShardMap(self.rows, len(servers))
        self.servers = list(servers)
        self.ids = self.uniq = self.inverse = None
        self.parts = []

    def hashed(self, ids):
        """(the batch's unique ids, the servers' rows they hash to, each id's index among those
        unique rows); ids outside the net's table are an error."""
        ids = np.unique(np.asarray(ids).astype(np.int64).reshape(-1))
        n = self.table.shape[0]
        if ids.size and (ids[0] < 0 or ids[-1] >= n):
            raise CaffeError("row id %d outside the table's %d rows"
                             % (ids[0] if ids[0] < 0 else ids[-1], n))
        uniq, inverse = np.unique(ids % self.rows, return_inverse=True)
        return ids, uniq, inverse.reshape(-1)

    def lookup_messages(self, ids, step):
        """The LOOKUP messages for the ids of a batch: [(dst, header, buffers)]."""
        self.ids, self.uniq, self.inverse = self.hashed(ids)
        _, self.parts = self.map.split(self.uniq)
        return [(self.servers[s], T.header(LOOKUP, param=self.index, step=step), [local])
                for s, _, local in self.parts]

    def on_rows(self, h, bufs):
        """Write a ROWS answer into the worker's table, at every id of the last lookup that
        hashes to one of its rows."""
        local, rows = bufs[0], bufs[1].reshape((-1,) + self.table.shape[1:])
        where = np.full(self.uniq.size, -1, np.int64)
        where[np.searchsorted(self.uniq, local * self.map.S + int(h.slice))] = np.arange(local.size)
        k = where[self.inverse]
        self.table.data[self.ids[k >= 0]] = rows[k[k >= 0]]

    def grad_parts(self, ids):
        """The gradient rows of a batch's ids, summed per server row: {shard: (local ids, rows)}."""
        ids, uniq, inverse = self.hashed(ids)
        rows = np.zeros((uniq.size,) + self.table.shape[1:], self.table.dtype)
        np.add.at(rows, inverse, self.table.diff[ids])
        return {s: (local, rows[pos]) for s, pos, local in self.map.split(uniq)[1]}

    def grad_messages(self, step):
        """SPARSE_GRAD messages with the gradient rows of the last lookup: [(dst, header, bufs)]."""
        return [(self.servers[s], T.header(SPARSE_GRAD, param=self.index, step=step), [local, rows])
                for s, (local, rows) in sorted(self.grad_parts(self.ids).items())]

    def clear(self):
        """Zero the diff rows of the last lookup (instead of the whole table)."""
        if self.ids is not None and self.ids.size:
            self.table.diff[self.ids] = 0


def serve(shard, h, bufs, slice_index=None):
    """A server's answer to LOOKUP (a ROWS message) or its handling of SPARSE_GRAD (None)."""
    if h.kind == LOOKUP:
        local = bufs[0].astype(np.int64, copy=False)
        return T.header(ROWS, param=h.param, step=h.step,
                        slice=shard.s if slice_index is None else slice_index), \
            [local, shard.lookup(local)]
    if h.kind == SPARSE_GRAD:
        local = bufs[0].astype(np.int64, copy=False)
        shard.accumulate(local, bufs[1].reshape((local.size,) + shard.values.shape[1:]), h.src)
        return None
    raise CaffeError("sharded table: unexpected message %s" % T.KIND_NAMES.get(h.kind, h.kind))
