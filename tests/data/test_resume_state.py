"""Exact resume: data layers save where they stand (cursor, shuffle and transform random state) and
the solver its random generator, so a run resumed from a snapshot equals the uninterrupted one."""
import os

import numpy as np
import pytest

from caffepy import common
from caffepy.data import state as data_state
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver

LENET = """name: "LeNet"
layer { name: "mnist" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 mirror: true crop_size: 24 }
  data_param { source: "%(db)s" batch_size: 4 backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 5 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "drop1" type: "Dropout" bottom: "ip1" top: "ip1" dropout_param { dropout_ratio: 0.3 } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def make_lmdb(path, n=22, seed=0):
    """An LMDB of ``n`` random 1 x 28 x 28 uint8 Datums with labels 0..9 (LeNet's input)."""
    pytest.importorskip("lmdb")
    from caffepy.data import db as dbmod
    from caffepy.data.datum import array_to_datum
    rng = np.random.RandomState(seed)
    with dbmod.open_db(str(path), "lmdb", "w") as db:
        for i in range(n):
            d = array_to_datum(rng.randint(0, 256, (1, 28, 28)).astype(np.uint8), label=i % 10)
            db.put(b"%08d" % i, d.SerializeToString())
    return str(path)


def lenet_solver(db, prefix, max_iter=10, fmt="BINARYPROTO"):
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text('base_lr: 0.05 momentum: 0.9 lr_policy: "fixed" max_iter: %d display: 0 '
                        'snapshot: 4 snapshot_prefix: "%s" snapshot_format: %s random_seed: 7 '
                        'snapshot_after_train: false' % (max_iter, prefix, fmt), param)
    param.net_param.CopyFrom(proto_io.read_net(LENET % {"db": db}))
    return get_solver(param)


@pytest.mark.parametrize("fmt,ext", [("BINARYPROTO", ".solverstate"), ("HDF5", ".solverstate.h5")])
def test_snapshot_resume_equals_uninterrupted_lmdb(tmp_path, fmt, ext):
    if fmt == "HDF5":
        pytest.importorskip("h5py")
    db = make_lmdb(tmp_path / "db")
    full = lenet_solver(db, tmp_path / "full", fmt=fmt)
    full.solve()
    resumed = lenet_solver(db, tmp_path / "resumed", fmt=fmt)
    resumed.solve(str(tmp_path / ("full_iter_4" + ext)))     # 22 items, batch 4: mid-epoch
    assert resumed.iter == full.iter == 10
    for a, b in zip(full.net.learnable_params, resumed.net.learnable_params):
        assert a.data.tobytes() == b.data.tobytes()
    for s in (full, resumed):
        s.net.layers[0].close()
