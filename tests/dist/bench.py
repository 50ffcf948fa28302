"""BENCHMARKS.md numbers: steps/s, bytes per step, share of a step waiting, for 1/2/4 workers.

    python3 tests/dist/bench.py        (runs mpi_run.py in process and under mpiexec)
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARGS = ["--workers", "1", "--servers", "2", "--max_iter", "200", "--batch", "32", "--hidden", "512"]


def run(engine, groups):
    cmd = [sys.executable, os.path.join(HERE, "mpi_run.py"), "--workspace", "/tmp/caffepy-bench",
           "--engine", engine, "--groups", str(groups)] + ARGS
    if engine == "mpi":
        cmd = ["mpiexec", "-n", str(groups)] + cmd
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    m = re.search(r"RESULT step=(\d+) bytes=(\d+) messages=(\d+) seconds=([\d.]+)", out)
    steps, nbytes, seconds = int(m.group(1)), int(m.group(2)), float(m.group(4))
    waits = [(float(c), float(w)) for c, w in re.findall(r"compute=([\d.e-]+) wait=([\d.e-]+)", out)]
    share = sum(w for _, w in waits) / sum(c + w for c, w in waits)
    return steps / seconds, nbytes / steps, share


if __name__ == "__main__":
    print("| engine | workers | steps/s | bytes sent per step (all processes, rank 0 for mpi) | waiting share |")
    print("|---|---|---|---|---|")
    for engine in ("inproc", "mpi"):
        for groups in (1, 2, 4):
            sps, bps, share = run(engine, groups)
            print("| %s | %d | %.1f | %.0f | %.0f%% |" % (engine, groups, sps, bps, 100 * share))
