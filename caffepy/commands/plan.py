"""``caffepy plan --solver S [--cluster C] --hosts N [--link 10gbit]``: predicted scaling of a
distributed run (caffepy.dist.plan).

Prints every learnable param's route as the trainer would choose it (``dense`` through the
servers, ``sfb`` factors, sharded ``table``; caffepy.dist.routing.make_plan) with its bytes on the
wire per step, then the predicted step on the busiest worker's core (compute, server work,
messages, waiting, the BSP barrier), steps/s, samples/s and efficiency against the workers each
running the single-process solver alone (one worker per host: against one host). ``--table``
predicts over N = 1, 2, 4, ..., 32 hosts and every ``--link`` rate instead.

The cluster: ``--cluster`` (a ClusterParameter file), else the solver's ``cluster { }``, else one
worker group of one worker per host and one server group with a server on every host; with
``--table`` the cluster is that default for each N, with the other fields (consistency, wait_free,
sfb_mode, ...) of the given one. ``--consistency``, ``--staleness``, ``--wait-free``, ``--sfb`` and
``--servers`` override fields. ``--model NET`` (instead of ``--solver``) plans a net with SGD
(momentum 0.9, weight decay 0.0005); a deploy net trains against a label input. Constants: the
calibration file shipped with caffepy (measured on the machine BENCHMARKS.md names) or
``--calibration FILE``; ``--host NAME`` takes one of its measured host profiles.

``--resume WORKSPACE`` plans the shape a run resumes on from the workspace's latest complete
checkpoint: the per-group batch is the one the resume takes (the checkpoint's total batch over the
new worker groups, caffepy.dist.elastic), and one line says how the shape changed.
"""
import os

NAME = "plan"
HELP = "predict steps/s and efficiency of a distributed run on N hosts (a performance model)"
DEFAULT_CALIBRATION = os.path.join(os.path.dirname(os.path.dirname(__file__)), "dist",
                                   "plan_calibration.json")
TABLE_HOSTS = (1, 2, 4, 8, 16, 32)


def add_arguments(parser):
    parser.add_argument("--solver", default="", help="the solver prototxt (its train net)")
    parser.add_argument("--model", default="", help="a net prototxt instead of --solver (SGD)")
    parser.add_argument("--cluster", default="", help="a ClusterParameter text file")
    parser.add_argument("--hosts", type=int, default=None, metavar="N", help="hosts (default 2)")
    parser.add_argument("--link", action="append", default=[], metavar="RATE",
                        help="link rate per host and direction, e.g. 10gbit (repeatable or "
                             "comma-separated; default 10gbit)")
    parser.add_argument("--batch", type=int, default=None,
                        help="a worker group's batch (default: the net's)")
    parser.add_argument("--consistency", default=None, type=str.upper,
                        choices=("BSP", "ASYNC", "SSP"))
    parser.add_argument("--staleness", type=int, default=None, help="SSP's bound s")
    parser.add_argument("--wait-free", dest="wait_free", default=None, choices=("on", "off"))
    parser.add_argument("--sfb", default=None, type=str.upper, choices=("AUTO", "ALWAYS", "NEVER"))
    parser.add_argument("--servers", type=int, default=None, help="servers per server group")
    parser.add_argument("--spare-core", dest="spare_core", action="store_true",
                        help="each rank's communication and server work on a core of its own")
    parser.add_argument("--host", default=None,
                        help="a measured host profile of the calibration file (e.g. h200)")
    parser.add_argument("--calibration", default=DEFAULT_CALIBRATION, metavar="FILE",
                        help="measured constants (default: the file shipped with caffepy)")
    parser.add_argument("--resume", default="", metavar="WORKSPACE",
                        help="plan the resume of this workspace's latest checkpoint on --hosts "
                             "(the checkpoint's total batch kept)")
    parser.add_argument("--table", action="store_true",
                        help="predict for N = 1, 2, 4, 8, 16, 32 hosts and every --link rate")


