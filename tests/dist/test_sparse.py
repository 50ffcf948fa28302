"""Sharded embedding tables: the shard map, each server holding only its shard, and a minimal
in-process BSP loop (this file's ``bsp_run``, also used by test_sfb.py) whose sharded, SFB and
dense runs give the single-process solver's weights after 20 steps (float64, 1e-6).

``bsp_run`` wires W worker nets, dense averaging, SFB factor exchange and table shards through
the modules' own messages (DistHeader + numpy buffers) and the solvers' update rules. The
``test_dist_train_*`` cases run the same through ``dist.train`` (caffepy.dist.routing).
"""
import numpy as np
import pytest

from caffepy.dist import sfb, sparse
from caffepy.dist.topology import Topology
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver, lr_policies, solver_class

EMBED_NET = """name: "emb"
layer { name: "data" type: "MemoryData" top: "ids" top: "label"
        memory_data_param { batch_size: %(batch)d channels: 1 height: 1 width: 3 } }
layer { name: "embed" type: "Embed" bottom: "ids" top: "emb"
        embed_param { num_output: 4 input_dim: 23 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "ip" type: "InnerProduct" bottom: "emb" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""
SOLVER = """base_lr: 0.2 momentum: 0.9 weight_decay: 0.01 lr_policy: "step" gamma: 0.5
stepsize: 7 max_iter: %(steps)d random_seed: 3 display: 0 snapshot_after_train: false type: "%(type)s"
"""


def solver_param(net_text, batch, steps=20, solver_type="SGD"):
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text(SOLVER % {"steps": steps, "type": solver_type}, param)
    param.net_param.CopyFrom(proto_io.read_net(net_text % {"batch": batch}))
    return param


def embed_data(n, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 23, size=(n, 1, 1, 3)).astype(np.float64)
    return ids, (ids[:, 0, 0, 0] % 3).astype(np.float64)


def reference(net_text, x, y, W, B, steps=20, solver_type="SGD"):
    solver = get_solver(solver_param(net_text, W * B, steps, solver_type), dtype=np.float64)
    solver.net.layers[0].reset(x, y)
    solver.solve()
    return [p.data.copy() for p in solver.net.learnable_params]


class _Lr(object):
    current_step = 0


def bsp_run(net_text, x, y, W, B, steps=20, solver_type="SGD", shards=0, table="embed",
            sfb_overrides=False, mode="exact"):
    """W workers, BSP; the final params of worker 0 (tables assembled) and the run's parts."""
    param = solver_param(net_text, B, steps, solver_type)
    cls = solver_class(param.type)
    nets = [get_solver(param, dtype=np.float64).net]
    for _ in range(1, W):
        net = Net(param.net_param, phase=caffe_pb2.TRAIN, dtype=np.float64)
        for mine, src in zip(net.learnable_params, nets[0].learnable_params):
            mine.data[...] = src.data
        nets.append(net)
    for w, net in enumerate(nets):
        net.layers[0].reset(x[w::W], y[w::W])
    n = len(nets[0].learnable_params)
    tables, clients, tli = {}, [], None
    if shards:
        tli = nets[0]._layer_names.index(table)
        tp = [p for p, (li, k) in enumerate(nets[0].param_layer_indices) if (li, k) == (tli, 0)][0]
        full = nets[0].learnable_params[tp].data
        smap = sparse.ShardMap(full.shape[0], shards)
        tables = {tp: [sparse.TableShard(smap, s, v, cls.n_history, mode)
                       for s, v in enumerate(smap.scatter(full))]}
        clients = [sparse.SparseTableClient(tp, net.learnable_params[tp], list(range(shards)))
                   for net in nets]
    cost = sfb.CostModel(Topology(caffe_pb2.ClusterParameter(nworker_groups=W),
                                  [p.count for p in nets[0].learnable_params]))
    plans = [sfb.plan(net, sfb_overrides, cost) if sfb_overrides is not False else {} for net in nets]
    collectors = [sfb.FactorCollector(net, pl) for net, pl in zip(nets, plans)]
    sfb_params = {sl.param: sl for sl in plans[0].values()}
    dense = [p for p in range(n) if p not in tables and p not in sfb_params]
    hist = {p: [np.zeros(nets[0].learnable_params[p].shape) for _ in range(cls.n_history)]
            for p in dense}
    replica_hist = [{p: [np.zeros(sl.shape) for _ in range(cls.n_history)] for p, sl in sfb_params.items()}
                    for _ in nets]
    lr, wire = _Lr(), {"sfb": 0, "sparse": 0}
    for it in range(steps):
        rate = lr_policies.learning_rate(param, it, lr)
        for w, net in enumerate(nets):
            net.clear_param_diffs()
            if tli is not None:
                net.forward_from_to(0, tli - 1)
                for dst, h, bufs in clients[w].lookup_messages(net.bottom_vecs[tli][0].data, it):
                    answer = sparse.serve(tables[clients[w].index][dst], h, bufs)
                    clients[w].on_rows(*answer)
                    wire["sparse"] += sum(b.nbytes for b in bufs + answer[1])
                net.forward_from_to(tli)
            else:
                net.forward_from_to()
            net.backward_from_to()
        for p in dense:
            g = sum(net.learnable_params[p].diff for net in nets) / W
            values = nets[0].learnable_params[p].data
            sparse.step_array(values, g, hist[p], cls.update_rule, param, rate,
                              nets[0].params_lr[p], nets[0].params_weight_decay[p], it)
            for net in nets[1:]:
                net.learnable_params[p].data[...] = values
        factors = [col.take() for col in collectors]
        for p, sl in sfb_params.items():
            msgs = [sfb.message(p, it, w, *factors[w][p]) for w in range(W)]
            wire["sfb"] += sum(b.nbytes for _, bufs in msgs for b in bufs)
            for w, net in enumerate(nets):
                got = {}
                for h, bufs in msgs:
                    src, u, v = sfb.unpack(h, bufs, plans[w][sl.li])
                    got[src] = (u, v)
                g = sfb.rebuild(got, W)
                sparse.step_array(net.learnable_params[p].data, g, replica_hist[w][p], cls.update_rule,
                                  param, rate, net.params_lr[p], net.params_weight_decay[p], it)
        for w, client in enumerate(clients):
            for dst, h, bufs in client.grad_messages(it):
                sparse.serve(tables[client.index][dst], h, bufs)
                wire["sparse"] += sum(b.nbytes for b in bufs)
        for p, shard_list in tables.items():
            for shard in shard_list:
                shard.apply(W, cls.update_rule, param, rate, nets[0].params_lr[p],
                            nets[0].params_weight_decay[p], it)
    out = [p.data.copy() for p in nets[0].learnable_params]
    for p, shard_list in tables.items():
        out[p] = shard_list[0].map.assemble([s.values for s in shard_list])
    return out, {"nets": nets, "tables": tables, "wire": wire, "plans": plans}


