"""Wait-free backprop: the layer/param map, the sender thread, and wait-free on/off giving the
single-process weights after 20 BSP steps on caffepy.dist's trainer (float64, 1e-6); on one core
the pushes are inline and the worker marks its compute and drives progress (engine hooks)."""
import threading
import time

import numpy as np
import pytest

import nets
from conftest import reference
from caffepy import dist
from caffepy.dist import waitfree
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver

SHARED = """name: "shared"
layer { name: "data" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "a" type: "InnerProduct" bottom: "x" top: "a" param { name: "w" }
        inner_product_param { num_output: 3 bias_term: false } }
layer { name: "frozen" type: "InnerProduct" bottom: "a" top: "f" param { lr_mult: 0 }
        inner_product_param { num_output: 3 bias_term: false } }
layer { name: "b" type: "InnerProduct" bottom: "f" top: "b" param { name: "w" }
        inner_product_param { num_output: 3 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "b" bottom: "x" top: "loss" }
"""


def test_layer_params_map():
    net = Net(proto_io.read_net(SHARED), phase=caffe_pb2.TRAIN)
    lp = waitfree.LayerParams(net)
    names = net._layer_names
    reads = {names[i]: r for i, r in enumerate(lp.reads) if r}
    assert reads == {"a": [0], "frozen": [1], "b": [0, 2]}
    after = {names[i]: r for i, r in enumerate(lp.ready_after) if r}
    # the shared weight is complete only after layer a (its first user) ran backward
    assert after == {"a": [0], "b": [2]}
    assert lp.leftover == [1] and lp.n_params == 3


def test_sender_sends_in_order_on_its_own_thread():
    seen = []
    sender = waitfree.GradientSender(lambda item: (time.sleep(0.01), seen.append(
        (item, threading.current_thread().name))))
    for p in range(5):
        sender.put(p)
    sender.flush()
    assert [p for p, _ in seen] == list(range(5))
    assert all(name == "gradient-sender" for _, name in seen)
    sender.close()


def test_sender_hands_errors_to_the_worker():
    sender = waitfree.GradientSender(lambda item: 1 / 0)
    sender.put(1)
    with pytest.raises(ZeroDivisionError):
        sender.flush()
    sender.close()


def test_options():
    assert waitfree.options().wait_free
    assert not waitfree.options(comm=waitfree.CommOptions(wait_free=False)).wait_free
    assert waitfree.options(nets.cluster()).wait_free       # wait_free unset: the default (true)
    assert waitfree.worker_class(waitfree.CommOptions(False)) is dist.worker.Worker


G, K, B = 2, 2, 4


def _train(workspace, wait_free, solver_type="SGD", iter_size=1, **cluster):
    x, y = nets.data(10 * G * B * iter_size)
    param = nets.solver_param(B, 20, solver_type, extra="iter_size: %d" % iter_size)
    solver = get_solver(param, dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(workspace), **cluster)
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y),
                        comm=waitfree.CommOptions(wait_free=wait_free))
    return solver, result


@pytest.mark.parametrize("solver_type", ["SGD", "Adam"])
def test_wait_free_on_off_match_single_process(tmp_path, solver_type):
    want = reference(G, K, B, solver_type=solver_type)
    for wait_free in (True, False):
        solver, result = _train(tmp_path / str(wait_free), wait_free, solver_type)
        assert result.step == 20
        for w, p in zip(want, solver.net.learnable_params):
            np.testing.assert_allclose(p.data, w, rtol=0, atol=1e-6)


def test_wait_free_iter_size_and_checkpoints(tmp_path):
    on, _ = _train(tmp_path / "on", True, iter_size=2)
    off, _ = _train(tmp_path / "off", False, iter_size=2)
    for a, b in zip(on.net.learnable_params, off.net.learnable_params):
        np.testing.assert_allclose(a.data, b.data, rtol=0, atol=1e-6)
    solver, result = _train(tmp_path / "ckpt", True)
    assert result.step == 20
    # a checkpoint barrier mid-run waits for every param, then training goes on identically
    param = nets.solver_param(B, 20, extra="checkpoint_frequency: 5")
    x, y = nets.data(10 * G * B)
    s2 = get_solver(param, dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(tmp_path / "ckpt2"))
    dist.train(s2, cluster=c, feeder=nets.feeder(x, y), comm=waitfree.CommOptions(True))
    for a, b in zip(solver.net.learnable_params, s2.net.learnable_params):
        np.testing.assert_allclose(a.data, b.data, rtol=0, atol=1e-6)


def test_one_core_pushes_inline_and_worker_drives_progress(tmp_path, monkeypatch):
    """Where the process has one core every wait-free push is the worker thread's own (SFB factors
    too: the sender thread gets none); each worker tells the engine when it computes, never while
    it waits for a message, and makes a progress round per forward layer and per backward layer;
    the weights still equal the single process (1e-6)."""
    from caffepy.dist import transport as T, worker as worker_mod
    monkeypatch.setattr(waitfree, "_cores", lambda: 1)
    queued = []
    monkeypatch.setattr(waitfree.GradientSender, "put", lambda self, item: queued.append(item))
    lock, marked, calls = threading.Lock(), {}, {"on": 0, "off": 0, "progress": 0}

    def computing(self, who, on):
        with lock:
            assert marked.get(who, False) != on, "worker %d marked %s twice" % (who, on)
            marked[who] = on
            calls["on" if on else "off"] += 1

    def progress(self):
        with lock:
            calls["progress"] += 1
    take = worker_mod.Worker.take_message

    def take_checked(self, clock):
        assert not marked.get(self.ep.id), "worker %d waited while marked computing" % self.ep.id
        return take(self, clock)
    monkeypatch.setattr(T.Engine, "computing", computing)
    monkeypatch.setattr(T.Engine, "progress", progress)
    monkeypatch.setattr(worker_mod.Worker, "take_message", take_checked)
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, 20), dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(tmp_path))
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y),
                        comm=waitfree.CommOptions(wait_free=True, sfb_mode="ALWAYS"))
    assert result.step == 20 and not queued
    assert calls["on"] == calls["off"] >= G * K * 20 and not any(marked.values())
    # a round after every forward layer (and after each backward layer that runs)
    assert calls["progress"] >= G * K * 20 * len(solver.net.layers)
    for w, p in zip(reference(G, K, B), solver.net.learnable_params):
        np.testing.assert_allclose(p.data, w, rtol=0, atol=1e-6)