def _solver(args):
    from ..errors import CaffeError
    from ..proto import caffe_pb2, io as proto_io
    from ..solvers.params import load_solver_param
    if bool(args.solver) == bool(args.model):
        raise CaffeError("give one of --solver or --model")
    if args.model:
        if not os.path.exists(args.model):
            raise CaffeError("net file %s does not exist" % args.model)
        param = load_solver_param('base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 '
                                  'lr_policy: "fixed"')
        return param, proto_io.read_net(args.model), args.model
    if not os.path.exists(args.solver):
        raise CaffeError("solver file %s does not exist" % args.solver)
    param = load_solver_param(args.solver)
    given = [f for f in ("net", "net_param", "train_net", "train_net_param") if param.HasField(f)]
    if len(given) != 1:
        raise CaffeError("%s: needs exactly one train net (net, net_param, train_net or "
                         "train_net_param)" % args.solver)
    if given[0] in ("net_param", "train_net_param"):
        net = caffe_pb2.NetParameter()
        net.CopyFrom(getattr(param, given[0]))
        return param, net, args.solver
    path = getattr(param, given[0])
    if not os.path.exists(path):
        raise CaffeError("%s: net file %s does not exist (relative to the current directory)"
                         % (args.solver, path))
    return param, proto_io.read_net(path), path


def _cluster(args, param, hosts, table):
    from ..errors import CaffeError
    from ..dist import plan
    from ..dist.topology import load_cluster
    from ..proto import caffe_pb2
    if args.cluster:
        base = load_cluster(param, args.cluster)
    elif param.HasField("cluster"):
        base = load_cluster(param)
    else:
        base = plan.default_cluster(hosts)
    cluster = caffe_pb2.ClusterParameter()
    cluster.CopyFrom(base)
    if not cluster.nworker_groups:       # "from the ranks": one group per host
        cluster.nworker_groups = hosts
    if table or not (args.cluster or param.HasField("cluster")):
        cluster.nworker_groups, cluster.nworkers_per_group, cluster.nserver_groups = hosts, 1, 1
        cluster.nservers_per_group = hosts
    if args.servers is not None:
        if args.servers < 1:
            raise CaffeError("--servers must be >= 1 (got %d)" % args.servers)
        cluster.nservers_per_group = args.servers
    if args.consistency:
        cluster.consistency = caffe_pb2.ClusterParameter.Consistency.Value(args.consistency)
    if args.staleness is not None:
        if args.staleness < 0:
            raise CaffeError("--staleness must be >= 0 (got %d)" % args.staleness)
        cluster.staleness = args.staleness
    if args.wait_free:
        cluster.wait_free = args.wait_free == "on"
    if args.sfb:
        cluster.sfb_mode = caffe_pb2.ClusterParameter.SFBMode.Value(args.sfb)
    c = cluster
    ranks = c.nworker_groups * c.nworkers_per_group + (
        c.nserver_groups * c.nservers_per_group if c.server_worker_separate else 0)
    if hosts > ranks:
        raise CaffeError("%s: %d ranks (%d worker groups x %d workers) cannot fill %d hosts"
                         % (args.cluster or "%s's cluster" % args.solver, ranks,
                            c.nworker_groups, c.nworkers_per_group, hosts))
    return cluster


