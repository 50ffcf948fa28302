"""The behaviours of pycaffe's test_solver.py."""
import os

import numpy as np
import pytest

import caffepy as caffe
from tests.pycaffe.nets import simple_net_text, write

NUM_OUTPUT = 13


@pytest.fixture
def solver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net_file = write(tmp_path, "net.prototxt", simple_net_text(NUM_OUTPUT))
    solver_file = write(tmp_path, "solver.prototxt", (
        "net: '%s' test_iter: 10 test_interval: 10 base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 "
        "lr_policy: 'inv' gamma: 0.0001 power: 0.75 display: 100 max_iter: 100 "
        "snapshot_after_train: false snapshot_prefix: 'model'" % net_file))
    s = caffe.SGDSolver(solver_file)
    caffe.get_solver(solver_file)
    caffe.get_solver_from_file(solver_file)
    caffe.set_mode_cpu()
    for net in [s.net] + list(s.test_nets):
        net.blobs["label"].data[...] = np.random.randint(NUM_OUTPUT, size=net.blobs["label"].data.shape)
    return s


def test_solve(solver):
    assert solver.iter == 0
    solver.solve(None)
    assert solver.iter == 100


def test_step(solver):
    solver.step(3)
    assert solver.iter == 3


def test_apply_update(solver):
    net = solver.net
    data = net.layers[1].blobs[0].data
    data[...] = 0
    net.layers[1].blobs[0].diff[...] = 1
    solver.apply_update()
    assert np.abs(data - -0.01).max() < 1e-7


def test_nets_outlive_the_solver(solver):
    nets = [solver.net] + list(solver.test_nets)
    assert len(nets) == 2
    del solver
    total = sum(float(p.data.sum() + p.diff.sum()) for net in nets for ps in net.params.values() for p in ps)
    total += sum(float(b.data.sum() + b.diff.sum()) for net in nets for b in net.blobs.values())
    assert np.isfinite(total)


def test_snapshot(solver):
    solver.snapshot()
    for fn in ("model_iter_0.caffemodel", "model_iter_0.solverstate"):
        assert os.path.isfile(fn)


def test_test_nets_share_train_weights(solver):
    solver.step(1)
    a = solver.net.params["ip"][0].data
    b = solver.test_nets[0].params["ip"][0].data
    assert np.array_equal(a, b)
