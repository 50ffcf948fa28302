"""Checkpoints: schedule, files and manifest, bit-identical BSP resume, reuse by name, kill -9 under MPI."""
import json
import os
import re
import signal
import time

import numpy as np
import pytest

import nets
from conftest import is_rank_process, mpiexec, needs_mpi
from caffepy import dist
from caffepy.dist import checkpoint
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.proto.io import read_net
from caffepy.solvers import get_solver

G, K, B = 2, 2, 4


def _run(workspace, max_iter, resume=False, freq=5, solver_type="SGD"):
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, max_iter, solver_type, "checkpoint_frequency: %d" % freq),
                        dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(workspace))

    def feed(w, n, net):
        nets.feeder(x, y)(w, n, net)
        net.layers[0].pos = solver.iter * net.layers[0].batch_size % net.layers[0].n
    result = dist.train(solver, cluster=c, resume=resume, feeder=feed)
    return solver, result


def test_schedule():
    p = caffe_pb2.SolverParameter(checkpoint_after=10, checkpoint_frequency=5)
    assert [s for s in range(30) if checkpoint.is_checkpoint_step(s, p)] == [10, 15, 20, 25]
    assert not checkpoint.is_checkpoint_step(10, caffe_pb2.SolverParameter())


def test_files_manifest_and_net_json(tmp_path):
    _run(tmp_path, 10)
    d = tmp_path / "checkpoint"
    names = sorted(os.listdir(d))
    assert "step5.manifest" in names and "step10.manifest" in names
    assert {"step5-worker0.bin", "step5-worker1.bin", "step5-server0.bin", "step5-server1.bin"} <= set(names)
    step, manifest = checkpoint.latest_complete(str(tmp_path))
    assert step == 10 and len(manifest.file) == G * K + 2   # every worker saves its data state
    os.remove(d / "step10-server1.bin")            # an incomplete step does not count
    assert checkpoint.latest_complete(str(tmp_path))[0] == 5
    doc = json.loads((tmp_path / "visualization" / "net.json").read_text())
    assert doc["schema"] == "caffepy.netjson"
    placed = [n for n in doc["nodes"] if n.get("server_shard") is not None or
              n.get("worker_group") is not None]
    assert placed, "net.json of a distributed run shows no partition"


def test_resume_is_bit_identical(tmp_path):
    full, _ = _run(tmp_path / "a", 20, solver_type="Adam")
    _run(tmp_path / "b", 10, solver_type="Adam")
    resumed, result = _run(tmp_path / "b", 20, resume=True, solver_type="Adam")
    assert result.step == 20
    for a, b in zip(full.net.learnable_params, resumed.net.learnable_params):
        assert np.array_equal(a.data, b.data)


def test_init_other_net_by_name(tmp_path):
    _run(tmp_path, 5)
    renamed = nets.MLP.replace('name: "ip2"', 'name: "ip2x"') % {"batch": 2}
    report = dist.init_net(Net(read_net(renamed), dtype=np.float64), str(tmp_path))
    assert report["matched"] == ["ip1:0", "ip1:1"]
    assert report["missing"] == ["ip2x:0", "ip2x:1"]
    wider = nets.MLP.replace("num_output: 3", "num_output: 4") % {"batch": 2}
    net = Net(read_net(wider), dtype=np.float64)
    report = dist.init_net(net, str(tmp_path))
    assert [m[0] for m in report["mismatched"]] == ["ip2:0", "ip2:1"]
    ck = checkpoint.full_params(str(tmp_path), checkpoint.latest_complete(str(tmp_path))[1],
                                np.float64, "worker")
    assert np.array_equal(net.learnable_params[0].data.ravel(), ck["ip1:0"][0])


@needs_mpi
@pytest.mark.parametrize("role,nprocs,victim,extra", [("worker", 4, 3, []),
                                                      ("server", 6, 5, ["--separate"])])
@pytest.mark.slow
def test_kill_stops_job_then_resume_finishes(tmp_path, role, nprocs, victim, extra):
    """kill -9 of a worker's process, or of a server's own process (server_worker_separate)."""
    ws = str(tmp_path / "ws")
    args = ["--workspace", ws, "--max_iter", "400", "--checkpoint_frequency", "10", "--sleep", "0.02"]
    proc = mpiexec(nprocs, args + extra, wait=False)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(ws, "checkpoint", "step20.manifest")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    os.kill(_pid_of_rank(proc.pid, victim), signal.SIGKILL)
    t0 = time.time()
    out, err = proc.communicate(timeout=60)
    assert time.time() - t0 < 30          # stops within seconds (generous: CI machines may be loaded)
    assert proc.returncode != 0
    # the killed rank is named; under heavy load a rank mpiexec tears down right after may be named too
    assert re.search(r"rank \d+ \(%s" % role, err) and "last complete checkpoint: step" in err, err[-2000:]
    step = checkpoint.latest_complete(ws)[0]
    assert step >= 20
    done = mpiexec(nprocs, args[:3] + ["400", "--checkpoint_frequency", "100", "--resume"] + extra)
    assert done.returncode == 0, done.err[-2000:]
    assert "RESULT step=400" in done.out


def _parent(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _descends_from(pid, ancestor):
    for _ in range(64):
        pid = _parent(pid)
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def _pid_of_rank(mpiexec_pid, rank):
    """The pid of the python process with PMI_RANK=rank started under this mpiexec (not another
    session's: the machine may be shared)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        for pid in os.listdir("/proc"):
            if pid.isdigit() and _descends_from(pid, mpiexec_pid) and is_rank_process(pid, rank):
                return int(pid)
        time.sleep(0.2)
    raise AssertionError("no rank %d process found" % rank)
