"""Exact resume of a BSP run fed by a real Data layer (LMDB LeNet with random crops, mirrors and
dropout): interrupted at step k and resumed, it equals the uninterrupted run bit for bit."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, box_mpiexec, needs_mpi
import lenet_lmdb

pytest.importorskip("lmdb")


def _same(a, b):
    return len(a) == len(b) and all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _params(solver):
    return [p.data.copy() for p in solver.net.learnable_params]


@pytest.mark.parametrize("groups,workers", [(1, 2), (2, 1)])
def test_bsp_lmdb_resume_is_bit_identical(tmp_path, groups, workers):
    db = lenet_lmdb.make_lmdb(tmp_path / "db")
    full, _ = lenet_lmdb.train(db, tmp_path / "full", 8, groups=groups, workers=workers)
    lenet_lmdb.train(db, tmp_path / "cut", 3, groups=groups, workers=workers)     # stops at step 3
    resumed, result = lenet_lmdb.train(db, tmp_path / "cut", 8, resume=True, groups=groups,
                                       workers=workers)
    assert result.step == 8
    assert _same(_params(full), _params(resumed))


def _mpi(n, args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpiexec", "-n", str(n), sys.executable,
           os.path.join(ROOT, "tests", "dist", "lenet_lmdb.py")] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


@needs_mpi
@pytest.mark.slow
def test_bsp_lmdb_resume_under_mpiexec(tmp_path):
    """mpiexec -n 2 (two worker groups, one rank each): cut at step 3, resume, equal at step 8."""
    db = lenet_lmdb.make_lmdb(tmp_path / "db")
    common = ["--db", db]
    _mpi(2, common + ["--workspace", str(tmp_path / "full"), "--max_iter", "8",
                      "--out", str(tmp_path / "full.npz")])
    _mpi(2, common + ["--workspace", str(tmp_path / "cut"), "--max_iter", "3"])
    _mpi(2, common + ["--workspace", str(tmp_path / "cut"), "--max_iter", "8", "--resume",
                      "--out", str(tmp_path / "resumed.npz")])
    full = np.load(str(tmp_path / "full.npz"), allow_pickle=False)
    resumed = np.load(str(tmp_path / "resumed.npz"), allow_pickle=False)
    assert _same([full[k] for k in sorted(full.files)], [resumed[k] for k in sorted(resumed.files)])


@needs_mpi
@pytest.mark.slow
def test_bsp_lmdb_resume_across_two_emulated_hosts(cluster_box, tmp_path):
    """The same run with one rank on each of two emulated hosts (tools/cluster.py: own network,
    hostname and PID namespaces, 10 Gbit/s tbf links): cut at step 3, resumed, equal at step 8."""
    box = cluster_box(2, rate="10gbit")
    db = lenet_lmdb.make_lmdb(tmp_path / "db")

    def run(workspace, max_iter, *extra):
        p = box_mpiexec(box, ["--db", db, "--workspace", str(workspace), "--max_iter",
                              str(max_iter)] + list(extra), ppn=1, script="lenet_lmdb.py",
                        timeout=180)
        assert p.returncode == 0, p.err[-2000:]

    run(tmp_path / "full", 8, "--out", str(tmp_path / "full.npz"))
    run(tmp_path / "cut", 3)
    run(tmp_path / "cut", 8, "--resume", "--out", str(tmp_path / "resumed.npz"))
    full = np.load(str(tmp_path / "full.npz"), allow_pickle=False)
    resumed = np.load(str(tmp_path / "resumed.npz"), allow_pickle=False)
    assert _same([full[k] for k in sorted(full.files)], [resumed[k] for k in sorted(resumed.files)])
