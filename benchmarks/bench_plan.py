"""The performance model of the distributed solver (caffepy.dist.plan): its calibration, its check
against the measured two-host figures and its tables (BENCHMARKS.md, "Scaling past two hosts").

    python3 benchmarks/bench_plan.py calibrate [--out caffepy/dist/plan_calibration.json]
                                               [--repeats 2] [--nets lenet cifar10_quick ...]
    python3 benchmarks/bench_plan.py check [--calibration FILE]
    python3 benchmarks/bench_plan.py table [--calibration FILE] [--nets ...] [--hosts 1 2 4 ...]
                                           [--links 1gbit 10gbit 25gbit] [--host h200]

calibrate: each measurement in a fresh process pinned to one core with one BLAS / OpenMP / numba
thread (as a rank of bench_scaling.py): per net, every layer's forward / backward at two batches
(caffepy.dist.calibrate.measure_net: CPU time of the computing thread; the repeat with the
fastest median pass is kept), the array costs of the servers' work and the in-process message. The transport constants are the engine's
and plain mpi4py's one-way times between two emulated hosts recorded by bench_transport.py, and the
``h200`` host profile is bench_gpu.py's training throughput on an H200 (both BENCHMARKS.md): the
file cites them. check: the model against bench_scaling.py's table. table: markdown rows of
samples/s and efficiency per net, link rate and N.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# name: (prototxt, the two calibration batches; the second is the batch a host runs in the table)
NETS = {
    "lenet": ("models/lenet/lenet_train_test.prototxt", (32, 64)),
    "cifar10_quick": ("models/cifar10_quick/cifar10_quick_train_test.prototxt", (50, 100)),
    "caffenet": ("models/caffenet/caffenet_deploy.prototxt", (128, 256)),
    "googlenet": ("models/googlenet/googlenet_deploy.prototxt", (16, 32)),
    "resnet50": ("models/resnet50/resnet50_deploy.prototxt", (16, 32)),
}
ITERS = {"lenet": 20, "cifar10_quick": 20, "caffenet": 3, "googlenet": 3, "resnet50": 3}

# bench_transport.py between two emulated hosts, 2026-11-24 13:51 UTC (BENCHMARKS.md): one-way
# seconds of plain mpi4py and of the engine at 64 B, and of the engine at 4 and 32 MiB
TRANSPORT = {
    "source": "benchmarks/bench_transport.py --rate 10gbit / --rate 1gbit, two tools/cluster.py "
              "hosts, 2026-11-24 13:51 UTC (BENCHMARKS.md, Transport between two emulated hosts)",
    "plain_64": [[10, 11.6e-6], [1, 12.1e-6]],
    "engine_64": [[10, 28.4e-6], [1, 28.6e-6]],
    "engine_large": [[10, 4 << 20, 3629.6e-6], [10, 32 << 20, 31154.6e-6],
                     [1, 4 << 20, 35597.3e-6], [1, 32 << 20, 290232.3e-6]],
}
# bench_gpu.py on one H200, 2026-11-27 (BENCHMARKS.md, GPU): caffepy's training images/s
H200 = {
    "source": "benchmarks/bench_gpu.py --iters 20 on one NVIDIA H200, 2026-11-27 (BENCHMARKS.md, "
              "GPU): caffepy's training throughput; layers keep this machine's proportions",
    "spare_core": True,
    "nets": {"LeNet": [64, 22656], "CIFAR10_quick": [100, 27910], "CaffeNet": [256, 9723],
             "GoogleNet": [32, 933], "ResNet-50": [32, 575]},
}
# bench_scaling.py, 2026-11-24 18:22-18:26 UTC (BENCHMARKS.md): CIFAR10-quick samples/s
MEASURED = {"one_host_batch_100": 1277.9,
            ("1gbit", "on"): 2033.1, ("1gbit", "off"): 2044.3,
            ("10gbit", "on"): 2106.6, ("10gbit", "off"): 2177.9}


def child(a):
    """One measurement in this (pinned, one-thread) process; prints JSON."""
    os.sched_setaffinity(0, {a.core})
    from caffepy.dist import calibrate
    from caffepy.proto import io as proto_io
    if a.what == "costs":
        out = {"arrays": calibrate.measure_arrays(), "local": calibrate.measure_local_message()}
    else:
        path, batches = NETS[a.what]
        out = calibrate.measure_net(proto_io.read_net(os.path.join(ROOT, path)), batches, ITERS[a.what])
        out["net"] = proto_io.read_net(os.path.join(ROOT, path)).name
    print("JSON " + json.dumps(out))


def run_child(what, core):
    from caffepy.dist.calibrate import ONE_THREAD
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "child", "--what", what,
                           "--core", str(core)], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT, **ONE_THREAD), timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    raise SystemExit("%s failed:\n%s" % (what, done.stderr[-2000:]))


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def calibrate(a):
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    loads = [loadavg()]
    costs = min((run_child("costs", a.core) for _ in range(a.repeats)), key=lambda c: c["local"])
    compute = {}
    for name in a.nets:
        best = None
        for _ in range(a.repeats):
            got = run_child(name, a.core)
            loads.append(loadavg())
            total = sum(row[2][1] + row[3][1] for row in got["layers"])
            if best is None or total < best[0]:
                best = (total, got)
            print("%s: %.1f ms at batch %d (load %.1f)" % (name, total * 1e3, got["batches"][1],
                                                           loads[-1]), file=sys.stderr)
        entry = best[1]
        compute[entry.pop("net")] = entry
    data = {
        "version": 1,
        "how": "python3 benchmarks/bench_plan.py calibrate --repeats %d, %s, 1-min load %.1f-%.1f "
               "(other jobs on the machine): every figure measured in a process pinned to one core "
               "with one BLAS / OpenMP / numba thread (compute: per layer, the median CPU time of the "
               "computing thread over the passes of caffepy time's loop at two batches, the repeat "
               "with the fastest passes kept; arrays: seconds a + c n for n float32 elements, best "
               "of 15; local: the process's CPU time per message of an in-process ping-pong); "
               "transport and hosts cite their source" % (a.repeats, started, min(loads), max(loads)),
        "machine": a.machine,
        "messages": {"local": costs["local"], "transport": TRANSPORT},
        "arrays": costs["arrays"],
        "hosts": {"h200": H200},
        "compute": compute,
    }
    with open(a.out, "w") as f:
        f.write(dump(data))
    print("wrote %s" % a.out)


def dump(data):
    """JSON with one line per layer row and per list of numbers (small; diffs read per layer)."""
    flat = {}

    def fold(x):
        if isinstance(x, dict):
            return {k: fold(v) for k, v in x.items()}
        if isinstance(x, list) and x and not any(isinstance(v, dict) for v in x):
            if all(isinstance(v, list) and v and isinstance(v[0], str) for v in x):
                return [fold_row(v) for v in x]        # layer rows
            return fold_row(x)
        return x

    def fold_row(row):
        key = "@%d@" % len(flat)
        flat[key] = json.dumps(row)
        return key
    text = json.dumps(fold(data), indent=1)
    for key, row in flat.items():
        text = text.replace('"%s"' % key, row)
    return text + "\n"


def _solver():
    from caffepy.solvers.params import load_solver_param
    # bench_scaling.py's solver
    return load_solver_param('base_lr: 0.001 momentum: 0.9 weight_decay: 0.004 lr_policy: "fixed"')


def check(a):
    from caffepy.dist import plan
    from caffepy.dist.calibrate import Costs
    from caffepy.proto import caffe_pb2, io as proto_io
    costs = Costs.load(a.calibration)
    net = proto_io.read_net(os.path.join(ROOT, NETS["cifar10_quick"][0]))
    one = plan.predict(net, _solver(), plan.default_cluster(1), costs, 1, 1e10, batch=100)
    rows = [("1 host x 1 worker, batch 100", "-", "-", 100 / one.plain_step, MEASURED["one_host_batch_100"])]
    for rate in ("1gbit", "10gbit"):
        for wf in ("on", "off"):
            c = caffe_pb2.ClusterParameter()
            c.nworker_groups, c.nservers_per_group, c.wait_free = 2, 1, wf == "on"
            r = plan.predict(net, _solver(), c, costs, 2, plan.parse_link(rate), batch=50)
            rows.append(("2 hosts x 1 worker, batch 50", rate, wf, r.samples_per_s, MEASURED[(rate, wf)]))
    print("| config | rate | wait-free | predicted samples/s | measured samples/s | error |")
    print("|---|---|---|---|---|---|")
    for config, rate, wf, pred, meas in rows:
        print("| %s | %s | %s | %.1f | %.1f | %+.1f%% |" % (config, rate, wf, pred, meas, 100 * (pred / meas - 1)))


VARIANTS = {
    "bsp": {},
    "bsp-nowf": {"wait_free": False},
    "ssp2": {"consistency": "SSP", "staleness": 2},
    "bsp-nosfb": {"sfb_mode": "NEVER"},
}


def table(a):
    from caffepy.dist import plan
    from caffepy.dist.calibrate import Costs
    from caffepy.proto import caffe_pb2, io as proto_io
    costs = Costs.load(a.calibration)
    spare = bool(costs.hosts.get(a.host, {}).get("spare_core")) if a.host else False
    print("| net | batch / host | variant | link | " + " | ".join("N=%d" % n for n in a.hosts) + " |")
    print("|---|---|---|---|" + "---|" * len(a.hosts))
    for name in a.nets:
        path, (_, batch) = NETS[name]
        net_param = proto_io.read_net(os.path.join(ROOT, path))
        net = plan.build_net(net_param, batch)
        for variant in a.variants:
            for link in a.links:
                cells = []
                for n in a.hosts:
                    c = plan.default_cluster(n)
                    for field, value in VARIANTS[variant].items():
                        if field == "consistency":
                            value = caffe_pb2.ClusterParameter.Consistency.Value(value)
                        elif field == "sfb_mode":
                            value = caffe_pb2.ClusterParameter.SFBMode.Value(value)
                        setattr(c, field, value)
                    r = plan.predict(net_param, _solver(), c, costs, n, plan.parse_link(link), batch,
                                     a.host, spare, net=net)
                    cells.append("%.0f (%.0f%%)" % (r.samples_per_s, 100 * r.efficiency))
                print("| %s | %d | %s | %s | %s |" % (net_param.name, batch, variant, link, " | ".join(cells)))
                sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate")
    c.add_argument("--out", default=os.path.join(ROOT, "caffepy", "dist", "plan_calibration.json"))
    c.add_argument("--repeats", type=int, default=2)
    c.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS))
    c.add_argument("--core", type=int, default=1)
    c.add_argument("--machine", default="the 2-vCPU development VM (AMD EPYC, Zen 4), one core")
    k = sub.add_parser("check")
    t = sub.add_parser("table")
    for p in (k, t):
        p.add_argument("--calibration", default=os.path.join(ROOT, "caffepy", "dist", "plan_calibration.json"))
    t.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS))
    t.add_argument("--hosts", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32])
    t.add_argument("--links", nargs="+", default=["1gbit", "10gbit", "25gbit"])
    t.add_argument("--variants", nargs="+", default=["bsp"], choices=list(VARIANTS))
    t.add_argument("--host", default=None, help="a host profile of the calibration (h200)")
    ch = sub.add_parser("child")
    ch.add_argument("--what", required=True)
    ch.add_argument("--core", type=int, default=1)
    a = ap.parse_args()
    {"calibrate": calibrate, "check": check, "table": table, "child": child}[a.cmd](a)


if __name__ == "__main__":
    main()
