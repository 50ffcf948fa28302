"""Helpers for the distributed tests: the single-process reference and the mpiexec runner."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nets  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def reference(groups, workers, batch, max_iter=20, solver_type="SGD"):
    """Final params of the single-process solver with the global batch (groups x group batch)."""
    from caffepy.solvers import get_solver
    x, y = nets.data(10 * groups * batch)
    solver = get_solver(nets.solver_param(groups * batch, max_iter, solver_type), dtype=np.float64)
    solver.net.layers[0].reset(x, y)
    solver.solve()
    return [p.data.copy() for p in solver.net.learnable_params]


def is_rank_process(pid, rank):
    """Whether process ``pid`` runs tests/dist/mpi_run.py as MPI rank ``rank`` (its PMI_RANK;
    not the watchdog rank 0 starts)."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return (b"mpi_run.py" in cmd and b"PMI_RANK=%d" % rank in env
            and b"caffepy.dist.watchdog" not in cmd)


def have_mpi():
    if shutil.which("mpiexec") is None:
        return False
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


needs_mpi = pytest.mark.skipif(not have_mpi(), reason="needs mpiexec and mpi4py")


def mpiexec(n, args, timeout=180, wait=True):
    """Start ``mpiexec -n n python tests/dist/mpi_run.py args``; the finished process or Popen."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpiexec", "-n", str(n), sys.executable, os.path.join(HERE, "mpi_run.py")] + list(args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=timeout)
    proc.out, proc.err = out, err
    return proc


def _cluster_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("caffepy_cluster",
                                                  os.path.join(ROOT, "tools", "cluster.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_BOX = {}


def cluster_box_reason():
    """None when emulated hosts (tools/cluster.py) work here, else why not (checked once)."""
    if "reason" not in _BOX:
        _BOX["module"] = _cluster_module()
        _BOX["reason"] = _BOX["module"].unavailable_reason()
    return _BOX["reason"]


@pytest.fixture
def cluster_box():
    """``make(n_hosts=2, rate="10gbit")`` -> a started tools/cluster.py Cluster, closed after the
    test (also on failure); skips with the reason where namespaces are not permitted."""
    reason = cluster_box_reason()
    if reason:
        pytest.skip(reason)
    made = []

    def make(n_hosts=2, rate="10gbit"):
        c = _BOX["module"].Cluster(n_hosts, rate)
        made.append(c)
        c.start()
        return c
    try:
        yield make
    finally:
        for c in made:
            c.close()


@pytest.fixture
def slurm_box(cluster_box):
    """``make(n_hosts=2)`` -> a started tools/slurm_box.py SlurmBox (slurmctld on h1, slurmd on
    every host) on a fresh cluster_box; skips with one line where Slurm, munge or Open MPI (its
    tests run srun --mpi=pmix) are missing. Everything dies with the cluster (also on failure)."""
    import launchers
    reason = cluster_box_reason() or launchers.slurm_reason()
    if reason:
        pytest.skip(reason)
    import slurm_box as sb

    def make(n_hosts=2):
        box = sb.SlurmBox(cluster_box(n_hosts))      # (its daemons live in the cluster's hosts)
        try:
            box.start()
        except sb.SlurmUnavailable as e:
            pytest.skip("slurm in a box: %s" % e)
        return box
    return make


def box_mpiexec(box, args, ppn, hosts=None, timeout=120, wait=True, script="mpi_run.py",
                auto_cleanup=True, **env):
    """``mpiexec`` of tests/dist/<script> across the box's hosts, ``ppn`` ranks per host."""
    environ = box.env(PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    cmd = [sys.executable, os.path.join(HERE, script)] + list(args)
    proc = box.mpiexec(cmd, hosts=hosts, ppn=ppn, env=environ, cwd=ROOT, auto_cleanup=auto_cleanup,
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    try:
        proc.out, proc.err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.out, proc.err = proc.communicate()
        proc.err += "\n(test harness: mpiexec killed after %d s)" % timeout
    return proc
