"""Sufficient-factor broadcasting: the plan, the factors of InnerProduct (transpose, axis), and
SFB on/off giving the single-process weights after 20 BSP steps (float64, 1e-6) on the
in-process BSP loop of test_sparse.py and inside ``dist.train`` (caffepy.dist.routing)."""
import numpy as np
import pytest

from caffepy.dist import sfb
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from test_sparse import bsp_run, reference

# ip1: transposed weight on axis 2 (m = batch * 2 rows of 8); ip2 on axis 1 (m = batch, K = 2 * 40)
WIDE_NET = """name: "wide"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: %(batch)d channels: 2 height: 2 width: 4 } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        inner_product_param { num_output: 40 axis: 2 transpose: true
                              weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 30 weight_filler { type: "gaussian" std: 0.2 } } }
layer { name: "relu2" type: "ReLU" bottom: "ip2" top: "ip2" }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss" }
"""


def wide_data(n, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2, 2, 4))
    return x, (x.reshape(n, -1)[:, :3].argmax(axis=1)).astype(np.float64)


def wide_net(batch):
    return Net(proto_io.read_net(WIDE_NET % {"batch": batch}), phase=caffe_pb2.TRAIN, dtype=np.float64)


@pytest.fixture
def every_param_sliced(monkeypatch):
    """The closed forms below assume every param is cut across the P servers of a group; the
    topology cuts only params of SLICE_MIN elements or more (small ones go whole to one server)."""
    from caffepy.dist import topology
    monkeypatch.setattr(topology, "SLICE_MIN", 1)


def _cost(groups, servers=1, separate=True, workers=1, counts=(100,)):
    from caffepy.dist.topology import Topology
    c = caffe_pb2.ClusterParameter(nworker_groups=groups, nworkers_per_group=workers,
                                   nservers_per_group=servers, server_worker_separate=separate)
    return sfb.CostModel(Topology(c, list(counts)))


class _Layer(object):
    def __init__(self, m, n, k):
        self.m, self.num_output, self.k = m, n, k


