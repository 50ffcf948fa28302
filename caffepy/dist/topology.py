"""The cluster: ClusterParameter → roles, endpoint ids, process placement and param slices.

Cluster fields (``cluster { ... }`` in the solver prototxt, or a ClusterParameter text file given
by ``--cluster``): nworker_groups (1; 0: as many as the launch's MPI ranks make, see
:func:`groups_from_ranks`), nworkers_per_group (1), nserver_groups (1),
nservers_per_group (1), server_worker_separate (false), workspace ("workspace/"), consistency
(BSP | ASYNC | SSP), staleness (0, SSP only), sync_frequency (1: updates between server-group
syncs), engine ("" = mpi under mpiexec with several ranks, else inproc), heartbeat_interval (1 s),
timeout (60 s without a message from a peer one waits on).

Endpoint ids: workers ``0 .. W-1`` (worker ``g * K + k`` is worker k of group g), stubs
``W .. W+G-1`` (stub g of each worker group), servers ``W+G .. W+G+S-1`` (server ``sg * P + j`` is
server j of server group sg), the coordinator ``C = W+G+S``, then the stubs of groups that span
hosts (per-host sums, below). Worker group g talks to server group ``g % nserver_groups``.

Processes (MPI ranks): one per worker; with server_worker_separate one more process per server,
otherwise server s lives in worker rank ``spread[s % W]``, where ``spread`` lists the worker ranks
round the hosts (``set_hosts``: one server per host before a second on any; without hosts, rank
order); the coordinator lives in process 0.

Per-host sums: a group has one stub per host its workers sit on (``set_hosts``; without hosts, or
for a group on one host, just stub g). Stub g lives with worker g.0; the group's stub on another
host (endpoint ids after the coordinator, ``C+1 ..``, described as ``stub g.i``) lives with the
group's first worker on that host. Each stub sums the gradients of its host's workers and sends
that partial sum (times ``1/K``) to the servers, one message per param slice; a server adds the
partials of a group's stubs in stub order before it applies the group's update, and answers every
stub of the group, which forwards to its own workers. So worker gradients and param copies never
cross hosts: per slice and step one message per host goes each way.

Hosts (:func:`learn_hosts`, under MPI): the ranks that share a node are those of MPI's
shared-memory split (``Split_type(COMM_TYPE_SHARED)``, the MPI library's own view of which
processes share memory: what its shared-memory transport uses); processor names only label the
nodes, are the fallback where the split is missing (an MPI before 3.0), and are cross-checked
against it (names are free text: containers all called ``localhost``, one node under two names). (mpi4py is imported inside
:func:`learn_hosts` only.)

Slices: a dense param of count n >= ``SLICE_MIN`` is cut into ``min(n, P)`` contiguous, balanced
slices, a smaller one (biases, small kernels) stays whole (one message, not P); slice k of param p
sits on server ``(k + p) % P`` of each server group (so small params spread too).
Params in ``excluded`` (SFB weights, sharded tables: :mod:`.routing`) have no slices.
"""
import os
import socket

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2, io as proto_io

BSP, ASYNC, SSP = "BSP", "ASYNC", "SSP"
SLICE_MIN = 1 << 16       # elements: params this large are cut across the servers of a group
_BATCH_FIELDS = ("data_param", "memory_data_param", "image_data_param", "hdf5_data_param",
                 "window_data_param")


def load_cluster(solver_param, path=None):
    """The ClusterParameter: the --cluster file if given, else the solver's ``cluster``; validated."""
    if path:
        if not os.path.exists(path):
            raise CaffeError("cluster file %s does not exist" % path)
        cluster = caffe_pb2.ClusterParameter()
        proto_io.read_message(path, cluster)
        where = path
    else:
        cluster = caffe_pb2.ClusterParameter()
        cluster.CopyFrom(solver_param.cluster)
        where = "solver cluster"
    if cluster.nworker_groups < 0:
        raise CaffeError("%s: nworker_groups must be >= 1, or 0 for as many as the launch's ranks "
                         "make (got %d)" % (where, cluster.nworker_groups))
    for field in ("nworkers_per_group", "nserver_groups", "nservers_per_group", "sync_frequency"):
        if getattr(cluster, field) < 1:
            raise CaffeError("%s: %s must be >= 1 (got %d)" % (where, field, getattr(cluster, field)))
    if cluster.staleness < 0:
        raise CaffeError("%s: staleness must be >= 0 (got %d)" % (where, cluster.staleness))
    if cluster.nworker_groups and cluster.nserver_groups > cluster.nworker_groups:
        raise CaffeError("%s: nserver_groups (%d) must not exceed nworker_groups (%d)"
                         % (where, cluster.nserver_groups, cluster.nworker_groups))
    if cluster.engine not in ("", "inproc", "mpi"):
        raise CaffeError("%s: engine must be inproc or mpi (got '%s')" % (where, cluster.engine))
    if solver_param.checkpoint_frequency < 0 or solver_param.checkpoint_after < 0:
        raise CaffeError("checkpoint_after and checkpoint_frequency must be >= 0")
    return cluster


