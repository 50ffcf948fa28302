"""Entry point: ``train(solver, ...)`` runs a solver on the cluster its ClusterParameter describes.

Every process (one, or each MPI rank) builds the same Topology from the solver's train net, creates
the roles that live in it (workers, stubs, servers: one thread each; the coordinator on the calling
thread of process 0) and runs them. Worker nets are the train net with each data layer's batch cut
``nworkers_per_group`` ways; worker w reads items w, w + W, ... (``solver_rank`` / ``solver_count``)
or gets its rows from ``feeder(w, nworkers, net)``. Process 0 writes
``<workspace>/visualization/net.json`` with the partition. ``resume=True`` continues from the latest
complete checkpoint (same step counter, lr-policy step, history and param versions), on the shape
that wrote it or on another one (:mod:`caffepy.dist.elastic`: the total batch kept, servers
re-sliced, data positions re-mapped; one line says what changed).
"""
import contextvars
import os
import threading
import time

from .. import common
from ..math import blas
from ..errors import CaffeError
from ..log import info, warning
from ..net import Net
from ..solvers import solver_class
from . import checkpoint, elastic, routing, transport as T, waitfree
from .coordinator import Coordinator, DistError
from .server import Server
from .stub import Stub
from .topology import ParamMeta, Topology, groups_from_ranks, load_cluster, sub_batch_net_param
from .worker import Stopped, Worker


class Result(object):
    """What a run reports: final step, observed staleness, traffic and per-worker timings."""

    def __init__(self, step, coordinator, engine, seconds):
        self.step = step
        self.reports = coordinator.reports
        self.max_staleness = max([coordinator.max_staleness] +
                                 [int(r.get("stale", 0)) for r in self.reports.values()])
        self.bytes_sent = engine.stats.bytes
        self.messages = engine.stats.messages
        self.seconds = seconds
        # (param, offset) -> updates a dense slice had applied when it was downloaded
        self.param_versions = dict(coordinator.pulled_versions)


def _under_mpi():
    """Started as one of several ranks: mpiexec (MPICH/Hydra, Open MPI), srun --mpi=pmi2 (PMI_SIZE)
    or srun --mpi=pmix (PMIX_RANK with the step's task count). ``engine`` in the cluster overrides."""
    def count(var):
        try:
            return int(os.environ.get(var, "1"))
        except ValueError:
            return 1
    if count("PMI_SIZE") > 1 or count("OMPI_COMM_WORLD_SIZE") > 1:
        return True
    return "PMIX_RANK" in os.environ and count("SLURM_STEP_NUM_TASKS") > 1


def _train_net_param(solver):
    """The solver's train NetParameter and NetState (Caffe's precedence of net fields)."""
    from ..proto import caffe_pb2
    p = solver.param
    for f in ("net_param", "train_net_param", "net", "train_net"):
        if p.HasField(f):
            if f.endswith("_param"):
                net_param = caffe_pb2.NetParameter()
                net_param.CopyFrom(getattr(p, f))
            else:
                net_param = solver._read_net(getattr(p, f))
            return net_param, solver._merged_state(caffe_pb2.TRAIN, net_param, p.train_state)
    raise CaffeError("the solver has no train net")


