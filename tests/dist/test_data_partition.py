"""Data partition across workers with the real data layers: worker w of W reads items w, w + W, ...
(Caffe's solver_rank / solver_count skipping), for an LMDB Data layer and for HDF5Data, including
worker 0, which trains on the solver's own net (built before any worker's rank was known)."""
import numpy as np
import pytest

from caffepy import dist
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver

N = 16
NET = """name: "part"
layer { name: "data" type: "%(type)s" top: "data" top: "label" include { phase: TRAIN } %(param)s }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 16 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def _lmdb(tmp_path):
    pytest.importorskip("lmdb")
    from caffepy.data import db as dbmod
    from caffepy.data.datum import array_to_datum
    path = str(tmp_path / "lmdb")
    with dbmod.open_db(path, "lmdb", "w") as db:
        for i in range(N):
            d = array_to_datum(np.full((1, 1, 2), i, np.uint8), label=i)
            db.put(b"%08d" % i, d.SerializeToString())
    return "Data", 'data_param { source: "%s" backend: LMDB batch_size: 2 }' % path


def _hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = str(tmp_path / "rows.h5")
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(N, dtype=np.float32).repeat(2).reshape(N, 1, 1, 2)
        f["label"] = np.arange(N, dtype=np.float32)
    (tmp_path / "list.txt").write_text(path + "\n")
    return "HDF5Data", 'hdf5_data_param { source: "%s" batch_size: 2 }' % (tmp_path / "list.txt")


@pytest.mark.parametrize("source", [_lmdb, _hdf5], ids=["lmdb", "hdf5"])
@pytest.mark.parametrize("G,K", [(2, 1), (1, 2), (2, 2)])
def test_worker_w_reads_items_w_mod_W(tmp_path, source, G, K):
    layer_type, layer_param = source(tmp_path)
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text('base_lr: 0.01 lr_policy: "fixed" max_iter: 4 display: 0 '
                        'snapshot_after_train: false', param)
    param.net_param.CopyFrom(proto_io.read_net(NET % {"type": layer_type, "param": layer_param}))
    solver = get_solver(param)
    seen = {}

    def record(w, nworkers, net):       # a feeder that only watches what the data layer produces
        layer = net.layers[0]
        forward = layer.forward_cpu

        def watched(bottom, top):
            forward(bottom, top)
            seen.setdefault(w, []).extend(int(v) for v in top[1].data)
        layer.forward_cpu = watched
    c = caffe_pb2.ClusterParameter(nworker_groups=G, nworkers_per_group=K,
                                   workspace=str(tmp_path / "ws"))
    result = dist.train(solver, cluster=c, feeder=record)
    assert result.step == 4
    W = G * K
    per_worker = 4 * 2 // K                      # 4 steps of the group's batch cut K ways
    assert sorted(seen) == list(range(W))
    for w in range(W):
        want = [(w + W * i) % N for i in range(per_worker)]
        assert seen[w] == want, (w, seen[w])
