"""BSP scaling across two emulated hosts, and the communication wait-free backprop hides (BENCHMARKS.md).

    python benchmarks/bench_scaling.py [--net cifar10_quick|lenet] [--batch 100] [--steps 30]
                                       [--warmup 5] [--repeats 2] [--rates 10gbit 1gbit]
                                       [--modes on off] [--trace] [--quiet_nap S]
                                       [--switch_interval S] [--cores_per_rank N]

(a) 1 host x 1 worker: the TRAIN net of models/<net> (its Data layer replaced by MemoryData with
    random data), one plain process, ``solver.step`` at global batch B, pinned to one core
    (sched_setaffinity, OMP/OPENBLAS/MKL_NUM_THREADS=1). No communication at all.
(b) 2 hosts x 1 worker: ``mpiexec -hosts h1,h2`` in a tools/cluster.py box (tbf links at each
    rate), 2 worker groups of 1 worker at batch B/2 each (the same global batch), one server
    group of --servers co-located servers (default 1: on rank 0; 2: one per host), BSP, one core
    per rank (rank r pinned to core r; a rank's worker, server, stub and communication threads
    share it), wait_free on/off. --cores_per_rank N: rank r (and the 1-host process) may run on
    cores rN .. rN + N - 1 (modulo the machine's); compute stays one thread, so N = 2 gives each
    rank's communication threads a core of their own (needs 2N cores for distinct ones).
samples/s = global batch x steps / time of the timed steps (the steps after --warmup).
efficiency = 2-host samples/s / (2 x 1-host samples/s).
2-host window: from the start of step --warmup's forward to the start of step --warmup+--steps'
forward, per worker (the slower worker's window gives samples/s). compute = the time inside the
net's forward/backward in that window; exposed = (window - compute) / steps, the time per step a
worker is not computing: waiting for parameters, pushing, applying them (communication not hidden).
hidden share (wait-free, at a rate), two views, medians over the repeats:
- step view (the one quoted): (step(off) - step(on)) / exposed(off), step = window / steps of the
  slower worker (= global batch / samples/s). With wait_free off every byte of a step's push/pull is
  waited for after backward, so exposed(off) is the step's communication as a worker sees it; what
  the wait-free step saves of it, counting any compute it slows down, is the share it hides.
- exposed view: 1 - exposed(on) / exposed(off). It ignores what wait-free adds to the compute time
  (work moved into backward on the same core), so it flatters wait-free; printed for comparison.
- ceiling of the step view (one core per rank): core idle(off) / exposed(off), core idle = the
  time per step the rank's core was idle in the worker's window (/proc/stat idle + iowait, the
  least of the two ranks). Wait-free sends the same messages (no less CPU work), it can only fill
  idle time, so a step with
  it is at best the one without minus that idle time: the step view cannot exceed this in
  expectation (single repeats scatter by the run-to-run noise of step times, ±3 ms).
Per rank, the CPU each thread used in the window (/proc/self/task/<tid>/schedstat: on-CPU +
runnable-but-waiting ms per step) shows where a rank's core went.
Per worker, the wall time of its forward and backward calls per step and its own thread's CPU in
them (time.thread_time): wall above CPU is the time other threads of the rank's core took.
--trace: per worker, medians over the timed steps of when each param's gradient is pushed, reaches
the server's rank (arrGRAD) and the server (sgrad), is answered, and the answer reaches the
worker's rank (arrPARAM) and its stub (sparam); the peer's SFB factors (arrSFB); the worker's
backward end (bwd1) and next forward (fwd); all in ms from that worker's backward start (one clock:
the box's hosts share the kernel). Also the CPU of the pushes and each rank's TCP sockets (``ss``:
skmem rb / tb = receive / send buffer). --quiet_nap / --switch_interval set the MPI engine's
QUIET_NAP and the interpreter's GIL switch interval in the ranks (A/B runs).
Configurations alternate, --repeats times; medians are printed with the 1-min load. Run as root.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from scaling_trace import install_trace, timeline     # benchmarks/: this script's directory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "NUMBA_NUM_THREADS": "1"}


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def build(net, batch, steps):
    """A SolverParameter whose net is the TRAIN net of models/<net> fed by MemoryData."""
    from caffepy.proto import caffe_pb2, io as proto_io
    path = {"cifar10_quick": "models/cifar10_quick/cifar10_quick_train_test.prototxt",
            "lenet": "models/lenet/lenet_train_test.prototxt"}[net]
    shape = {"cifar10_quick": (3, 32, 32), "lenet": (1, 28, 28)}[net]
    src = proto_io.read_net(os.path.join(ROOT, path))
    out = caffe_pb2.NetParameter()
    out.name = src.name
    first = True
    for layer in src.layer:
        phases = [r.phase for r in layer.include]
        if phases and caffe_pb2.TRAIN not in phases:
            continue
        if layer.type in ("Data", "ImageData", "HDF5Data"):
            if not first:
                continue
            first = False
            new = out.layer.add()
            new.name, new.type = "data", "MemoryData"
            new.top.extend(["data", "label"])
            m = new.memory_data_param
            m.batch_size, (m.channels, m.height, m.width) = batch, shape
            continue
        if layer.type == "Accuracy":
            continue
        out.layer.add().CopyFrom(layer)
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text('base_lr: 0.001 momentum: 0.9 weight_decay: 0.004 lr_policy: "fixed" '
                        'max_iter: %d random_seed: 1 display: 0 snapshot_after_train: false' % steps,
                        param)
    param.net_param.CopyFrom(out)
    return param, shape


def data(n, shape, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n,) + shape).astype(np.float32),
            rng.integers(0, 10, size=n).astype(np.float32))


def thread_cpu():
    """Per live thread of this process: (name, on-CPU ns, runnable-but-waiting ns) from
    /proc/self/task/<tid>/schedstat."""
    import threading
    out = {}
    for t in threading.enumerate():
        try:
            with open("/proc/self/task/%d/schedstat" % t.native_id) as f:
                run, wait = f.read().split()[:2]
        except (OSError, TypeError, ValueError):
            continue
        out[t.name] = (int(run), int(wait))
    return out


def core_idle(core):
    """Seconds core ``core`` has been idle since boot (/proc/stat idle + iowait; clock ticks)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%d " % core):
                fields = line.split()
                return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
    return float("nan")