class _Process(object):
    """The roles of one process and their threads."""

    worker_cls = Worker

    def __init__(self, solver, topo, engine, workspace, start_step, restored, feeder, versions=None,
                 group_batch=None):
        self.solver, self.topo, self.engine, self.workspace = solver, topo, engine, workspace
        self.restored = restored
        self.worker_states = {}      # worker id -> DistCheckpoint header of its file (--resume)
        self.remap = None            # an elastic.Remap where the worker count changed (--resume)
        self.versions = versions or {}   # param name -> version at the checkpoint (--resume)
        self.group_batch = group_batch
        self.stopping = threading.Event()
        self.threads, self.workers, self.servers = [], [], []
        self.worker_endpoints = [ep for ep in engine.inboxes if ep < topo.W]
        cls = solver_class(solver.param.type)
        meta = ParamMeta(solver.net)
        current_step = int(getattr(solver, "current_step", 0))
        for ep in sorted(engine.inboxes):
            if ep == topo.coordinator:
                continue
            endpoint = engine.endpoint(ep)
            if ep < topo.W:
                self._spawn(ep, self._worker_body(endpoint, start_step, restored is None, feeder))
            elif topo.is_stub(ep):
                self._spawn(ep, Stub(endpoint, topo, topo.group_of_stub(ep)).run)
            else:
                server = Server(endpoint, topo, meta, solver.param, cls, solver.dtype, workspace,
                                start_step, current_step, restored, self.versions)
                self.servers.append(server)
                self._spawn(ep, server.run)

    def _worker_body(self, endpoint, start_step, send_init, feeder):
        solver, topo, w = self.solver, self.topo, endpoint.id
        mode, device = common.mode(), common.device_id()     # the caller's: GPU workers if GPU

        def body(stopping):
            common._state.solver_rank, common._state.solver_count = w, topo.W
            common.set_device(device)
            (common.set_mode_gpu if mode == common.GPU else common.set_mode_cpu)()
            if solver.param.random_seed >= 0:
                common.set_random_seed(solver.param.random_seed + w)
            if topo.K == 1 and w == 0 and self.group_batch is None:
                net = solver.net
                if topo.W > 1:
                    _partition_data_layers(net)
            else:
                net_param, state = _train_net_param(solver)
                if self.group_batch is not None:
                    elastic.set_group_batch(net_param, self.group_batch)
                net_param = sub_batch_net_param(net_param, topo.K, "train net")
                net_param.state.CopyFrom(state)
                net = Net(net_param, phase=state.phase, level=state.level,
                          stages=tuple(s for s in state.stage if s), dtype=solver.dtype)
            if feeder is not None:
                feeder(w, topo.W, net)
            worker = self.worker_cls(endpoint, topo, net, solver.param, self.workspace, start_step,
                            send_init and w == 0)
            if self.remap is not None:      # --resume on another worker count: the data re-mapped
                self.remap.restore(net, w, "checkpoint step %d" % start_step)
            elif w in self.worker_states:   # --resume: the data where it stood, the same random draws
                worker.restore_state(self.worker_states[w], "checkpoint step %d" % start_step)
            if topo.routing:
                worker.setup_routes(topo.routing, solver_class(solver.param.type),
                                    int(getattr(solver, "current_step", 0)), self.restored)
            if worker.progress is not None:        # --tensorboard: DIR/group<g>/, one writer
                worker.progress.board = solver.tensorboard_board("group%d" % worker.g)
            self.workers.append(worker)
            worker.run(stopping)
        return body

    def _spawn(self, ep, fn):
        name = self.topo.describe(ep)
        coordinator = self.topo.coordinator

        def run():
            try:
                fn(self.stopping)
            except Stopped:
                pass
            except BaseException as e:  # reported to the coordinator, which stops the job
                if not self.stopping.is_set():
                    self.engine.deliver(*_error_message(ep, coordinator, "%s failed: %s" % (name, e)))
            finally:
                common.release_gpu_thread()
        # the thread runs in a copy of this thread's context: a worker that reads the net file
        # itself reads it as the command did (--define placeholders, --num-classes)
        t = threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name,
                             daemon=True)
        t.role = name
        self.threads.append(t)

    def start(self):
        for t in self.threads:
            t.start()

    def dead_thread(self):
        for t in self.threads:
            if not t.is_alive() and not self.stopping.is_set():
                return t.role
        return None

    def join(self, timeout=10.0):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout)


def _partition_data_layers(net):
    """Worker 0 trains on ``solver.net``, whose Data layers opened their cursors before this
    thread's ``solver_rank`` / ``solver_count`` were set (so they would read every item): reopen
    them, so worker 0 reads items 0, W, 2W, ... like the others read theirs."""
    from ..layers.data import DataLayer
    for layer, bottom, top in zip(net.layers, net.bottom_vecs, net.top_vecs):
        if isinstance(layer, DataLayer):
            layer.layer_setup(bottom, top)


def _error_message(src, dst, text):
    h = T.header(T.ERROR, src=src, dst=dst, text=text.splitlines()[0] if text else "error")
    return h, []