@pytest.mark.parametrize("W,P,NK", [(2, 1, 6), (4, 1, 6), (4, 2, 6), (8, 1, 14), (8, 4, 14)])
def test_cost_model_crossover_counts_the_workers(W, P, NK, every_param_sliced):
    """One worker per group, P separate servers: per step a worker sends its r (N + K) factor
    numbers to W - 1 peers and receives as many; dense, a worker (its own stub) pushes and pulls
    N K and a server moves 2 N K per group for its 1/P slice. SFB exactly when
    2 r (N + K) (W - 1) < 2 N K max(1, W / P); at the crossover r* a tie stays dense."""
    n = k = NK
    dense = 2 * n * k * max(1, W // P)
    r_star = dense // (2 * (n + k) * (W - 1))
    assert r_star * 2 * (n + k) * (W - 1) == dense             # the crossover is an integer here
    cost = _cost(W, P, counts=[n * k])
    below, at, above = [cost.choice("ip", 0, _Layer(r, n, k), (n, k)) for r in (r_star - 1, r_star,
                                                                                   r_star + 1)]
    assert (below.use, at.use, above.use) == (True, False, False)
    assert at.sfb == at.dense == dense and below.sfb == 2 * (r_star - 1) * (n + k) * (W - 1)
    assert "%d workers" % W in at.describe() and at.describe().endswith("-> dense")


def test_cost_model_more_workers_turn_a_layer_dense(every_param_sliced):
    """Poseidon's setting, a worker and a server on every machine (P = W, servers on worker
    processes): dense moves 4 N K (W - 1) / W per process, SFB 2 r (N + K) (W - 1), so SFB only
    while W < 2 N K / (r (N + K)) = 8 here. The old rule (r (N + K) < N K, blind to W) kept
    this layer on SFB at any worker count."""
    n, k, r = 64, 64, 8                                         # r (N + K) = 1024 < N K = 4096
    got = {W: _cost(W, W, separate=False, counts=[n * k]).choice("ip", 0, _Layer(r, n, k), (n, k))
           for W in (2, 4, 8, 16)}
    assert {W: (c.sfb, c.dense) for W, c in got.items()} == {
        W: (2 * r * (n + k) * (W - 1), 4 * n * k * (W - 1) // W) for W in (2, 4, 8, 16)}
    assert {W: c.use for W, c in got.items()} == {2: True, 4: True, 8: False, 16: False}


def test_cost_model_free_exchanges_inside_a_process(every_param_sliced):
    """Roles sharing a process exchange for free: one group of K workers with its servers on
    worker processes; the stub's process carries the K - 1 peers' pushes and pulls."""
    n, k = 10, 10
    cost = _cost(1, 2, separate=False, workers=3, counts=[n * k])
    # worker 0 holds the stub and server 0; server 1 is in worker 1's process (half the weight)
    assert cost.dense_numbers(0) == 2 * 2 * n * k + 2 * (n * k // 2)
    assert cost.sfb_numbers(7) == 2 * 7 * 2
    assert _cost(1, 1, separate=False).dense_numbers(0) == 0  # one process: nothing crosses


def test_plan_picks_layers_where_factors_are_smaller():
    net = wide_net(4)
    choices = {}
    chosen = {net._layer_names[li]: sl for li, sl in sfb.plan(
        net, cost=_cost(4, 1, counts=[p.count for p in net.learnable_params]), choices=choices).items()}
    # 4 workers, 1 separate server (dense: 2 N K x 4 groups at the server); factors 2 r (N + K) x 3
    # ip1 (r = 8 rows: axis 2): 2304 < 2560 -> SFB; ip2: 2640 < 19200 -> SFB; ip3: 792 > 720 -> dense
    assert sorted(chosen) == ["ip1", "ip2"]
    assert {n: (c.sfb, c.dense) for n, c in choices.items()} == {
        "ip1": (2304, 2560), "ip2": (2640, 19200), "ip3": (792, 720)}
    assert sfb.plan(net) == {}                                  # no cost model: all dense
    forced = sfb.plan(net, {"ip1": True, "ip2": False, "ip3": True})
    assert sorted(net._layer_names[li] for li in forced) == ["ip1", "ip3"]
    with pytest.raises(Exception, match="unknown layers"):
        sfb.plan(net, {"nope": True})
    with pytest.raises(Exception, match="cannot use SFB"):
        sfb.plan(net, {"relu1": True})


def test_factors_rebuild_the_layer_gradient():
    net = wide_net(4)
    x, y = wide_data(4)
    net.layers[0].reset(x, y)
    layers = sfb.plan(net, {"ip1": True, "ip2": True, "ip3": True})
    col = sfb.FactorCollector(net, layers)
    net.clear_param_diffs()
    net.forward_backward()
    factors = col.take()
    for sl in layers.values():
        h, bufs = sfb.message(sl.param, 0, 0, *factors[sl.param])
        w, u, v = sfb.unpack(h, bufs, sl)
        np.testing.assert_allclose(sfb.rebuild({w: (u, v)}, 1), net.learnable_params[sl.param].diff,
                                   rtol=1e-12, atol=1e-12)
        assert sum(b.size for b in bufs) == sfb.factor_numbers(sl, sl.layer.m)
    col.detach()
    assert col not in net.on_backward_layer


def test_iter_size_stacks_factors():
    net = wide_net(4)
    x, y = wide_data(8)
    net.layers[0].reset(x, y)
    layers = sfb.plan(net, {"ip2": True})
    col = sfb.FactorCollector(net, layers)
    net.clear_param_diffs()
    for _ in range(2):
        net.forward_backward()
    (p, (u, v)), = col.take(iter_size=2).items()
    assert u.shape[0] == 8
    np.testing.assert_allclose(sfb.rebuild({0: (u, v)}, 1), net.learnable_params[p].diff / 2,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver_type,overrides", [
    ("SGD", None), ("SGD", {"ip1": True, "ip3": True}), ("Adam", None)])
def test_sfb_matches_dense_after_20_bsp_steps(solver_type, overrides):
    W, B = 3, 4
    x, y = wide_data(10 * W * B)
    want = reference(WIDE_NET, x, y, W, B, solver_type=solver_type)
    dense, _ = bsp_run(WIDE_NET, x, y, W, B, solver_type=solver_type)
    got, run = bsp_run(WIDE_NET, x, y, W, B, solver_type=solver_type, sfb_overrides=overrides)
    assert run["plans"][0] and run["wire"]["sfb"] > 0
    for a, b, c in zip(want, dense, got):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
        np.testing.assert_allclose(c, a, rtol=0, atol=1e-6)
    for net in run["nets"][1:]:                       # the SFB replicas stay identical
        for li in run["plans"][0]:
            np.testing.assert_array_equal(net.layers[li].blobs[0].data,
                                          run["nets"][0].layers[li].blobs[0].data)


# -- inside caffepy.dist's trainer -------------------------------------------------------------
G, K, B = 2, 2, 2          # 4 workers of sub-batch 2; 2 servers


def _dist_train(workspace, solver_type, comm=None, **fields):
    from caffepy import dist
    from caffepy.solvers import get_solver
    from test_sparse import solver_param
    W = G * K
    x, y = wide_data(10 * W * B)
    solver = get_solver(solver_param(WIDE_NET, K * B, 20, solver_type), dtype=np.float64)
    c = caffe_pb2.ClusterParameter(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                                   workspace=str(workspace), **fields)

    def feed(w, n, net):
        net.layers[0].reset(x[w::n], y[w::n])
    result = dist.train(solver, cluster=c, feeder=feed, comm=comm)
    return solver, result


def _server_param_names(workspace, step=20):
    from caffepy.dist import checkpoint
    _, manifest = checkpoint.latest_complete(str(workspace))
    assert manifest.step == step
    names = set()
    for f in manifest.file:
        if "-server" in f:
            names |= {s.name for s in checkpoint.read_file(
                str(workspace / "checkpoint" / f)).slices}
    return names


@pytest.mark.parametrize("solver_type,mode,layers,wait_free", [
    ("SGD", "AUTO", (), True), ("SGD", "NEVER", ("ip1", "ip3"), False), ("Adam", "ALWAYS", (), True)])
def test_dist_train_sfb_on_off_match_single_process(tmp_path, solver_type, mode, layers,
                                                     wait_free):
    from caffepy.dist.waitfree import CommOptions
    W = G * K
    x, y = wide_data(10 * W * B)
    want = reference(WIDE_NET, x, y, W, B, solver_type=solver_type)
    off, _ = _dist_train(tmp_path / "off", solver_type, CommOptions(wait_free, sfb_mode="NEVER"))
    import logging
    from caffepy.log import logger
    records = []
    keep = logging.Handler()
    keep.emit = lambda record: records.append(record.getMessage())
    level = logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        on, result = _dist_train(tmp_path / "on", solver_type,
                                 CommOptions(wait_free, sfb_mode=mode, sfb_layers=layers))
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
    assert result.step == 20 and on.iter == 20
    logged = "\n".join(records)
    if mode == "AUTO":           # the decision and its inputs are logged, one line per weight
        assert "SFB choice for layer 'ip2' (weight 30x80, 2 factor rows per worker, 4 workers): " \
            "factors move 1320 numbers, dense push/pull 9600 at the busiest process -> SFB" in logged
        assert "layer 'ip3'" in logged and "layer 'ip1'" in logged
    for a, b, c in zip(want, off.net.learnable_params, on.net.learnable_params):
        np.testing.assert_allclose(b.data, a, rtol=0, atol=1e-6)
        np.testing.assert_allclose(c.data, a, rtol=0, atol=1e-6)
    # the SFB weights never reached a server: the servers' checkpoint files lack them
    # AUTO (4 workers, 2 servers on worker processes): ip1 and ip2 go SFB, ip3 stays dense
    sfb_names = {"AUTO": {"ip1:0", "ip2:0"}, "NEVER": {"ip1:0", "ip3:0"},
                 "ALWAYS": {"ip1:0", "ip2:0", "ip3:0"}}[mode]
    names = _server_param_names(tmp_path / "on")
    assert not names & sfb_names and {"ip1:1", "ip2:1", "ip3:1"} <= names
    assert {"ip1:0", "ip2:0", "ip3:0"} - sfb_names <= names
    assert len(_server_param_names(tmp_path / "off")) == len(off.net.learnable_params)


def test_dist_train_sfb_from_cluster_fields(tmp_path):
    W = G * K
    x, y = wide_data(10 * W * B)
    want = reference(WIDE_NET, x, y, W, B)
    solver, result = _dist_train(tmp_path, "SGD", sfb_mode=caffe_pb2.ClusterParameter.NEVER,
                                 sfb_layer=["ip2"], wait_free=False)
    for a, p in zip(want, solver.net.learnable_params):
        np.testing.assert_allclose(p.data, a, rtol=0, atol=1e-6)
    assert "ip2:0" not in _server_param_names(tmp_path)
    with pytest.raises(Exception, match="SFB: only with BSP"):
        _dist_train(tmp_path / "async", "SGD", sfb_mode=caffe_pb2.ClusterParameter.ALWAYS,
                    consistency=caffe_pb2.ClusterParameter.ASYNC)