def rank_main(a):
    """One process: --mode single (plain solver) or dist (under mpiexec, one rank per host)."""
    rank = int(os.environ.get("PMI_RANK", "0"))
    n = a.cores_per_rank
    cores = {(rank * n + i) % os.cpu_count() for i in range(n)}
    os.sched_setaffinity(0, cores)
    sys.path.insert(0, ROOT)
    import numpy as np
    from caffepy.solvers import get_solver
    # dist: one more step, whose forward start closes the timed window
    param, shape = build(a.net, a.batch, a.warmup + a.steps + (a.mode == "dist"))
    solver = get_solver(param)
    x, y = data(8 * a.batch * max(1, a.groups), shape, 0)
    if a.mode == "single":
        solver.net.layers[0].reset(x, y)
        solver.step(a.warmup)
        t0 = time.time()
        solver.step(a.steps)
        dt = time.time() - t0
        print("JSON " + json.dumps({"seconds": dt}))
        return 0
    from caffepy import dist
    from caffepy.proto import caffe_pb2
    c = caffe_pb2.ClusterParameter()
    c.nworker_groups, c.nworkers_per_group, c.nservers_per_group = a.groups, 1, a.servers
    c.workspace = "/tmp/caffepy-bench-scaling"
    c.consistency = caffe_pb2.ClusterParameter.Consistency.Value("BSP")
    c.engine, c.timeout, c.wait_free = "mpi", 120, bool(a.wait_free)
    marks = {}
    trace = install_trace() if a.trace else None
    if a.switch_interval is not None:   # the interpreter's GIL switch interval in the ranks
        sys.setswitchinterval(a.switch_interval)
    if a.quiet_nap is not None:         # the MPI engine's round interval while a worker computes
        from caffepy.dist import mpi
        mpi.QUIET_NAP = a.quiet_nap

    def feed(w, nworkers, net):
        net.layers[0].reset(x[w::nworkers], y[w::nworkers])
        st = {"step": -1, "compute": 0.0, "fwd": 0.0, "bwd": 0.0, "fwd_cpu": 0.0, "bwd_cpu": 0.0}

        def timed(fn, first):
            def run(*args, **kw):
                i = args[0] if args else kw.get("start", 0)
                if first and (i or 0) == 0:     # a step's forward starts
                    st["step"] += 1
                    if st["step"] == a.warmup:
                        st["t0"] = time.time()
                        st["cpu0"] = thread_cpu()
                        st["idle0"] = sum(core_idle(k) for k in cores)
                    elif st["step"] == a.warmup + a.steps:
                        st["t1"] = time.time()
                        st["cpu1"] = thread_cpu()
                        st["idle1"] = sum(core_idle(k) for k in cores)
                t, cpu = time.time(), time.thread_time()
                if trace is not None and (first and (i or 0) == 0 or not first):
                    trace.append((t, "fwd" if first else "bwd0", w, -1, st["step"]))
                r = fn(*args, **kw)
                if a.warmup <= st["step"] < a.warmup + a.steps:
                    st["compute"] += time.time() - t
                    st["fwd" if first else "bwd"] += time.time() - t
                    st["fwd_cpu" if first else "bwd_cpu"] += time.thread_time() - cpu
                if trace is not None and not first:
                    trace.append((time.time(), "bwd1", w, -1, st["step"]))
                return r
            return run
        net.forward_from_to = timed(net.forward_from_to, True)
        net.backward_from_to = timed(net.backward_from_to, False)
        marks[w] = st
    result = dist.train(solver, cluster=c, feeder=feed, overwrite=True)
    if result is not None:
        print("JSON " + json.dumps({"seconds": result.seconds, "reports": {
            str(k): v for k, v in result.reports.items()}}))
    if trace is not None:
        print("TRACE " + json.dumps(trace))
        try:        # this host's TCP sockets (MPI's): socket buffer sizes (skmem rb / tb), windows
            ss = subprocess.run(["ss", "-tmi", "state", "established"], capture_output=True,
                                text=True, timeout=10).stdout
            print("SS rank %s: " % os.environ.get("PMI_RANK", "?") + " | ".join(
                " ".join(x for x in line.split() if x.startswith(("skmem", "cwnd", "rcv_space",
                                                                  "snd_wnd", "rcv_wnd")))
                for line in ss.splitlines() if "skmem" in line))
        except (OSError, subprocess.SubprocessError):
            pass
    for w, st in marks.items():
        cpu = {name: [(st["cpu1"][name][i] - c[i]) / 1e6 / a.steps for i in (0, 1)]
               for name, c in st["cpu0"].items() if name in st["cpu1"]}
        print("WINDOW " + json.dumps({"worker": w, "seconds": st["t1"] - st["t0"],
                                      "compute": st["compute"], "threads": cpu,
                                      "idle": (st["idle1"] - st["idle0"]) / a.steps, "split": [
                                          1e3 * st[k] / a.steps for k in ("fwd", "fwd_cpu", "bwd", "bwd_cpu")]}))
    return 0