def train(solver, cluster=None, cluster_file=None, resume=False, feeder=None, engine=None,
          comm=None, overwrite=False, hosts=None):
    """Train ``solver`` on the cluster; returns a :class:`Result` in process 0 (None elsewhere).

    A workspace holding checkpoints needs ``resume`` or ``overwrite`` (caffepy.dist.workspace).

    ``comm``: a :class:`caffepy.dist.waitfree.CommOptions` (wait-free backprop on by default).
    ``hosts`` (in process only): a host name per rank, to place servers and per-host sums as if
    the ranks sat on those hosts (MPI learns them: :func:`caffepy.dist.topology.learn_hosts`)."""
    if getattr(solver, "sparsity", None) is not None:
        raise CaffeError("the parameter servers do not compute the Structured Sparsity Learning "
                         "fields (regularization_type / group lasso in param, connectivity_mode): "
                         "train this net in one process")
    cluster = cluster if cluster is not None else load_cluster(solver.param, cluster_file)
    kind = engine or cluster.engine or ("mpi" if _under_mpi() else "inproc")
    if cluster.nworker_groups == 0:      # as many groups as the launch's ranks make
        from ..proto import caffe_pb2
        given, cluster = cluster, caffe_pb2.ClusterParameter()
        cluster.CopyFrom(given)
        if kind != "mpi":
            raise CaffeError("nworker_groups 0 takes the worker groups from the MPI ranks; in "
                             "process give their number")
        from mpi4py import MPI
        ranks = MPI.COMM_WORLD.Get_size()
        groups_from_ranks(cluster, ranks, "cluster")
        if MPI.COMM_WORLD.Get_rank() == 0:
            info("trainer.py", "nworker_groups 0: %d worker group%s of %d from %d ranks"
                 % (cluster.nworker_groups, "" if cluster.nworker_groups == 1 else "s",
                    cluster.nworkers_per_group, ranks))
    p = solver.param
    meta = ParamMeta(solver.net)
    opts = waitfree.options(cluster, comm)
    plan = routing.make_plan(solver.net, cluster, opts, p)
    topo = Topology(cluster, meta.counts, meta.names, excluded=plan.params())
    topo.routing = plan
    workspace = cluster.workspace
    guard = None
    if kind == "mpi":
        from .mpi import MpiEngine
        from .watchdog import MpiGuard
        guards = []
        eng = MpiEngine(topo, setup=lambda e: guards.append(MpiGuard(e, topo, workspace)))
        guard, rank = guards[0], eng.rank
    else:
        from .inproc import InprocEngine
        if hosts is not None:
            if len(hosts) != topo.n_processes:
                raise CaffeError("hosts: %d names for %d ranks" % (len(hosts), topo.n_processes))
            topo.set_hosts(hosts)
        eng = InprocEngine(topo)
        rank = 0
    from .workspace import preflight
    host_names = preflight(workspace, resume, overwrite, eng.comm if kind == "mpi" else None)
    start_step, restored, versions = 0, None, {}
    try:
        net_param, _ = _train_net_param(solver)
    except CaffeError:      # (a solver built around a net: no batch to record)
        net_param = solver.net.net_param
    shape = elastic.Shape.of(cluster, net_param)
    old_shape = group_batch = None
    if resume:
        start_step, manifest = checkpoint.latest_complete(workspace, verify=True)
        if start_step is None:
            raise CaffeError("--resume: %s" % checkpoint.describe_latest(workspace))
        restored = checkpoint.full_params(workspace, manifest, solver.dtype, "server")
        # SFB weights are in worker files (the shape that wrote them may have sent factors for
        # params this one sends whole, or the reverse: the servers' copy first, else the workers')
        for name, value in checkpoint.full_params(workspace, manifest, solver.dtype, "worker").items():
            restored.setdefault(name, value)
        missing = [n for n in meta.names if n not in restored]
        if missing:
            raise CaffeError("--resume: checkpoint step %d lacks params %s" % (start_step, ", ".join(missing)))
        solver.iter, solver.current_step = start_step, manifest.current_step
        versions = checkpoint.param_versions(workspace, manifest)
        info("trainer.py", "Resuming from checkpoint step %d (%s)" % (start_step, workspace))
        old_shape = elastic.Shape.of_manifest(manifest, shape)
        if old_shape.batches:       # the checkpoint's total batch, whatever the solver says
            group_batch = elastic.plan_batches(old_shape, shape, "--resume")
            if group_batch == [t // shape.G for _, t in shape.batches]:
                group_batch = None          # the net's own batches already keep it
            elif group_batch is not None:
                shape.batches = [(n, shape.G * b) for (n, _), b in zip(shape.batches, group_batch)]
        if not old_shape.same(shape) or old_shape.consistency != shape.consistency:
            if rank == 0:
                elastic.log_change(old_shape, shape, bool(plan.tables))
        else:
            if group_batch is not None and rank == 0:
                elastic.log_batch(old_shape)
            old_shape = None
    topo.shape = shape
    if rank == 0:
        routing.log_choices(plan)
        routing.log_tables(plan, solver.net, cluster)
    if rank == 0 and solver.test_nets and 0 < p.test_interval < p.max_iter:
        info("trainer.py", "Distributed training tests the net once, on the parameters downloaded "
             "after the last step (test_interval %d is not used in between)" % p.test_interval)
    if rank == 0:
        from ..draw import write_net_json
        from .report import cluster_summary, route_lines
        summary = cluster_summary(topo, plan, meta.names, meta.counts, topo.hosts or host_names, kind)
        for line in route_lines(summary):
            info("trainer.py", line)
        write_net_json(solver.net, os.path.join(workspace, "visualization", "net.json"),
                       placement=topo.placement(solver.net), cluster=summary)
    proc = _Process(solver, topo, eng, workspace, start_step, restored, feeder, versions,
                    group_batch)
    if resume:
        proc.worker_states = checkpoint.worker_states(workspace, manifest)
        if old_shape is not None and old_shape.W != topo.W:
            proc.remap = elastic.Remap(proc.worker_states, old_shape.W, topo.W, start_step,
                                       p.random_seed)
    proc.worker_cls = routing.worker_class(waitfree.worker_class(opts), plan)
    t0 = time.time()
    # the process's workers compute at once: one BLAS pool per core, not per worker
    with blas.budget(eng.host_compute_threads(len(proc.worker_endpoints))):
        result = _run(proc, guard, rank, start_step, t0)
    if result is not None and solver.test_nets and p.test_interval:
        solver.test_all()
    return result


def _watch_signals(proc):
    """Poll the solver's action function (the SignalHandler of ``caffepy train``): a "stop"
    (SIGTERM, SIGINT, ...) becomes a PREEMPT to the coordinator, which has every worker stop and
    checkpoint at one step boundary; in any rank."""
    solver, topo, eng = proc.solver, proc.topo, proc.engine
    fn = getattr(solver, "_action_fn", None)
    if fn is None:
        return
    src = min(eng.inboxes)

    def watch():
        while not proc.stopping.wait(0.1):
            action = fn()
            if action == "stop":
                name = getattr(getattr(fn, "__self__", None), "last_signal", None) or "a signal"
                info("trainer.py", "%s received: stopping at the next step boundary" % name)
                eng.deliver(T.header(T.PREEMPT, src=src, dst=topo.coordinator, text=name), [])
                return
            if action == "snapshot":
                warning("trainer.py", "a snapshot signal is ignored by distributed training (it "
                        "checkpoints every checkpoint_frequency steps; SIGTERM / SIGINT stop it "
                        "with a checkpoint)")
    threading.Thread(target=watch, name="signals", daemon=True).start()


def _run(proc, guard, rank, start_step, t0):
    solver, topo, eng = proc.solver, proc.topo, proc.engine
    proc.start()
    _watch_signals(proc)
    try:
        if rank != 0:
            guard.serve(proc)
            guard.done()
            return None
        coord = Coordinator(eng.endpoint(topo.coordinator), topo, solver, proc.workspace,
                            health=guard.health if guard else _inproc_health(proc))
        info("trainer.py", "Training on %d worker groups x %d workers, %d server groups x %d servers "
             "(%s, %s engine) from step %d" % (topo.G, topo.K, topo.SG, topo.P, topo.consistency,
                                               eng.name, start_step))
        if topo.hosts:
            info("trainer.py", "Placement: %s" % ", ".join(
                "%s on %s (rank %d)" % (topo.describe(ep), topo.host_of(ep), topo.process_of(ep))
                for ep in topo.servers() + topo.stubs()))
        try:
            step = coord.run()
        except BaseException as e:
            coord.stop_all()
            if guard:
                guard.abort(str(e))
            raise
        coord.stop_all()
        proc.join()
        if guard:
            guard.done()
        result = Result(step, coord, eng, time.time() - t0)
        # {server index in group: {param: TableShard}} of the servers in this process
        result.table_shards = {s.j: dict(s.tables.shards) for s in proc.servers if s.tables}
        return result
    finally:
        proc.stopping.set()
        eng.close()


def _inproc_health(proc):
    def health(h=None):
        role = proc.dead_thread()
        if role:
            time.sleep(0.2)  # let its ERROR arrive first; it carries the reason
            raise DistError("%s stopped unexpectedly" % role)
    return health


def train_multi_gpu(solver, gpus):
    """``caffepy train --gpu 0,1,..``: one worker group with a worker per id, BSP, in process."""
    from ..proto import caffe_pb2
    cluster = caffe_pb2.ClusterParameter()
    cluster.CopyFrom(solver.param.cluster)
    cluster.nworkers_per_group = len(gpus)
    info("trainer.py", "Training with %d workers in one group (devices %s)"
         % (len(gpus), ",".join(map(str, gpus))))
    return train(solver, cluster=cluster, engine="inproc", overwrite=True)   # as `caffe train --gpu`

