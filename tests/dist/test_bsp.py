"""BSP with 2 groups x 2 workers and 2 servers gives the single-process weights (float64)."""
import numpy as np
import pytest

import nets
from conftest import mpiexec, needs_mpi, reference
from caffepy import dist
from caffepy.solvers import get_solver

G, K, B = 2, 2, 4


def _distributed(workspace, solver_type="SGD", **cluster):
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, 20, solver_type), dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(workspace), **cluster)
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    return solver, result


@pytest.mark.parametrize("solver_type", ["SGD", "Adam"])
def test_bsp_inproc_matches_single_process(tmp_path, solver_type):
    solver, result = _distributed(tmp_path, solver_type)
    assert result.step == 20 and solver.iter == 20
    for want, p in zip(reference(G, K, B, solver_type=solver_type), solver.net.learnable_params):
        np.testing.assert_allclose(p.data, want, rtol=0, atol=1e-6)


def test_bsp_is_bit_reproducible_with_3_workers_a_group(tmp_path):
    """The stub sums its workers' gradients in worker order, not arrival order (with 3 addends
    float sums depend on the order): two runs give the same bits."""
    x, y = nets.data(10 * 3 * 2 * 2)
    runs = []
    for i in range(2):
        solver = get_solver(nets.solver_param(6, 12), dtype=np.float64)
        c = nets.cluster(nworker_groups=2, nworkers_per_group=3, nservers_per_group=2,
                         workspace=str(tmp_path / str(i)))
        dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
        runs.append([p.data.copy() for p in solver.net.learnable_params])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_two_server_groups_stay_replicas(tmp_path):
    solver, result = _distributed(tmp_path, nserver_groups=2, consistency="ASYNC", sync_frequency=3)
    assert result.step == 20
    assert all(np.isfinite(p.data).all() for p in solver.net.learnable_params)


@pytest.mark.slow
@needs_mpi
@pytest.mark.parametrize("separate", [False, True])
def test_bsp_mpi_matches_single_process(tmp_path, separate):
    out = tmp_path / "final.npz"
    args = ["--workspace", str(tmp_path / "ws"), "--out", str(out)] + (["--separate"] if separate else [])
    proc = mpiexec(6 if separate else 4, args)
    assert proc.returncode == 0, proc.err[-2000:]
    got = np.load(str(out), allow_pickle=False)
    for i, want in enumerate(reference(G, K, B)):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)
