"""SSP vs BSP steps/s with one artificially slowed worker group (BENCHMARKS.md).

    python benchmarks/bench_ssp.py [--steps 60] [--delay 0.02] [--staleness 3] [--hidden 7]
                                   [--engines inproc mpi]
    python benchmarks/bench_ssp.py --hosts 2 [--rate 1gbit]      # across emulated hosts

Runs ``tests/dist/mpi_run.py``: the test MLP (16 -> ``--hidden`` -> 3, float64), 4 worker groups
of one worker, 2 servers, batch 32 per worker; worker 3 sleeps ``--delay`` s every step in the
forward of layer ``--layer`` (default the loss layer: in the data layer, wait-free backprop
already hides the round trip behind the next step's sleep). Each configuration: BSP, then SSP with
``--staleness``, plain workers and wait-free workers. steps/s = steps of all workers / the
coordinator's wall time; ``stale`` = the largest clock gap any worker computed with. ``inproc``:
one process (threads); ``mpi``: ``mpiexec -n 4`` on this host; ``--hosts N``: ``mpiexec -hosts
h1..hN`` in a tools/cluster.py box (that module must be importable), ranks spread evenly.
The load average (1 min) is read before each run.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "tests", "dist", "mpi_run.py")
GROUPS = 4


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(engine, mode, staleness, wait_free, a, box=None):
    args = [RUN, "--workspace", "/tmp/caffepy-bench-ssp", "--engine", "inproc" if engine == "inproc"
            else "mpi", "--groups", str(GROUPS), "--workers", "1", "--servers", "2", "--batch", "32",
            "--hidden", str(a.hidden), "--max_iter", str(a.steps), "--consistency", mode, "--staleness",
            str(staleness), "--wait_free", str(int(wait_free)), "--slow_worker", str(GROUPS - 1),
            "--slow_delay", str(a.delay), "--slow_layer", str(a.layer)]
    env = dict(os.environ, PYTHONPATH=ROOT)
    before = load()
    if box is not None:
        env = box.env(PYTHONPATH=ROOT)
        proc = box.mpiexec([sys.executable] + args, hosts=box.hosts, ppn=GROUPS // len(box.hosts),
                           env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        out, err = proc.communicate(timeout=600)
    else:
        cmd = [sys.executable] + args
        if engine == "mpi":
            cmd = ["mpiexec", "-n", str(GROUPS)] + cmd
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        out, err = done.stdout, done.stderr
    m = re.search(r"RESULT step=(\d+) bytes=\d+ messages=\d+ seconds=([\d.]+)", out)
    if m is None:
        raise SystemExit("run failed: %s" % (err or out)[-2000:])
    stale = int(re.search(r"STALENESS (\d+)", out).group(1))
    return GROUPS * int(m.group(1)) / float(m.group(2)), stale, before


def table(engine, a, box=None):
    for wait_free in (False, True):
        rates = {}
        for mode, s in (("BSP", 0), ("SSP", a.staleness)):
            rate, stale, before = run(engine, mode, s, wait_free, a, box)
            rates[mode] = rate
            print("| %s | %d | %s | %s | %s | %.0f | %d | %.1f |" % (
                engine, a.hidden, {0: "data", -1: "loss"}.get(a.layer, a.layer),
                "wait-free" if wait_free else "plain", mode if mode == "BSP" else "SSP s=%d" % s,
                rate, stale, before), flush=True)
        print("| | | | | SSP / BSP | %.2fx | | |" % (rates["SSP"] / rates["BSP"]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--staleness", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=7)
    ap.add_argument("--layer", type=int, default=-1, help="where the slowed worker sleeps: layer "
                    "index of its forward (0: data layer, -1: the loss layer)")
    ap.add_argument("--engines", nargs="+", default=["inproc", "mpi"])
    ap.add_argument("--hosts", type=int, default=0)
    ap.add_argument("--rate", default="1gbit")
    a = ap.parse_args()
    print("| engine | hidden | slowed layer | workers | consistency | steps/s | stale | load before |")
    print("|---|---|---|---|---|---|---|---|")
    if a.hosts:
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        from cluster import Cluster
        with Cluster(a.hosts, a.rate) as box:
            table("mpi, %d hosts at %s" % (a.hosts, a.rate), a, box)
        return
    for engine in a.engines:
        table(engine, a)


if __name__ == "__main__":
    main()
