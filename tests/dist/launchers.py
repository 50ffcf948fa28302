"""The multi-host tests' launchers beside Hydra: Open MPI's ``mpirun`` and Slurm's ``srun`` in the
cluster in a box (tools/cluster.py, tools/slurm_box.py); why such a test skips; a rank's process
whatever started it; the lost-rank run every launcher's test makes; the uninterrupted runs the
resumed ones must equal bit for bit."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from conftest import HERE, ROOT, reference

G, K, B = 2, 2, 4
MAX_ITER = 100
TIMEOUT = 20                  # the cluster timeout mpi_run.py sets
OPENMPI_ENV = {"MPI4PY_LIBMPI": "libmpi.so.40"}     # as tools/cluster.py's OPENMPI_ENV
RANK_VARS = (b"PMI_RANK", b"OMPI_COMM_WORLD_RANK", b"SLURM_PROCID")
_REASONS = {}


def openmpi_reason():
    """None when Open MPI's mpirun is installed and mpi4py loads Open MPI, else a one-line why."""
    if "openmpi" not in _REASONS:
        mpirun = os.environ.get("CAFFEPY_OPENMPI_MPIRUN", "mpirun.openmpi")
        code = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
                "print(MPI.Get_library_version())")
        if shutil.which(mpirun) is None:
            why = "Open MPI: %s is not installed (apt-get install openmpi-bin)" % mpirun
        else:
            r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **OPENMPI_ENV),
                               capture_output=True, text=True, timeout=60)
            why = None
            if r.returncode or "Open MPI" not in r.stdout:
                last = (r.stderr.strip().splitlines() or [r.stdout.strip()])[-1]
                why = ("Open MPI: mpi4py does not load libmpi.so.40 with MPI4PY_LIBMPI (mpi4py >= "
                       "4.1's wheels do): %s" % last)
        _REASONS["openmpi"] = why
    return _REASONS["openmpi"]


def _tools():
    tools = os.path.join(ROOT, "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)


def slurm_reason():
    """None when Slurm, munge and Open MPI (srun --mpi=pmix) are here, else a one-line why."""
    _tools()
    import slurm_box
    return slurm_box.unavailable_reason() or openmpi_reason()


def rank_pid(box, host, rank, deadline, script=b"mpi_run.py"):
    """The pid (seen from here) of the process running ``script`` as MPI rank ``rank`` on
    ``host`` (its launcher's rank variable), not the watchdog rank 0 starts."""
    want = [v + b"=%d" % rank for v in RANK_VARS]
    while time.time() < deadline:
        for pid in box.host_pids(host):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read()
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if script in cmd and b"caffepy.dist.watchdog" not in cmd and any(w in env for w in want):
                return pid
        time.sleep(0.1)
    raise AssertionError("rank %d not found on %s" % (rank, host))


def finish(proc, timeout):
    """Wait for a started launcher; sets ``proc.out`` / ``proc.err`` (killed after ``timeout``)."""
    try:
        proc.out, proc.err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.out, proc.err = proc.communicate()
        proc.err += "\n(test harness: launcher killed after %d s)" % timeout
    return proc


def _script(args, script="mpi_run.py"):
    return [sys.executable, os.path.join(HERE, script)] + list(args)


def mpirun(box, args, ppn=2, timeout=120, wait=True):
    """Open MPI's ``mpirun`` of tests/dist/mpi_run.py across the box's hosts."""
    env = box.env(PYTHONPATH=ROOT, **OPENMPI_ENV)
    proc = box.mpirun(_script(args), ppn=ppn, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    return finish(proc, timeout) if wait else proc


def srun(slurm, args, nodes=2, ppn=2, timeout=120, wait=True):
    """``srun -N nodes --ntasks-per-node=ppn --mpi=pmix`` of tests/dist/mpi_run.py (Open MPI)."""
    env = slurm.env(PYTHONPATH=ROOT, **OPENMPI_ENV)
    argv = ["srun", "-N", str(nodes), "--ntasks-per-node=%d" % ppn, "--mpi=pmix"] + _script(args)
    proc = slurm.popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    return finish(proc, timeout) if wait else proc


def check_final(path, max_iter=MAX_ITER):
    """The saved params equal the single process's (1e-6)."""
    got = np.load(str(path), allow_pickle=False)
    for i, want in enumerate(reference(G, K, B, max_iter=max_iter)):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)


def same_bits(a, b):
    a, b = np.load(str(a)), np.load(str(b))
    assert a.files == b.files
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k])


_WHOLE = {}


def uninterrupted(key, run, tmp_path_factory):
    """The final params (.npz path) of the whole ``MAX_ITER``-step run, made once per ``key`` by
    ``run(workspace, out)`` (which returns the finished launcher)."""
    if key not in _WHOLE:
        d = tmp_path_factory.mktemp("whole")
        p = run(str(d / "ws"), str(d / "whole.npz"))
        assert p.returncode == 0, p.err[-3000:]
        check_final(d / "whole.npz")
        _WHOLE[key] = str(d / "whole.npz")
    return _WHOLE[key]


def long_args(ws, *extra):
    """A run that checkpoints every 10 steps and takes ~20 ms a step (time to cut it)."""
    return ["--workspace", ws, "--max_iter", str(MAX_ITER), "--checkpoint_frequency", "10",
            "--sleep", "0.02"] + list(extra)


def wait_checkpoint(proc, ws, step=20, timeout=90):
    """Wait (bounded) until the run's step-``step`` checkpoint is complete; its deadline."""
    deadline = time.time() + timeout
    path = os.path.join(ws, "checkpoint", "step%d.manifest" % step)
    while not os.path.exists(path):
        if proc.poll() is not None or time.time() > deadline:
            finish(proc, 10)
            raise AssertionError("no step-%d checkpoint (status %s): %s" % (
                step, proc.returncode, proc.err[-3000:]))
        time.sleep(0.05)
    return deadline


def lost_rank(proc, ws, kill, pattern):
    """``kill()`` once the run has its step-20 checkpoint; the job must end within 2 x timeout,
    non-zero, with ``<ws>/failure.txt`` matching ``pattern`` (one line, naming the last
    checkpoint). Returns (the line, the launcher's stderr lines starting ``caffepy dist:``)."""
    wait_checkpoint(proc, ws)
    kill()
    t0 = time.time()
    finish(proc, 4 * TIMEOUT)
    assert time.time() - t0 < 2 * TIMEOUT, proc.err[-3000:]
    assert proc.returncode != 0
    failure = os.path.join(ws, "failure.txt")
    while not os.path.exists(failure) and time.time() - t0 < 2 * TIMEOUT:
        time.sleep(0.05)
    with open(failure) as f:
        written = f.read().strip()
    assert re.search(pattern, written), written
    assert "last complete checkpoint: step" in written and "\n" not in written
    return written, [l for l in proc.err.splitlines() if l.startswith("caffepy dist:")]
