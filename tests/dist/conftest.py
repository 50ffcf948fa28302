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