def groups_from_ranks(cluster, ranks, where="cluster"):
    """``nworker_groups: 0``: the groups ``ranks`` MPI ranks make (ranks, less one per server when
    server_worker_separate, over nworkers_per_group), set in ``cluster``; so a job requeued onto
    more or fewer nodes takes the shape its allocation gives (and ``--resume`` keeps the batch)."""
    if cluster.nworker_groups:
        return cluster
    K = cluster.nworkers_per_group
    servers = cluster.nserver_groups * cluster.nservers_per_group if cluster.server_worker_separate else 0
    workers = ranks - servers
    if workers < K or workers % K:
        raise CaffeError("%s: nworker_groups 0 takes the groups from the ranks, but %d ranks%s do not "
                         "make groups of %d workers" % (where, ranks, " less %d servers" % servers
                                                       if servers else "", K))
    cluster.nworker_groups = workers // K
    if cluster.nserver_groups > cluster.nworker_groups:
        raise CaffeError("%s: nserver_groups (%d) must not exceed the %d worker groups %d ranks make"
                         % (where, cluster.nserver_groups, cluster.nworker_groups, ranks))
    return cluster


def consistency_name(cluster):
    return caffe_pb2.ClusterParameter.Consistency.Name(cluster.consistency)


def split_counts(n, parts):
    """Balanced contiguous pieces: [(offset, size)] of ``min(n, parts)`` pieces covering n."""
    parts = max(1, min(n, parts))
    base, extra = divmod(n, parts)
    out, off = [], 0
    for k in range(parts):
        size = base + (1 if k < extra else 0)
        out.append((off, size))
        off += size
    return out


