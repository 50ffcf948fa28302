"""clip_gradients in distributed training (caffepy.dist.clip): the servers agree on each update's
L2 norm. BSP equals the single-process solver with the same global batch (float64, 1e-6), with
iter_size too, and stays bit-reproducible; a threshold never reached changes nothing; ASYNC and SSP
clip each group's gradient by its own norm."""
import numpy as np
import pytest

import nets
from conftest import mpiexec, needs_mpi
from caffepy import dist
from caffepy.dist.clip import BSP_KEY, ClipGate
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver

G, K, B = 2, 2, 4


def _reference(extra, solver_type="SGD", steps=20):
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(G * B, steps, solver_type, extra), dtype=np.float64)
    solver.net.layers[0].reset(x, y)
    solver.solve()
    return [p.data.copy() for p in solver.net.learnable_params]


def _distributed(workspace, extra, solver_type="SGD", steps=20, groups=G, **cluster):
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, steps, solver_type, extra), dtype=np.float64)
    c = nets.cluster(nworker_groups=groups, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(workspace), **cluster)
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    return [p.data.copy() for p in solver.net.learnable_params], result


@pytest.mark.parametrize("solver_type,iter_size", [("SGD", 1), ("Adam", 1), ("SGD", 2)])
def test_bsp_clipping_matches_single_process(tmp_path, solver_type, iter_size):
    extra = "clip_gradients: 0.3 iter_size: %d" % iter_size
    want = _reference(extra, solver_type)
    unclipped = _reference("iter_size: %d" % iter_size, solver_type)
    assert max(np.abs(a - b).max() for a, b in zip(want, unclipped)) > 1e-3   # clipping did act
    got, result = _distributed(tmp_path / "a", extra, solver_type)
    assert result.step == 20
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    again, _ = _distributed(tmp_path / "b", extra, solver_type)
    for a, b in zip(got, again):
        np.testing.assert_array_equal(a, b)


def test_threshold_never_reached_changes_nothing(tmp_path):
    # (clip_gradients keeps every param on the dense path: compare with SFB off)
    plain, _ = _distributed(tmp_path / "plain", "", sfb_mode=caffe_pb2.ClusterParameter.NEVER)
    high, _ = _distributed(tmp_path / "high", "clip_gradients: 1e9")
    for a, b in zip(plain, high):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mode,staleness", [("ASYNC", 0), ("SSP", 1)])
def test_async_and_ssp_clip_each_groups_gradient(tmp_path, mode, staleness):
    # one group: its own gradient is the whole update, so ASYNC / SSP equal the single process
    # (SSP with staleness 0: with more, a worker computes on a cache without its own last updates)
    want = _reference("clip_gradients: 0.3", steps=12)
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(G * B, 12, "SGD", "clip_gradients: 0.3"), dtype=np.float64)
    c = nets.cluster(nworker_groups=1, nworkers_per_group=G * K, nservers_per_group=2,
                     consistency=mode, staleness=0, workspace=str(tmp_path / "one"))
    dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    for a, p in zip(want, solver.net.learnable_params):
        np.testing.assert_allclose(p.data, a, rtol=0, atol=1e-6)
    # four groups: every update goes through the gate keyed by its own group and step
    got, result = _distributed(tmp_path / "four", "clip_gradients: 0.3", steps=12, groups=4,
                               consistency=mode, staleness=staleness)
    assert result.step == 12 and all(np.isfinite(p).all() for p in got)
    assert set(result.param_versions.values()) == {4 * 12}


def test_gate_sums_in_a_fixed_order_and_scales_by_iter_size():
    gate = ClipGate(1.0, 2, n_slices=2, j=1, peers={0: 100, 2: 102})
    g1, g2 = np.array([3.0, 0.0]), np.array([0.0, 4.0])
    assert gate.hold((BSP_KEY, 5), (0, 1), ("s01", g2, 5, [])) is None
    assert gate.ready((BSP_KEY, 5)) is None
    assert gate.hold((BSP_KEY, 5), (0, 0), ("s00", g1, 5, [0, 1])) == 25.0
    gate.add_partial((BSP_KEY, 5), 2, 0.0)
    assert gate.ready((BSP_KEY, 5)) is None                 # server 0's sum still missing
    gate.add_partial((BSP_KEY, 5), 0, 11.0)
    l2, scale, held = gate.ready((BSP_KEY, 5))
    assert l2 == pytest.approx(2 * 6.0) and scale == pytest.approx(1.0 / 12.0)
    assert [h[0] for h in held] == ["s00", "s01"]            # slice order, not arrival order
    assert gate.first == 0 and not gate.held and not gate.partials


def test_sfb_and_tables_stay_dense_under_clipping(tmp_path):
    from test_sfb import WIDE_NET, wide_data
    from test_sparse import solver_param
    x, y = wide_data(10 * G * K * 2)
    param = solver_param(WIDE_NET, K * 2, 4, "SGD")
    param.clip_gradients = 0.5
    c = caffe_pb2.ClusterParameter(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                                   workspace=str(tmp_path / "auto"))

    def feed(w, n, net):
        net.layers[0].reset(x[w::n], y[w::n])
    result = dist.train(get_solver(param, dtype=np.float64), cluster=c, feeder=feed)  # AUTO: dense
    assert result.step == 4
    c.sfb_mode = caffe_pb2.ClusterParameter.ALWAYS
    with pytest.raises(Exception, match="without clip_gradients"):
        dist.train(get_solver(param, dtype=np.float64), cluster=c, feeder=feed)


@pytest.mark.slow
@needs_mpi
def test_bsp_clipping_under_mpi(tmp_path):
    """The servers' CLIPNORM exchange between processes (servers in their own ranks)."""
    out = tmp_path / "final.npz"
    proc = mpiexec(6, ["--workspace", str(tmp_path / "ws"), "--out", str(out), "--separate",
                       "--solver_extra", "clip_gradients: 0.3"])
    assert proc.returncode == 0, proc.err[-2000:]
    got = np.load(str(out), allow_pickle=False)
    for i, want in enumerate(_reference("clip_gradients: 0.3")):
        np.testing.assert_allclose(got["arr_%d" % i], want, rtol=0, atol=1e-6)