def parse(out, err):
    res = {"windows": [], "trace": []}
    for line in out.splitlines():
        if line.startswith("TRACE "):
            res["trace"] += json.loads(line[6:])
        elif line.startswith("SS "):
            res.setdefault("sockets", []).append(line[3:])
        elif line.startswith("JSON "):
            res.update(json.loads(line[5:]))
        elif line.startswith("WINDOW "):
            res["windows"].append(json.loads(line[7:]))
    if "seconds" not in res:
        raise SystemExit("run failed:\n%s" % (err or out)[-3000:])
    return res


def single(a):
    cmd = [sys.executable, os.path.abspath(__file__), "--rank", "--mode", "single", "--net", a.net,
           "--batch", str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--cores_per_rank", str(a.cores_per_rank)]
    before = load()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT, **ONE))
    r = parse(done.stdout, done.stderr)
    return {"rate": a.batch * a.steps / r["seconds"], "load": before}


def two(a, box, wait_free):
    cmd = [sys.executable, os.path.abspath(__file__), "--rank", "--mode", "dist", "--net", a.net,
           "--batch", str(a.batch // 2), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--groups", "2", "--wait_free", str(int(wait_free)), "--servers", str(a.servers),
           "--cores_per_rank", str(a.cores_per_rank)] + (
               ["--trace"] if a.trace else []) + (
               ["--quiet_nap", repr(a.quiet_nap)] if a.quiet_nap is not None else []) + (
               ["--switch_interval", repr(a.switch_interval)] if a.switch_interval is not None else [])
    before = load()
    proc = box.mpiexec(cmd, hosts=box.hosts, ppn=1, env=box.env(PYTHONPATH=ROOT, **ONE), cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=600)
    r = parse(out, err)
    if os.environ.get("BENCH_TRACE_DUMP"):
        with open(os.environ["BENCH_TRACE_DUMP"], "w") as f:
            json.dump(r["trace"], f)
    ws = r["windows"]
    if len(ws) != 2:
        raise SystemExit("expected 2 worker windows:\n%s" % (err or out)[-3000:])
    seconds = max(w["seconds"] for w in ws)
    exposed = statistics.mean((w["seconds"] - w["compute"]) / a.steps for w in ws)
    compute = statistics.mean(w["compute"] / a.steps for w in ws)
    split = ["worker %d: forward %.1f ms/step (its thread's CPU %.1f), backward %.1f (CPU %.1f)" % (
        w["worker"], *w["split"]) for w in ws]
    threads = ["; ".join("%s %.1f+%.1f" % (name, run, wait) for name, (run, wait) in sorted(
        w["threads"].items(), key=lambda kv: -kv[1][0]) if run + wait >= 0.05) for w in ws]
    return {"rate": a.batch * a.steps / seconds, "exposed": exposed, "compute": compute,
            "idle": min(w["idle"] for w in ws), "load": before, "reports": r.get("reports"),
            "threads": threads,
            "timeline": (timeline(r["trace"], a) + r.get("sockets", [])) if a.trace else None,
            "split": split}


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="cifar10_quick", choices=["cifar10_quick", "lenet"])
    ap.add_argument("--batch", type=int, default=100, help="global batch B")
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rates", nargs="+", default=["10gbit", "1gbit"])
    ap.add_argument("--servers", type=int, default=1, help="co-located servers (1 or 2)")
    ap.add_argument("--cores_per_rank", type=int, default=1, help="cores each rank (and the "
                    "1-host process) may run on; compute stays one thread, so a second core is "
                    "the communication threads' own (the MPI engine's layer rounds; needs "
                    "2 x this many cores for distinct ones)")
    ap.add_argument("--trace", action="store_true", help="print a per-step timeline of each "
                    "param's push, server receipt, answer and arrival (medians; ms)")
    ap.add_argument("--modes", nargs="+", default=["on", "off"], choices=["on", "off"],
                    help="wait-free settings of the 2-host runs (both: the hidden share)")
    ap.add_argument("--quiet_nap", type=float, default=None, help="seconds: the MPI engine's "
                    "QUIET_NAP in the ranks (its communication thread's round interval while a "
                    "worker computes; default the engine's)")
    ap.add_argument("--switch_interval", type=float, default=None, help="seconds: "
                    "sys.setswitchinterval in the ranks (Python's default 0.005)")
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="single")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--wait_free", type=int, default=1)
    a = ap.parse_args()
    a.wait_free_modes = [m == "on" for m in a.modes]
    if a.rank:
        return rank_main(a)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from cluster import Cluster
    print("net %s, global batch %d, %d timed steps after %d warm-up, %d repeats, %d server(s), "
          "%d cores, loadavg %s" % (a.net, a.batch, a.steps, a.warmup, a.repeats, a.servers,
                                    os.cpu_count(), open("/proc/loadavg").read().strip()),
          flush=True)
    one, runs = [], {}
    boxes = {}
    try:
        for rate in a.rates:
            boxes[rate] = Cluster(2, rate)
            boxes[rate].start()
        for rep in range(a.repeats):
            r = single(a)
            one.append(r)
            print("rep %d 1 host: %.1f samples/s (load %s)" % (rep, r["rate"], r["load"]), flush=True)
            for rate in a.rates:
                for wf in a.wait_free_modes:
                    r = two(a, boxes[rate], wf)
                    runs.setdefault((rate, wf), []).append(r)
                    print("rep %d 2 hosts %s wait_free=%d: %.1f samples/s, compute %.1f ms/step, "
                          "exposed %.1f ms/step, core idle %.1f ms/step (load %s) reports %s" % (
                              rep, rate, wf, r["rate"], 1e3 * r["compute"], 1e3 * r["exposed"],
                              1e3 * r["idle"], r["load"], r["reports"]), flush=True)
                    for text in r["threads"]:
                        print("    thread ms/step on CPU + runnable: %s" % text, flush=True)
                    for text in r["split"]:
                        print("    %s" % text, flush=True)
                    for text in r["timeline"] or ():
                        print("    %s" % text, flush=True)
    finally:
        for box in boxes.values():
            box.close()
    base = med(one, "rate")
    print()
    print("| config | rate | wait-free | samples/s (median) | steps/s | efficiency | compute ms/step "
          "| exposed comm ms/step | load before |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("| 1 host x 1 worker, batch %d | - | - | %.1f | %.2f | - | - | - | %s |" % (
        a.batch, base, base / a.batch, ",".join(r["load"] for r in one)))
    for rate in a.rates:
        for wf in a.wait_free_modes:
            rows = runs[(rate, wf)]
            s = med(rows, "rate")
            print("| 2 hosts x 1 worker, batch %d each | %s | %s | %.1f | %.2f | %.0f%% | %.1f | %.1f | %s |" % (
                a.batch // 2, rate, "on" if wf else "off", s, s / a.batch, 100 * s / (2 * base),
                1e3 * med(rows, "compute"), 1e3 * med(rows, "exposed"),
                ",".join(r["load"] for r in rows)))
    for rate in a.rates if len(a.wait_free_modes) == 2 else ():
        on, off = med(runs[(rate, True)], "exposed"), med(runs[(rate, False)], "exposed")
        s_on, s_off = (a.batch / med(runs[(rate, wf)], "rate") for wf in (True, False))
        step_view = 100 * (s_off - s_on) / off if off > 0 else 0
        exposed_view = 100 * (1 - on / off) if off > 0 else 0
        print("hidden share at %s, step view: (%.1f - %.1f) / %.1f = %.0f%%; exposed view: "
              "1 - %.1f / %.1f = %.0f%%" % (rate, 1e3 * s_off, 1e3 * s_on, 1e3 * off, step_view,
                                           1e3 * on, 1e3 * off, exposed_view))
        pairs = [100 * (a.batch / r_off["rate"] - a.batch / r_on["rate"]) / r_off["exposed"]
                 for r_on, r_off in zip(runs[(rate, True)], runs[(rate, False)])]
        print("  step view of each repeat (on and off back to back): %s; median %.0f%%" % (
            ", ".join("%.0f%%" % v for v in pairs), statistics.median(pairs)))
        if a.cores_per_rank != 1:
            continue
        ceil = [100 * r_off["idle"] / r_off["exposed"] for r_off in runs[(rate, False)]]
        print("  ceiling of the step view, core idle(off) / exposed(off) per repeat: %s; median "
              "%.0f%% (core idle with wait-free on: %.1f ms/step, median)" % (
                  ", ".join("%.0f%%" % v for v in ceil), statistics.median(ceil),
                  1e3 * med(runs[(rate, True)], "idle")))
    print("loadavg after: %s" % open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