class Topology(object):
    """Who is who, for a cluster and a list of param counts (``net.learnable_params`` sizes)."""

    def __init__(self, cluster, param_counts, param_names=(), excluded=()):
        c = cluster
        self.cluster = c
        self.G, self.K = c.nworker_groups, c.nworkers_per_group
        self.SG, self.P = c.nserver_groups, c.nservers_per_group
        self.W, self.S = self.G * self.K, self.SG * self.P
        self.consistency = consistency_name(c)
        self.staleness = c.staleness if self.consistency == SSP else (0 if self.consistency == BSP else -1)
        self.param_counts = list(param_counts)
        self.param_names = list(param_names) or [str(i) for i in range(len(self.param_counts))]
        # slices[p] = [(offset, size, server_index_in_group)]
        self.slices = []
        self.routing = None     # a caffepy.dist.routing.Plan, set by the trainer
        self.hosts = None       # host of each rank (set_hosts), for host-aware placement
        self._spread = list(range(self.W))
        self._stubs_at(None)
        for p, n in enumerate(self.param_counts):
            if p in excluded:
                self.slices.append([])
                continue
            parts = self.P if n >= SLICE_MIN else 1
            self.slices.append([(off, size, (k + p) % self.P)
                                for k, (off, size) in enumerate(split_counts(n, parts))])

    # -- endpoint ids ---------------------------------------------------------------------------
    def worker(self, g, k):
        return g * self.K + k

    def stub(self, g):
        return self.W + g

    def server(self, sg, j):
        return self.W + self.G + sg * self.P + j

    @property
    def coordinator(self):
        return self.W + self.G + self.S

    @property
    def n_endpoints(self):
        return self.W + self.G + self.S + 1 + len(self._host_stubs)

    def is_stub(self, ep):
        return self.W <= ep < self.W + self.G or ep > self.coordinator

    def stubs_of_group(self, g):
        """Group g's stubs, one per host of its workers (stub g first, on worker g.0's host)."""
        return self._group_stubs[g]

    def group_of_stub(self, ep):
        return ep - self.W if ep < self.coordinator else self._host_stubs[ep - self.coordinator - 1]

    def stub_of_worker(self, w):
        return self._worker_stub[w]

    def workers_of_stub(self, ep):
        """The workers whose gradients stub ``ep`` sums (those of its group on its host)."""
        return self._stub_workers[ep]

    def group_of_worker(self, w):
        return w // self.K

    def workers_of_group(self, g):
        return [self.worker(g, k) for k in range(self.K)]

    def server_group_of(self, g):
        return g % self.SG

    def groups_of_server_group(self, sg):
        return [g for g in range(self.G) if g % self.SG == sg]

    def servers(self):
        return [self.server(sg, j) for sg in range(self.SG) for j in range(self.P)]

    def workers(self):
        return list(range(self.W))

    def stubs(self):
        return [ep for g in range(self.G) for ep in self._group_stubs[g]]

    def server_index(self, ep):
        """(server group, index in group) of server endpoint ``ep``."""
        i = ep - self.W - self.G
        return divmod(i, self.P)

    def slices_of_server(self, j):
        """[(param, slice, offset, size)] held by server j of any server group."""
        return [(p, k, off, size) for p, sl in enumerate(self.slices)
                for k, (off, size, owner) in enumerate(sl) if owner == j]

    def owner_worker(self, p):
        """The worker (of group 0) that owns param p in checkpoints."""
        return p % self.K

    def describe(self, ep):
        if ep < self.W:
            return "worker %d (group %d)" % (ep, self.group_of_worker(ep))
        if self.is_stub(ep):
            g = self.group_of_stub(ep)
            i = self._group_stubs[g].index(ep)
            return "stub %d" % g + (".%d" % i if i else "")
        if ep < self.W + self.G + self.S:
            sg, j = self.server_index(ep)
            return "server %d (server group %d)" % (ep - self.W - self.G, sg)
        return "coordinator"

    # -- processes --------------------------------------------------------------------------------
    def set_hosts(self, hosts):
        """Every rank's host (the same list on every rank): co-located servers then go round the
        hosts, one per host before a second on any (ranks of each host in rank order)."""
        self.hosts = list(hosts)
        by_host = {}
        for r in range(self.W):
            by_host.setdefault(self.hosts[r], []).append(r)
        columns = list(by_host.values())
        self._spread = [col[i] for i in range(max(len(c) for c in columns)) for col in columns
                        if i < len(col)]
        self._stubs_at(self.hosts)

    def _stubs_at(self, hosts):
        """One stub per (group, host of its workers): stub g where worker g.0 is, the others after
        the coordinator (without hosts: one per group)."""
        self._group_stubs, self._stub_workers, self._worker_stub = {}, {}, {}
        self._host_stubs = []        # group of stub ``coordinator + 1 + i``
        for g in range(self.G):
            on = {}
            for w in self.workers_of_group(g):
                on.setdefault(hosts[w] if hosts else None, []).append(w)
            eps = []
            for i, workers in enumerate(on.values()):
                ep = self.stub(g) if i == 0 else self.coordinator + 1 + len(self._host_stubs)
                if i:
                    self._host_stubs.append(g)
                eps.append(ep)
                self._stub_workers[ep] = workers
                for w in workers:
                    self._worker_stub[w] = ep
            self._group_stubs[g] = eps

    def host_of(self, ep):
        return self.hosts[self.process_of(ep)] if self.hosts else None

    @property
    def n_processes(self):
        return self.W + (self.S if self.cluster.server_worker_separate else 0)

    def process_of(self, ep):
        if ep < self.W:
            return ep
        if self.is_stub(ep):
            return self._stub_workers[ep][0]
        if ep < self.W + self.G + self.S:
            s = ep - self.W - self.G
            return self.W + s if self.cluster.server_worker_separate else self._spread[s % self.W]
        return 0

    def endpoints_of_process(self, rank):
        return [ep for ep in range(self.n_endpoints) if self.process_of(ep) == rank]

    def placement(self, net):
        """``{layer or param name: {worker_group, worker, server_shard}}`` for write_net_json."""
        out = {}
        for li, name in enumerate(net._layer_names):
            out[name] = {"worker_group": 0, "worker": 0}
        for p, (li, k) in enumerate(net.param_layer_indices):
            spec = net.net_param.layer[li].param
            key = spec[k].name if k < len(spec) and spec[k].name else "%s:%d" % (net._layer_names[li], k)
            shard = self.slices[p][0][2] if self.slices[p] else None
            out[key] = {"server_shard": shard, "worker": self.owner_worker(p)}
        return out


_NAME_BYTES = 256      # MPI_MAX_PROCESSOR_NAME of MPICH and Open MPI


