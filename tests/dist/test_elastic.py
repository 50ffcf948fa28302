"""--resume onto another cluster shape (caffepy.dist.elastic): a checkpoint written by G x K workers
and P server shards resumes on G' x K' and P', the total batch kept, servers re-sliced, every
worker's data position re-mapped. Under BSP the run that changed shape at step k ends equal (within
rounding) to the run that never changed; under ASYNC it converges like an unchanged run."""
import os

import numpy as np
import pytest

import nets
from conftest import box_mpiexec, needs_mpi
from caffepy import dist
from caffepy.dist import checkpoint, elastic
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver

TOTAL, N = 8, 80            # total batch per step; rows of the global order (10 steps an epoch)
X, Y = nets.data(N)


def _train(ws, shape, max_iter, resume=False, consistency="BSP", dtype=np.float32, batch=None):
    """The MLP on shape (G, K, P); the solver's batch is the per-group one (TOTAL / G) unless
    given (a resume keeps the checkpoint's total whatever the solver says)."""
    G, K, P = shape
    param = nets.solver_param(batch or TOTAL // G, max_iter, extra="checkpoint_frequency: 4")
    solver = get_solver(param, dtype=dtype)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=P,
                     workspace=str(ws), consistency=consistency, timeout=60)
    result = dist.train(solver, cluster=c, resume=resume, feeder=nets.feeder(X, Y))
    return [p.data.copy() for p in solver.net.learnable_params], result


def _diff(a, b):
    return max(float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(a, b))


@pytest.mark.parametrize("before,after", [
    ((1, 2, 2), (1, 1, 1)),       # 2 workers, 2 shards -> 1 worker, 1 shard
    ((1, 1, 1), (1, 2, 2)),       # and back
    ((2, 1, 2), (1, 1, 1)),       # two groups -> one: the per-group batch doubles
], ids=["2to1", "1to2", "groups2to1"])
def test_bsp_shape_change_ends_as_the_unchanged_run(tmp_path, monkeypatch, before, after):
    lines = []
    monkeypatch.setattr(elastic, "info", lambda where, text: lines.append(text))
    unchanged, _ = _train(tmp_path / "a", before, 12)
    other, _ = _train(tmp_path / "b", after, 12)
    _train(tmp_path / "cut", before, 6)                        # stops at step 6, checkpoint there
    resumed, result = _train(tmp_path / "cut", after, 12, resume=True, batch=TOTAL // before[0])
    assert result.step == 12
    (change,) = lines
    assert change.startswith("Resume: shape changed: %d group" % before[0]), change
    assert "total %d kept" % TOTAL in change and "data positions re-mapped" in change, change
    d = _diff(resumed, unchanged)
    print("%s -> %s: %.3g from the unchanged run, %.3g from the other shape's; the two unchanged "
          "runs differ by %.3g" % (before, after, d, _diff(resumed, other), _diff(unchanged, other)))
    assert d <= 1e-5
    assert _diff(resumed, other) <= 1e-5
    # the next checkpoint records the new shape and the kept total
    _, m = checkpoint.latest_complete(str(tmp_path / "cut"))
    assert (m.nworker_groups, m.nworkers_per_group, m.nservers_per_group) == after
    assert m.format == 3 and list(m.total_batch) == [TOTAL] and list(m.batch_layer) == ["data"]


def test_total_batch_kept_over_a_second_resume(tmp_path, monkeypatch):
    """2 groups (batch 4 each) -> 1 group (8) at step 4 -> the same shape again at step 8 with the
    solver still saying 4: the checkpoint's total 8 wins (one line), equal to the unchanged run."""
    lines = []
    monkeypatch.setattr(elastic, "info", lambda where, text: lines.append(text))
    unchanged, _ = _train(tmp_path / "a", (1, 1, 1), 12)
    _train(tmp_path / "cut", (2, 1, 2), 4)
    _train(tmp_path / "cut", (1, 1, 1), 8, resume=True, batch=4)
    resumed, _ = _train(tmp_path / "cut", (1, 1, 1), 12, resume=True, batch=4)
    assert lines[-1].startswith("Resume: the net's batch differs from the checkpoint's") and \
        lines[-1].endswith("(data 8)"), lines
    assert _diff(resumed, unchanged) <= 1e-5


def test_same_worker_split_is_bit_identical(tmp_path):
    """1 x 2 workers, 2 shards -> 1 x 2 workers, 3 shards: only the servers change, each worker's
    share of a step is the same: bit for bit the unchanged run; param versions continue."""
    unchanged, full = _train(tmp_path / "a", (1, 2, 2), 12, dtype=np.float64)
    _train(tmp_path / "cut", (1, 2, 2), 6, dtype=np.float64)
    resumed, result = _train(tmp_path / "cut", (1, 2, 3), 12, resume=True, dtype=np.float64)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(unchanged, resumed))
    assert set(result.param_versions.values()) == {12} == set(full.param_versions.values())


