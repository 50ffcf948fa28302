"""Open MPI's ``mpirun`` across emulated hosts (tools/cluster.py: its rsh launcher through the
box's launcher, TCP on the emulated links; mpi4py's Open MPI extension): BSP equals the single
process; a rank killed on h2 stops the job with caffepy's one line on mpirun's terminal (and in
failure.txt); ``--resume`` then ends bit-identical to the uninterrupted run."""
import os
import signal
import time

import pytest

import launchers as L
from conftest import needs_mpi

pytestmark = [pytest.mark.slow, needs_mpi,
              pytest.mark.skipif(L.openmpi_reason() is not None, reason=str(L.openmpi_reason()))]


def _whole(box, tmp_path_factory):
    return L.uninterrupted("openmpi", lambda ws, out: L.mpirun(
        box, ["--workspace", ws, "--max_iter", str(L.MAX_ITER), "--out", out]), tmp_path_factory)


def test_bsp_two_hosts_matches_single_process(cluster_box, tmp_path_factory):
    box = cluster_box(2, rate="1gbit")
    _whole(box, tmp_path_factory)       # checks the final params against the single process


def test_lost_rank_line_on_terminal_then_resume(cluster_box, tmp_path, tmp_path_factory):
    """kill -9 of rank 3 (h2): Open MPI's mpirun forwards the watchdog's line before it ends the
    job, so the terminal shows it once, as failure.txt has it."""
    box = cluster_box(2, rate="10gbit")
    ws = str(tmp_path / "ws")
    proc = L.mpirun(box, L.long_args(ws), wait=False)
    victim = L.rank_pid(box, "h2", 3, time.time() + 60)
    line, shown = L.lost_rank(proc, ws, lambda: os.kill(victim, signal.SIGKILL),
                              r"^caffepy dist: rank 3 \(worker 3 \(group 1\)\) on host h2 died")
    assert shown == [line], proc.err[-3000:]
    done = L.mpirun(box, L.long_args(ws, "--resume", "--out", str(tmp_path / "final.npz")))
    assert done.returncode == 0, done.err[-3000:]
    assert "RESULT step=%d" % L.MAX_ITER in done.out
    L.same_bits(tmp_path / "final.npz", _whole(box, tmp_path_factory))