def host_labels(names, leaders=None):
    """Every rank's host label and the cross-check's notes, from the ranks' processor ``names`` and,
    when MPI's shared-memory split ran, each rank's node ``leaders`` (the lowest world rank of its
    node). The split decides which ranks share a host; a node is labelled with its leader's name,
    made unique (``name#leader``) when two nodes report the same one. Without the split the names
    decide alone."""
    if leaders is None:
        return list(names), []
    notes = []
    nodes = sorted(set(leaders))
    taken = {}
    for n in nodes:
        taken.setdefault(names[n], []).append(n)
    label = {}
    for name, same in taken.items():
        for n in same:
            label[n] = name if len(same) == 1 else "%s#%d" % (name, n)
        if len(same) > 1:
            notes.append("ranks %s sit on %d different nodes (MPI's shared-memory split) but all "
                         "report processor name %s: told apart as %s"
                         % (", ".join(str(r) for r in range(len(names)) if names[r] == name),
                            len(same), name, ", ".join(label[n] for n in same)))
    for n in nodes:
        own = sorted({names[r] for r in range(len(names)) if leaders[r] == n})
        if len(own) > 1:
            notes.append("ranks %s share memory (one node for MPI) but report processor names %s: "
                         "placed as one host, %s" % (", ".join(str(r) for r in range(len(names))
                                                           if leaders[r] == n), ", ".join(own), label[n]))
    return [label[l] for l in leaders], notes


def learn_hosts(comm):
    """The host label of every rank (the same list on every rank; raw buffers, no pickle): MPI's
    shared-memory split groups the ranks by node, processor names label the nodes and are the
    fallback where ``Split_type`` is missing. Rank 0 logs what the cross-check found."""
    from mpi4py import MPI
    rank, size = comm.Get_rank(), comm.Get_size()
    mine = np.zeros(_NAME_BYTES, np.uint8)
    raw = (MPI.Get_processor_name() or socket.gethostname()).encode("utf-8")[:_NAME_BYTES]
    mine[:len(raw)] = np.frombuffer(raw, np.uint8)
    table = np.zeros((size, _NAME_BYTES), np.uint8)
    comm.Allgather(mine, table)
    names = [bytes(row).rstrip(b"\0").decode("utf-8", "replace") for row in table]
    leaders = None
    if hasattr(comm, "Split_type") and hasattr(MPI, "COMM_TYPE_SHARED"):
        try:
            node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        except (NotImplementedError, MPI.Exception):      # an MPI before 3.0: names decide
            node = None
        if node is not None:
            leader = np.array([rank], np.int64)
            node.Bcast(leader, root=0)      # key = world rank: the node's rank 0 is its lowest
            node.Free()
            every = np.zeros(size, np.int64)
            comm.Allgather(leader, every)
            leaders = [int(x) for x in every]
    hosts, notes = host_labels(names, leaders)
    if rank == 0:
        from ..log import info, warning
        info("topology.py", "Hosts from %s: %s" % (
            "MPI's shared-memory split" if leaders is not None else "processor names (no "
            "MPI_Comm_split_type)", ", ".join("%s (ranks %s)" % (h, ",".join(
                str(r) for r in range(size) if hosts[r] == h)) for h in sorted(set(hosts), key=hosts.index))))
        for note in notes:
            warning("topology.py", note)
    return hosts


class ParamMeta(object):
    """What servers need to know of the net's learnable params (by index)."""

    def __init__(self, net):
        self.names = list(net.param_display_names)
        self.counts = [int(p.count) for p in net.learnable_params]
        self.shapes = [tuple(p.shape) for p in net.learnable_params]
        self.lr_mult = list(net.params_lr)
        self.decay_mult = list(net.params_weight_decay)


def sub_batch_net_param(net_param, k, where="net"):
    """A copy of ``net_param`` whose data layers' batch is split ``k`` ways (one sub-batch each)."""
    out = caffe_pb2.NetParameter()
    out.CopyFrom(net_param)
    if k == 1:
        return out
    for lp in out.layer:
        for field in _BATCH_FIELDS:
            if lp.HasField(field):
                sub = getattr(lp, field)
                sub.batch_size = _divide(sub.batch_size, k, lp, where)
        if lp.type == "Input":
            for shape in lp.input_param.shape:
                if len(shape.dim):
                    shape.dim[0] = _divide(shape.dim[0], k, lp, where)
        if lp.type == "DummyData":
            for shape in lp.dummy_data_param.shape:
                if len(shape.dim):
                    shape.dim[0] = _divide(shape.dim[0], k, lp, where)
    return out


def _divide(batch, k, lp, where):
    if batch % k:
        raise CaffeError("%s: layer '%s' (%s): batch %d does not split into %d sub-batches "
                         "(nworkers_per_group)" % (where, lp.name, lp.type, batch, k))
    return batch // k