@pytest.mark.parametrize("case", ["sfb", "sharded"])
def test_routed_params_follow_the_shape(tmp_path, monkeypatch, case):
    """SFB weights (in the workers' files, with Adam's history) and a sharded Embed table (rows on
    the servers) resumed from 2 x 2 workers and 2 shards on 2 x 1 workers and 3 shards: the table
    re-sharded, within rounding of the unchanged run, history included."""
    import test_resume_routed as routed
    net_text, (x, y), batch, fields = routed.CASES[case]
    lines = []
    monkeypatch.setattr(elastic, "info", lambda where, text: lines.append(text))

    def run(ws, K, P, max_iter, resume=False):
        param = routed.solver_param(net_text, 2 * batch, max_iter, "Adam")
        param.checkpoint_frequency = 5
        solver = get_solver(param, dtype=np.float64)
        c = caffe_pb2.ClusterParameter(nworker_groups=2, nworkers_per_group=K, nservers_per_group=P,
                                       workspace=str(ws), wait_free=True, **fields)
        result = dist.train(solver, cluster=c, resume=resume, feeder=nets.feeder(x, y))
        return solver, result

    full, _ = run(tmp_path / "full", 2, 2, 20)
    run(tmp_path / "cut", 2, 2, 10)
    resumed, r = run(tmp_path / "cut", 1, 3, 20, resume=True)
    assert r.step == 20 and lines[-1].startswith("Resume: shape changed: 2 groups x 2 workers, "
                                                 "2 server shards -> 2 groups x 1 worker, 3 server "
                                                 "shards (per-worker batch %d -> %d" % (batch, 2 * batch))
    if case == "sharded":
        assert "tables re-sharded" in lines[-1] and sorted(r.table_shards) == [0, 1, 2]
    d = max(float(np.abs(a.data - b.data).max())
            for a, b in zip(full.net.learnable_params, resumed.net.learnable_params))
    h = max(float(np.abs(a - b).max()) for a, b in zip(full.history, resumed.history))
    print("%s: params %.3g, history %.3g from the unchanged run" % (case, d, h))
    assert d <= 1e-10 and h <= 1e-10


def test_format_2_manifest_still_resumes(tmp_path, monkeypatch):
    """A checkpoint whose manifest predates the shape (format 2: worker and server counts only)
    resumes on its own shape as before and on another with the shape inferred, in one line."""
    unchanged, _ = _train(tmp_path / "a", (1, 2, 2), 12)
    _train(tmp_path / "cut", (1, 2, 2), 6)
    step, m = checkpoint.latest_complete(str(tmp_path / "cut"))
    for f in ("nworker_groups", "nworkers_per_group", "nserver_groups", "nservers_per_group",
              "consistency", "batch_layer", "total_batch"):
        m.ClearField(f)
    m.format = 2
    from caffepy.proto import io as proto_io
    proto_io.write_binary(m, os.path.join(checkpoint.checkpoint_dir(str(tmp_path / "cut")),
                                          "step%d.manifest" % step))
    lines = []
    monkeypatch.setattr(elastic, "info", lambda where, text: lines.append(text))
    resumed, _ = _train(tmp_path / "cut", (1, 1, 1), 12, resume=True)
    assert len(lines) == 1 and "inferred" in lines[0], lines
    assert _diff(resumed, unchanged) <= 1e-5


def _lmdb_source(tmp_path):
    pytest.importorskip("lmdb")
    from caffepy.data import db as dbmod
    from caffepy.data.datum import array_to_datum
    path = str(tmp_path / "lmdb")
    with dbmod.open_db(path, "lmdb", "w") as db:
        for i in range(30):
            db.put(b"%08d" % i, array_to_datum(np.full((1, 1, 2), i, np.uint8), label=i % 16)
                   .SerializeToString())
    return "Data", 'data_param { source: "%s" backend: LMDB batch_size: 6 }' % path