def test_shard_map_round_trip_and_reshard():
    table = np.arange(23 * 2, dtype=np.float64).reshape(23, 2)
    m = sparse.ShardMap(23, 4)
    shards = m.scatter(table)
    assert [s.shape[0] for s in shards] == [6, 6, 6, 5] == [m.shard_rows(s) for s in range(4)]
    np.testing.assert_array_equal(m.assemble(shards), table)
    uniq, parts = m.split([22, 5, 5, 0, 9])
    assert list(uniq) == [0, 5, 9, 22]
    assert [(s, list(local)) for s, _, local in parts] == [(0, [0]), (1, [1, 2]), (2, [5])]
    one = sparse.reshard(shards, 23, 1)
    assert len(one) == 1 and one[0].shape == (23, 2)
    np.testing.assert_array_equal(one[0], table)
    np.testing.assert_array_equal(sparse.ShardMap(23, 3).assemble(sparse.reshard(shards, 23, 3)), table)
    with pytest.raises(Exception, match="outside"):
        m.split([23])


def test_each_server_holds_only_its_shard():
    W, B, S = 2, 4, 3
    x, y = embed_data(10 * W * B)
    final, run = bsp_run(EMBED_NET, x, y, W, B, steps=3, shards=S)
    (tp, shard_list), = run["tables"].items()
    full = final[tp]
    for s, shard in enumerate(shard_list):
        assert shard.values.shape == ((23 - s + S - 1) // S, 4)
        np.testing.assert_array_equal(shard.row_ids, np.arange(s, 23, S))
        np.testing.assert_array_equal(shard.values, full[s::S])
        assert shard.nbytes == shard.values.nbytes * 2       # values + one history array (SGD)
        assert shard.values.nbytes <= full.nbytes // S + full[0].nbytes
    # only the rows of the batch went over the wire (ids + rows), never a whole table
    per_step = run["wire"]["sparse"] / 3
    assert per_step < 2 * W * (2 * full.nbytes)


@pytest.mark.parametrize("solver_type,shards", [("SGD", 1), ("SGD", 3), ("Adam", 4)])
def test_sharded_embedding_matches_dense(solver_type, shards):
    W, B = 2, 4
    x, y = embed_data(10 * W * B)
    want = reference(EMBED_NET, x, y, W, B, solver_type=solver_type)
    dense, _ = bsp_run(EMBED_NET, x, y, W, B, solver_type=solver_type)
    sharded, _ = bsp_run(EMBED_NET, x, y, W, B, solver_type=solver_type, shards=shards)
    for a, b, c in zip(want, dense, sharded):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
        np.testing.assert_allclose(c, a, rtol=0, atol=1e-6)


def test_lazy_updates_touch_only_looked_up_rows():
    W, B = 2, 4
    x, y = embed_data(10 * W * B)
    x[:] = np.minimum(x, 10)                     # rows 11.. are never looked up
    param = solver_param(EMBED_NET, B, 5)
    start = get_solver(param, dtype=np.float64).net.learnable_params[0].data.copy()
    final, _ = bsp_run(EMBED_NET, x, y, W, B, steps=5, shards=3, mode="lazy")
    np.testing.assert_array_equal(final[0][11:], start[11:])
    assert not np.allclose(final[0][:11], start[:11])


# -- inside caffepy.dist's trainer -------------------------------------------------------------
def _dist_train(workspace, G, K, P, solver_type="SGD", comm=None, steps=20, x=None, y=None,
                **fields):
    from caffepy import dist
    W = G * K
    if x is None:
        x, y = embed_data(10 * W * 4)
    solver = get_solver(solver_param(EMBED_NET, K * 4, steps, solver_type), dtype=np.float64)
    c = caffe_pb2.ClusterParameter(nworker_groups=G, nworkers_per_group=K, nservers_per_group=P,
                                   workspace=str(workspace), **fields)

    def feed(w, n, net):
        net.layers[0].reset(x[w::n], y[w::n])
    return solver, dist.train(solver, cluster=c, feeder=feed, comm=comm)


@pytest.mark.parametrize("solver_type,G,K,P,wait_free", [
    ("SGD", 2, 1, 3, True), ("SGD", 1, 2, 1, False), ("Adam", 2, 2, 4, False), ("Adam", 2, 1, 2, True)])
def test_dist_train_sharded_vs_unsharded_match_single_process(tmp_path, solver_type, G, K, P,
                                                              wait_free):
    from caffepy.dist import checkpoint
    from caffepy.dist.waitfree import CommOptions
    W = G * K
    x, y = embed_data(10 * W * 4)
    want = reference(EMBED_NET, x, y, W, 4, solver_type=solver_type)
    dense, r0 = _dist_train(tmp_path / "dense", G, K, P, solver_type,
                            CommOptions(wait_free, shard_tables=False))
    sharded, r1 = _dist_train(tmp_path / "sharded", G, K, P, solver_type,
                              CommOptions(wait_free, sharded_tables=["embed"]))
    assert r1.step == 20 and not r0.table_shards
    for a, b, c in zip(want, dense.net.learnable_params, sharded.net.learnable_params):
        np.testing.assert_allclose(b.data, a, rtol=0, atol=1e-6)
        np.testing.assert_allclose(c.data, a, rtol=0, atol=1e-6)
    table = sharded.net.learnable_params[0].data
    # each server of the real trainer holds only its rows: r % P == j, at local row r // P
    assert sorted(r1.table_shards) == list(range(P))
    for j, shards in r1.table_shards.items():
        (p, shard), = shards.items()
        assert p == 0 and shard.values.shape == ((23 - j + P - 1) // P, 4)
        np.testing.assert_array_equal(shard.row_ids, np.arange(j, 23, P))
        np.testing.assert_array_equal(shard.values, table[j::P])
    # the final checkpoint holds the shards; reassembled in the original row order
    step, manifest = checkpoint.latest_complete(str(tmp_path / "sharded"))
    full = checkpoint.full_params(str(tmp_path / "sharded"), manifest, np.float64)
    np.testing.assert_array_equal(full["embed:0"][0].reshape(23, 4), table)
    net = Net(proto_io.read_net(EMBED_NET % {"batch": 4}), phase=caffe_pb2.TRAIN, dtype=np.float64)
    report = checkpoint.init_net(net, str(tmp_path / "sharded"))
    assert "embed:0" in report["matched"]
    np.testing.assert_array_equal(net.learnable_params[0].data, table)


def test_dist_train_shards_every_embed_by_default(tmp_path):
    x, y = embed_data(10 * 2 * 4)
    want = reference(EMBED_NET, x, y, 2, 4)
    extra = dict(wait_free=False)
    whole, r = _dist_train(tmp_path / "whole", 2, 1, 3, x=x, y=y, **extra)
    assert sorted(r.table_shards) == [0, 1, 2]          # cluster defaults: every Embed sharded
    for a, p in zip(want, whole.net.learnable_params):
        np.testing.assert_allclose(p.data, a, rtol=0, atol=1e-6)
    lazy, r = _dist_train(tmp_path / "lazy", 2, 1, 3, x=x, y=y, steps=3,
                          sparse_update=caffe_pb2.ClusterParameter.LAZY)
    assert r.table_shards[0][0].mode == "lazy"
    with pytest.raises(Exception, match="sharded tables: only with BSP"):
        _dist_train(tmp_path / "ssp", 2, 1, 3, x=x, y=y, sharded_table=["embed"],
                    consistency=caffe_pb2.ClusterParameter.SSP)


def test_scaled_rows_one_factor_for_every_table():
    assert caffe_pb2.ClusterParameter().tables_sharded_for == 0        # off by default
    assert [sparse.scaled_rows(r, 2, 4) for r in (23, 24, 1)] == [12, 12, 1]
    assert sparse.scaled_rows(23, 1, 4) == 6 and sparse.scaled_rows(5, 1, 100) == 1
    assert sparse.scaled_rows(23, 4, 4) == 23 and sparse.scaled_rows(23, 3, 0) == 23


def test_dist_train_scaled_tables_fit_fewer_servers(tmp_path):
    """Tables sized for 4 servers on 2: the 23-row table is scaled to ceil(23 * 2 / 4) = 12 rows,
    ids hashed modulo 12. Expected: the single process on the same net with a 12-row table (the
    first 12 initial rows) fed ids % 12; each server holds its rows j, j + 2, ... of the 12."""
    from caffepy.dist import checkpoint
    W, B, rows = 2, 4, 12
    x, y = embed_data(10 * W * B)
    solver = get_solver(solver_param(EMBED_NET, B, 20), dtype=np.float64)
    init = [p.data.copy() for p in solver.net.learnable_params]
    c = caffe_pb2.ClusterParameter(nworker_groups=W, nservers_per_group=2, tables_sharded_for=4,
                                   workspace=str(tmp_path), wait_free=False)

    def feed(w, n, net):
        net.layers[0].reset(x[w::n], y[w::n])
    from caffepy import dist
    result = dist.train(solver, cluster=c, feeder=feed)
    ref = get_solver(solver_param(EMBED_NET.replace("input_dim: 23", "input_dim: %d" % rows), W * B),
                     dtype=np.float64)
    for blob, v in zip(ref.net.learnable_params, init):
        blob.data[...] = v[:blob.shape[0]]
    ref.net.layers[0].reset(x % rows, y)
    start = float(ref.net.forward()["loss"])
    ref.net.layers[0].reset(x % rows, y)
    ref.solve()
    ref.net.layers[0].reset(x % rows, y)
    assert float(ref.net.forward()["loss"]) < start                # the scaled net trains
    want = [p.data for p in ref.net.learnable_params]
    table = solver.net.learnable_params[0].data
    np.testing.assert_allclose(table, want[0][np.arange(23) % rows], rtol=0, atol=1e-6)
    for a, p in zip(want[1:], solver.net.learnable_params[1:]):
        np.testing.assert_allclose(p.data, a, rtol=0, atol=1e-6)
    for j in (0, 1):
        (p, shard), = result.table_shards[j].items()
        assert shard.values.shape == (6, 4)                       # its 6 of 12 rows, not of 23
        np.testing.assert_array_equal(shard.row_ids, np.arange(j, rows, 2))
        np.testing.assert_allclose(shard.values, want[0][j::2], rtol=0, atol=1e-6)
    _, manifest = checkpoint.latest_complete(str(tmp_path))
    full = checkpoint.full_params(str(tmp_path), manifest, np.float64)
    np.testing.assert_allclose(full["embed:0"][0].reshape(rows, 4), want[0], rtol=0, atol=1e-6)


def test_client_hashes_ids_and_sums_colliding_gradients():
    """A worker's view of a scaled table: ids 1 and 13 share row 1 of 12: the lookup asks for it
    once, writes it at both ids, and the gradient sent for row 1 is the sum of both ids' rows."""
    from caffepy.blob import Blob
    table = Blob((23, 2), np.float64)
    client = sparse.SparseTableClient(0, table, [100, 101], rows=12)
    msgs = client.lookup_messages(np.array([13, 1, 4, 13]), step=0)
    assert [(dst, list(b[0])) for dst, h, b in msgs] == [(100, [2]), (101, [0])]   # rows 4, 1
    smap = sparse.ShardMap(12, 2)
    values = np.arange(24, dtype=np.float64).reshape(12, 2)
    shards = [sparse.TableShard(smap, s, v) for s, v in enumerate(smap.scatter(values))]
    for dst, h, bufs in msgs:
        client.on_rows(*sparse.serve(shards[dst - 100], h, bufs))
    np.testing.assert_array_equal(table.data[[1, 13, 4]], values[[1, 1, 4]])
    table.diff[1], table.diff[13], table.diff[4] = [1.0, 2.0], [10.0, 20.0], [5.0, 5.0]
    parts = client.grad_parts(np.array([13, 1, 4]))
    assert sorted(parts) == [0, 1]
    np.testing.assert_array_equal(parts[1][0], [0])                  # row 1 = local 0 of shard 1
    np.testing.assert_array_equal(parts[1][1], [[11.0, 22.0]])       # ids 1 and 13 summed
    np.testing.assert_array_equal(parts[0][0], [2])                  # row 4 = local 2 of shard 0
    np.testing.assert_array_equal(parts[0][1], [[5.0, 5.0]])
    with pytest.raises(Exception, match="outside the table's 23 rows"):
        client.lookup_messages(np.array([23]), step=1)
