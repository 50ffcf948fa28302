"""Exact resume: data layers save where they stand (cursor, shuffle and transform random state) and
the solver its random generator, so a run resumed from a snapshot equals the uninterrupted one."""

import pytest

from caffepy import common
from caffepy.data import state as data_state
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver

pytest.importorskip("lmdb")
# the small LMDB-fed LeNet of the distributed exact-resume tests (one definition for both)
from tests.dist.lenet_lmdb import LENET, make_lmdb  # noqa: E402


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
