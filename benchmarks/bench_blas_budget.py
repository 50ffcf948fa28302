"""The BLAS thread budget (caffepy.math.blas) on in-process distributed training: LeNet, ASYNC.

    python benchmarks/bench_blas_budget.py [--groups 4] [--steps 150] [--repeat 2]

Caffe's LeNet (20/50/500, batch 64 per group, random images: timing only) trains for ``--steps``
steps per group on ``--groups`` worker groups of one worker and 2 servers, ASYNC, in one process
(the in-process engine: one thread per worker). Each configuration runs in a fresh interpreter:

- ``budget``: caffepy's default, numpy's BLAS limited to ``max(1, cores // workers)`` threads;
- ``blas default``: ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` = the core count, i.e. what
  numpy does on its own (caffepy leaves a thread count the user chose alone).

Prints updates per second (groups x steps / wall seconds of ``dist.train``), the best of
``--repeat`` runs.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
sys.path.insert(0, %(root)r); sys.path.insert(0, %(root)r + "/tests/dist"); sys.path.insert(0, %(root)r + "/tests")
import numpy as np
import nets, test_mnist as tm
from caffepy import dist
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver
G, steps = %(groups)d, %(steps)d
rng = np.random.default_rng(0)
n = 64 * G * 4
x = rng.random((n, 1, 28, 28), dtype=np.float32)
y = rng.integers(0, 10, n).astype(np.float32)
param = caffe_pb2.SolverParameter()
proto_io.parse_text(tm.SOLVER %% steps, param)
param.display = 0
param.base_lr = 1e-5   # random labels: keep the weights finite; only the time is measured
param.net_param.CopyFrom(proto_io.read_net(tm.LENET %% {"batch": 64}))
solver = get_solver(param)
c = nets.cluster(nworker_groups=G, nservers_per_group=2, consistency="ASYNC", workspace=%(ws)r)
t = time.time()
dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
print("RESULT " + json.dumps({"seconds": time.time() - t}))
"""


def run(groups, steps, env_threads, workspace):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env.pop(var, None)
    if env_threads:
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(env_threads)
    code = CHILD % {"root": ROOT, "groups": groups, "steps": steps, "ws": workspace}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        sys.exit("benchmark run failed:\n" + out.stderr[-2000:])
    return json.loads(lines[-1][7:])["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workspace", default="/tmp/caffepy-bench-blas")
    a = ap.parse_args()
    sys.path.insert(0, ROOT)
    from caffepy.math import blas
    ncores = blas.cores()
    print("%d cores; LeNet, batch 64 per group, %d groups x %d steps, ASYNC, in-process engine"
          % (ncores, a.groups, a.steps))
    print("| BLAS threads per GEMM | updates/s | seconds |")
    print("|---|---|---|")
    for label, env_threads in (("budget: %d" % blas.threads_per_gemm(a.groups, ncores), None),
                               ("blas default: %d" % ncores, ncores)):
        best = min(run(a.groups, a.steps, env_threads, a.workspace) for _ in range(a.repeat))
        print("| %s | %.1f | %.1f |" % (label, a.groups * a.steps / best, best))


if __name__ == "__main__":
    main()