def _hdf5_source(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = str(tmp_path / "rows.h5")
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(30, dtype=np.float32).repeat(2).reshape(30, 1, 1, 2)
        f["label"] = np.arange(30, dtype=np.float32) % 16
    (tmp_path / "list.txt").write_text(path + "\n")
    return "HDF5Data", 'hdf5_data_param { source: "%s" batch_size: 6 }' % (tmp_path / "list.txt")


@pytest.mark.parametrize("source", [_lmdb_source, _hdf5_source], ids=["lmdb", "hdf5"])
def test_data_positions_no_item_skipped_or_repeated(tmp_path, source):
    """A Data (LMDB) or HDF5Data layer over 30 items (item i holds i): 2 workers cut at step 3,
    resumed on 1 and then on 3 workers (total batch 6 kept): the items read, step after step, are
    the global order 0, 1, 2, ... with nothing skipped or repeated (wrapping around)."""
    import test_data_partition as part
    from caffepy.proto import io as proto_io
    layer_type, layer_param = source(tmp_path)
    seen = {}

    def run(max_iter, workers, resume):
        param = caffe_pb2.SolverParameter()
        proto_io.parse_text('base_lr: 0.01 lr_policy: "fixed" display: 0 checkpoint_frequency: 3 '
                            'snapshot_after_train: false max_iter: %d' % max_iter, param)
        param.net_param.CopyFrom(proto_io.read_net(part.NET % {"type": layer_type,
                                                              "param": layer_param}))
        solver = get_solver(param)

        def record(w, nworkers, net):
            layer = net.layers[0]
            forward = layer.forward_cpu

            def watched(bottom, top):
                forward(bottom, top)
                seen.setdefault((max_iter, w), []).extend(int(v) for v in top[0].data[:, 0, 0, 0])
            layer.forward_cpu = watched
        c = caffe_pb2.ClusterParameter(nworkers_per_group=workers, workspace=str(tmp_path / "ws"))
        return dist.train(solver, cluster=c, feeder=record, resume=resume).step

    assert run(3, 2, False) == 3 and run(6, 1, True) == 6 and run(10, 3, True) == 10
    order = []
    for max_iter, workers, steps in ((3, 2, 3), (6, 1, 3), (10, 3, 4)):
        per = 6 // workers
        for t in range(steps):
            for i in range(per):
                for w in range(workers):
                    order.append(seen[(max_iter, w)][t * per + i])
    assert order == [i % 30 for i in range(60)], order


def test_random_draws_rederived_deterministically(tmp_path):
    """LeNet on an LMDB with random crops, mirrors and dropout: 2 workers cut at step 3, resumed
    twice (from copies of the checkpoint) on 1 worker: the two resumes are the same run, bit for
    bit (the generators re-derived from random_seed, step and worker)."""
    pytest.importorskip("lmdb")
    import shutil
    import lenet_lmdb
    db = lenet_lmdb.make_lmdb(tmp_path / "db")
    lenet_lmdb.train(db, tmp_path / "cut", 3, groups=1, workers=2)
    shutil.copytree(str(tmp_path / "cut"), str(tmp_path / "copy"))
    runs = [lenet_lmdb.train(db, tmp_path / ws, 6, resume=True, groups=1, workers=1)
            for ws in ("cut", "copy")]
    assert all(r.step == 6 for _, r in runs)
    a, b = ([p.data.copy() for p in s.net.learnable_params] for s, _ in runs)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def _eval_loss(params):
    """Mean softmax loss of the MLP with ``params`` over the whole data set."""
    w1, b1, w2, b2 = [p.astype(np.float64) for p in params]
    h = np.maximum(X.reshape(N, -1) @ w1.T + b1, 0) @ w2.T + b2
    h -= h.max(axis=1, keepdims=True)
    logp = h - np.log(np.exp(h).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(N), Y.astype(int)].mean())