def _resume_batch(workspace, cluster, net_param, batch):
    """The per-group batch a resume of ``workspace`` on ``cluster`` takes; prints the shape line."""
    from ..dist import checkpoint, elastic
    from ..errors import CaffeError
    step, m = checkpoint.latest_complete(workspace)
    if step is None:
        raise CaffeError("--resume: %s" % checkpoint.describe_latest(workspace))
    now = elastic.Shape.of(cluster, net_param)
    old = elastic.Shape.of_manifest(m, now)
    if old.batches:
        total = old.batches[0][1]
        if total % now.G or (total // now.G) % now.K:
            raise CaffeError("--resume: the checkpoint's total batch %d does not split into %d groups "
                             "x %d workers" % (total, now.G, now.K))
        batch = total // now.G
        now.batches = [(n, t) for n, t in old.batches]
    if old.same(now):
        print("Resume of checkpoint step %d (%s) on the same shape: %s" % (step, workspace,
                                                                         now.describe()))
    else:
        print("%s (checkpoint step %d, %s)" % (elastic.change_line(old, now), step, workspace))
    return batch


def _bytes(n):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


def _ms(s):
    return "%.2f ms" % (s * 1e3)


def run(args):
    from ..errors import CaffeError
    from ..dist import plan
    from ..dist.calibrate import Costs
    from ..dist.topology import consistency_name
    param, net_param, where = _solver(args)
    rates = [(r.strip(), plan.parse_link(r)) for text in (args.link or ["10gbit"])
             for r in text.split(",") if r.strip()]
    costs = Costs.load(args.calibration)
    spare = args.spare_core or bool(costs.hosts.get(args.host, {}).get("spare_core"))
    if args.batch is not None and args.batch < 1:
        raise CaffeError("--batch must be >= 1 (got %d)" % args.batch)
    if args.resume and (args.table or args.batch is not None):
        raise CaffeError("--resume plans the one shape a run resumes on with the checkpoint's total "
                         "batch: give --hosts (and --cluster), not --%s"
                         % ("table" if args.table else "batch"))
    batch = args.batch or plan.net_batch(net_param)
    net = None if args.resume else plan.build_net(net_param, batch, where)
    if args.table:
        print("Predicted for %s (%s), batch %d per worker group, one group per host%s:"
              % (net_param.name, where, batch, ", %s host" % args.host if args.host else ""))
        print("  %5s  %-8s  %10s  %10s  %12s  %10s" % ("hosts", "link", "step", "steps/s",
                                                       "samples/s", "efficiency"))
        for n in TABLE_HOSTS:
            cluster = _cluster(args, param, n, True)
            for name, rate in rates:
                r = plan.predict(net_param, param, cluster, costs, n, rate, batch, args.host, spare, net=net)
                print("  %5d  %-8s  %10s  %10.2f  %12.1f  %9.1f%%" % (
                    n, name, _ms(r.step), 1.0 / r.step, r.samples_per_s, 100 * r.efficiency))
        return 0
    hosts = 2 if args.hosts is None else args.hosts
    if hosts < 1:
        raise CaffeError("--hosts must be >= 1 (got %d)" % hosts)
    cluster = _cluster(args, param, hosts, False)
    if args.resume:
        batch = _resume_batch(args.resume, cluster, net_param, batch)
        net = plan.build_net(net_param, batch, where)
    for name, rate in rates:
        r = plan.predict(net_param, param, cluster, costs, hosts, rate, batch, args.host, spare, net=net)
        t = r.model.topo
        print("Plan for %s (%s) on %d hosts at %s: %d worker groups x %d (batch %d each), "
              "%d server groups x %d servers, %s%s, wait-free %s%s" % (
                  net_param.name, where, hosts, name, t.G, t.K, batch, t.SG, t.P,
                  consistency_name(cluster),
                  " (staleness %d)" % t.staleness if t.consistency == "SSP" else "",
                  "on" if r.model.opts.wait_free else "off", ", spare core" if spare else ""))
        width = max([len(row[0]) for row in r.routes] + [5])
        print("  %-*s %10s  %-5s  %14s  %14s" % (width, "param", "count", "route", "wire/step",
                                                 "busiest host"))
        for pname, count, route, wire, busiest in r.routes:
            print("  %-*s %10d  %-5s  %14s  %14s" % (width, pname, count, route, _bytes(wire),
                                                     _bytes(busiest)))
        total = sum(row[3] for row in r.routes)
        print("  %-*s %10d  %-5s  %14s" % (width, "total", sum(row[1] for row in r.routes), "",
                                           _bytes(total)))
        print("Predicted step (the busiest worker's core):")
        for label, value in (("compute", r.compute), ("server", r.server), ("messages", r.messages),
                             ("waiting", r.waiting), ("barrier", r.barrier), ("step", r.step)):
            print("  %-9s %10s" % (label, _ms(value)))
        print("  %.2f steps/s, %.1f samples/s, efficiency %.1f%% (one worker alone, single "
              "process at batch %d: %.1f samples/s)" % (1.0 / r.step, r.samples_per_s,
                                                         100 * r.efficiency, batch // t.K,
                                                         batch // t.K / r.plain_step))
    return 0
