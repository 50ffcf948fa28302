"""Snapshots: Caffe's file formats, atomic writes, and resume == uninterrupted run, bit for bit."""
import os

import numpy as np
import pytest

from caffepy.errors import SolverError
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import state as state_io

from .helpers import batches, make_solver

XS, YS = batches(12, seed=5)


def _feeder(solver):
    """on_start callback: the batch is a function of the iteration (deterministic data)."""
    def on_start():
        solver.net.blobs["x"].data[...] = XS[solver.iter]
        solver.net.blobs["y"].data[...] = YS[solver.iter]
    return on_start


def _solver(kind, prefix, fmt, extra=""):
    s = make_solver('type: "%s" base_lr: 0.05 lr_policy: "multistep" gamma: 0.5 stepvalue: 3 '
                    'stepvalue: 7 max_iter: 10 snapshot: 4 snapshot_prefix: "%s" snapshot_format: %s '
                    'display: 0 weight_decay: 0.01 %s' % (kind, prefix, fmt, extra), dtype=np.float32)
    s.add_callback(_feeder(s), lambda: None)
    return s


def _weights(solver):
    return [b.data.copy() for b in solver.net.learnable_params]


@pytest.mark.parametrize("fmt", ["BINARYPROTO", "HDF5"])
@pytest.mark.parametrize("kind, extra", [("SGD", "momentum: 0.9"), ("Nesterov", "momentum: 0.9"),
                                         ("AdaGrad", ""), ("RMSProp", ""),
                                         ("AdaDelta", "momentum: 0.9"), ("Adam", "momentum: 0.9")])
def test_resume_is_bit_identical(kind, extra, fmt, tmp_path):
    full = _solver(kind, tmp_path / "full", fmt, extra)
    full.solve()
    assert full.iter == 10
    ext = ".solverstate.h5" if fmt == "HDF5" else ".solverstate"
    for it in (4, 8, 10):
        assert os.path.exists(str(tmp_path / ("full_iter_%d%s" % (it, ext))))
    resumed = _solver(kind, tmp_path / "resumed", fmt, extra)
    resumed.solve(str(tmp_path / ("full_iter_4" + ext)))
    assert resumed.iter == 10 and resumed.current_step == full.current_step == 2
    for a, b in zip(_weights(full), _weights(resumed)):
        assert np.array_equal(a, b)
    for a, b in zip(full.history, resumed.history):
        assert np.array_equal(a, b)


def test_solverstate_is_caffes_message(tmp_path):
    s = _solver("Adam", tmp_path / "adam", "BINARYPROTO", "momentum: 0.9")
    s.step(4)
    state = caffe_pb2.SolverState()
    proto_io.read_binary(str(tmp_path / "adam_iter_4.solverstate"), state)
    assert state.iter == 4 and state.current_step == 1
    assert state.learned_net == str(tmp_path / "adam_iter_4.caffemodel")
    assert len(state.history) == 2 * len(s.net.learnable_params)
    for bp, p in zip(state.history, s.net.learnable_params * 2):
        assert tuple(bp.shape.dim) == p.shape and len(bp.data) == p.count
    np.testing.assert_array_equal(np.asarray(state.history[0].data).reshape(s.history[0].shape),
                                  s.history[0])
    model = caffe_pb2.NetParameter()
    proto_io.read_binary(state.learned_net, model)
    assert [lp.name for lp in model.layer if lp.blobs] == ["ip"]


def test_snapshot_diff_and_filenames(tmp_path):
    s = _solver("SGD", tmp_path / "d", "BINARYPROTO", "snapshot_diff: true")
    s.step(4)
    model = caffe_pb2.NetParameter()
    proto_io.read_binary(str(tmp_path / "d_iter_4.caffemodel"), model)
    ip = [lp for lp in model.layer if lp.name == "ip"][0]
    assert len(ip.blobs[0].diff) == ip.blobs[0].shape.dim[0] * ip.blobs[0].shape.dim[1]


def test_snapshot_is_atomic(tmp_path, monkeypatch):
    s = _solver("SGD", tmp_path / "a", "BINARYPROTO", "momentum: 0.9")
    s.step(4)
    good = (tmp_path / "a_iter_4.solverstate").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["a_iter_4.caffemodel", "a_iter_4.solverstate"]

    def crash(fd):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError):
        s.snapshot()  # same iteration: would overwrite a_iter_4.*
    monkeypatch.undo()
    assert (tmp_path / "a_iter_4.solverstate").read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == ["a_iter_4.caffemodel", "a_iter_4.solverstate"]


def test_restore_errors(tmp_path):
    sgd = _solver("SGD", tmp_path / "s", "BINARYPROTO")
    sgd.step(4)
    adam = _solver("Adam", tmp_path / "t", "BINARYPROTO", "momentum: 0.9")
    with pytest.raises(SolverError, match="Incorrect length of history blobs"):
        adam.restore(str(tmp_path / "s_iter_4.solverstate"))
    with pytest.raises(SolverError, match="no such solver state file"):
        adam.restore(str(tmp_path / "missing.solverstate"))


def test_learned_net_found_beside_state(tmp_path, monkeypatch):
    s = _solver("SGD", "moved", "BINARYPROTO")
    monkeypatch.chdir(tmp_path)
    s.step(4)
    os.mkdir("elsewhere")
    for f in ("moved_iter_4.caffemodel", "moved_iter_4.solverstate"):
        os.rename(f, os.path.join("elsewhere", f))
    r = _solver("SGD", "other", "BINARYPROTO")
    r.restore(os.path.join("elsewhere", "moved_iter_4.solverstate"))
    assert r.iter == 4
    for a, b in zip(_weights(s), _weights(r)):
        assert np.array_equal(a, b)
    assert state_io.read_state(os.path.join("elsewhere", "moved_iter_4.solverstate"))[0] == 4


def test_hdf5_writers_are_atomic_and_fail_in_one_line(tmp_path, monkeypatch):
    """HDF5 weights and solver states go through a temporary file that is fsynced and renamed;
    a write that fails leaves the previous file and no temporary file, with one WriteError."""
    pytest.importorskip("h5py")
    import os
    from caffepy.errors import WriteError
    from caffepy.proto import atomic
    path = tmp_path / "w.h5"
    path.write_bytes(b"previous")
    fsynced = []
    real_fsync = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd)))
    with atomic.atomic_path(path, suffix=".h5") as tmp:
        with open(tmp, "wb") as f:
            f.write(b"new")
    assert path.read_bytes() == b"new" and len(fsynced) >= 1
    with pytest.raises(WriteError, match=r"cannot write .*w\.h5: no space left on device"):
        with atomic.atomic_path(path, suffix=".h5") as tmp:
            raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["w.h5"]