@pytest.mark.parametrize("consistency", ["ASYNC", "SSP"])
def test_async_ssp_resume_converges_like_unchanged_runs(tmp_path, monkeypatch, consistency):
    """ASYNC / SSP runs differ from run to run (arrival order): 2 groups x 1 worker, 2 shards cut at
    step 10 and resumed on 2 groups x 2 workers, 1 shard ends with a loss no worse than the
    unchanged runs' spread allows (arrival order can also land it below them: that is convergence
    too, not a failure). (A change of the group count changes the updates per step: a WARNING.)"""
    losses = [_eval_loss(_train(tmp_path / ("u%d" % i), (2, 1, 2), 24, consistency=consistency)[0])
              for i in range(5)]
    _train(tmp_path / "cut", (2, 1, 2), 10, consistency=consistency)
    resumed, result = _train(tmp_path / "cut", (2, 2, 1), 24, resume=True, consistency=consistency)
    assert result.step == 24
    loss, spread = _eval_loss(resumed), max(losses) - min(losses)
    print("%s: resumed loss %.4f, unchanged runs %s" % (consistency, loss,
                                                        ", ".join("%.4f" % v for v in losses)))
    # the spread of 5 runs, at least 20% of their mean: a resume onto another layout is a run of
    # its own whose arrival order the 5 do not sample (0.633 against 0.535-0.571 under load)
    margin = max(spread, 0.2 * np.mean(losses))
    assert np.isfinite(loss) and 0 < loss <= max(losses) + margin
    warned = []
    monkeypatch.setattr(elastic, "warning", lambda where, text: warned.append(text))
    _train(tmp_path / "cut", (1, 2, 1), 26, resume=True, consistency=consistency, batch=TOTAL // 2)
    assert len(warned) == 1 and "2 updates of batch 4 -> 1 update of batch 8" in warned[0], warned


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("before,after", [(2, 1), (1, 2)], ids=["2to1", "1to2"])
def test_bsp_across_emulated_hosts(cluster_box, tmp_path, before, after):
    """A rank per emulated host (tools/cluster.py), 1 group x that many workers and server shards,
    cut at step 6 and resumed on the other host count: within 1e-5 of the uninterrupted run."""
    box = cluster_box(2, rate="10gbit")
    common = ["--groups", "1", "--batch", str(TOTAL), "--checkpoint_frequency", "4"]

    def run(ws, ranks, max_iter, *extra):
        p = box_mpiexec(box, common + ["--workspace", str(ws), "--max_iter", str(max_iter),
                                       "--workers", str(ranks), "--servers", str(ranks)] +
                        list(extra), ppn=1, hosts=box.hosts[:ranks], timeout=180)
        assert p.returncode == 0, p.err[-2000:]
        return p

    run(tmp_path / "full", before, 12, "--out", str(tmp_path / "full.npz"))
    run(tmp_path / "cut", before, 6)
    p = run(tmp_path / "cut", after, 12, "--resume", "--out", str(tmp_path / "resumed.npz"))

    def n(x, word):
        return "%d %s%s" % (x, word, "" if x == 1 else "s")
    want = "Resume: shape changed: 1 group x %s, %s -> 1 group x %s, %s (per-worker batch %d -> " \
           "%d, total %d kept); shards re-sliced, data positions re-mapped" % (
               n(before, "worker"), n(before, "server shard"), n(after, "worker"),
               n(after, "server shard"), TOTAL // before, TOTAL // after, TOTAL)
    assert want in p.err + p.out
    full = np.load(str(tmp_path / "full.npz"), allow_pickle=False)
    resumed = np.load(str(tmp_path / "resumed.npz"), allow_pickle=False)
    d = max(float(np.abs(full[k] - resumed[k]).max()) for k in full.files)
    print("emulated hosts %d -> %d: %.3g from the uninterrupted run" % (before, after, d))
    assert d <= 1e-5


def test_plan_predicts_the_resumed_shape(tmp_path, capsys):
    """``caffepy plan --resume WS --hosts N``: the new shape with the checkpoint's total batch."""
    import test_plan
    from caffepy import cli
    solver_file, cal = test_plan._files(tmp_path)
    ws = tmp_path / "ws"
    os.makedirs(checkpoint.checkpoint_dir(str(ws)))
    old = elastic.Shape(4, 1, 1, 4, "BSP", [("data", 128), ("label", 128)])
    checkpoint.write_manifest(str(ws), 10, [], 10, "SGD", 4, 4, shape=old)
    assert cli.main(["plan", "--solver", solver_file, "--hosts", "2", "--resume", str(ws),
                     "--calibration", cal]) == 0
    out = capsys.readouterr().out
    assert "Resume: shape changed: 4 groups x 1 worker, 4 server shards -> 2 groups x 1 worker, " \
           "2 server shards (per-worker batch 32 -> 64, total 128 kept)" in out
    assert "on 2 hosts at 10gbit: 2 worker groups x 1 (batch 64 each)" in out and "steps/s" in out
    assert cli.main(["plan", "--solver", solver_file, "--table", "--resume", str(ws),
                     "--calibration", cal]) == 1
    assert "not --table" in capsys.readouterr().err


def test_groups_from_ranks():
    """``nworker_groups: 0``: the groups the launch's ranks make; one line where they do not."""
    from caffepy.dist.topology import groups_from_ranks, load_cluster
    from caffepy.errors import CaffeError
    param = caffe_pb2.SolverParameter()
    param.cluster.nworker_groups, param.cluster.nworkers_per_group = 0, 2
    c = load_cluster(param)
    assert groups_from_ranks(c, 6).nworker_groups == 3
    c.nworker_groups, c.server_worker_separate, c.nservers_per_group = 0, True, 2
    assert groups_from_ranks(c, 6).nworker_groups == 2
    c.nworker_groups = 0
    with pytest.raises(CaffeError, match="5 ranks less 2 servers do not make groups of 2"):
        groups_from_ranks(c, 5)
    with pytest.raises(CaffeError, match="in process give their number"):
        dist.train(get_solver(nets.solver_param(4, 2)), cluster=caffe_pb2.ClusterParameter(
            nworker_groups=0), engine="inproc")
