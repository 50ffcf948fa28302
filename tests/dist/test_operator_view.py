"""The operator's view: route table, per-group progress lines, rank logs, plot and draw of a run."""
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import nets
from conftest import ROOT, needs_mpi
from caffepy import cli, dist, log
from caffepy import log as launcher
from caffepy.draw import render
from caffepy.solvers import get_solver

G, K, B = 2, 1, 4


def _run_logged(tmp_path, path):
    x, y = nets.data(10 * G * B)
    param = nets.solver_param(B, 10, "SGD")
    param.display = 4
    solver = get_solver(param, dtype=np.float64)
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(tmp_path / "ws"))
    log.setup(stream=io.StringIO(), logfile=str(path))
    try:
        dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    finally:
        log.teardown()
    return path.read_text()


def test_route_table_progress_plot_and_draw(tmp_path, monkeypatch):
    from caffepy.dist import topology
    monkeypatch.setattr(topology, "SLICE_MIN", 1)     # cut even these small params: two shards
    text = _run_logged(tmp_path, tmp_path / "train.log")
    assert "Parameter routes (2 worker groups x 1, 1 server groups x 2 shards):" in text
    for name in ("ip1:0", "ip1:1", "ip2:0", "ip2:1"):
        assert re.search(r"\] +%s +\d+  (dense|sfb  |table)" % re.escape(name), text), name
    assert re.search(r"ip2:0 +21  dense  \d \[0:\d+\) @[^:]+:0, \d \[\d+:21\) @", text)
    lines = re.findall(r"Iteration (\d+) \(group (\d) of 2\): loss = \S+, lr = (\S+), \S+ steps/s, "
                       r"ETA \d+:\d\d:\d\d", text)
    assert sorted((int(i), int(g)) for i, g, _ in lines) == [(i, g) for i in (0, 4, 8) for g in (0, 1)]
    assert {float(lr) for _, _, lr in lines} == {0.1, 0.05}    # step policy: gamma 0.5 at step 7
    doc = json.loads((tmp_path / "ws" / "visualization" / "net.json").read_text())
    cluster = doc["cluster"]
    assert [g["group"] for g in cluster["worker_groups"]] == [0, 1]
    assert sorted(s["shard"] for s in cluster["servers"]) == [0, 1]
    dot = render.to_dot(doc)
    for label in ("worker group 0", "worker group 1", "server 0: shard", "server 1: shard", "push / pull"):
        assert label in dot, label
    pytest.importorskip("matplotlib")
    out = tmp_path / "curves.png"
    assert cli.main(["plot", str(tmp_path / "train.log"), "-o", str(out)]) == 0
    assert out.stat().st_size > 1000


def test_rank_log_path(monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    assert launcher.rank_log_path("t.log") == "t.log" and launcher.is_lead_rank()
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    assert launcher.rank_log_path("t.log") == "t.log.rank1" and not launcher.is_lead_rank()


@needs_mpi
@pytest.mark.slow
def test_mpi_rank_logs_params_once(tmp_path):
    """mpiexec -n 2 caffepy train --log L: L.rank0 and L.rank1; solver parameters only in rank 0's."""
    (tmp_path / "net.prototxt").write_text(nets.DUMMY)
    (tmp_path / "solver.prototxt").write_text(
        'net: "%s" base_lr: 0.1 lr_policy: "fixed" max_iter: 4 display: 2 snapshot_after_train: false\n'
        % (tmp_path / "net.prototxt"))
    (tmp_path / "cluster.prototxt").write_text('nworker_groups: 2 workspace: "%s/"\n' % (tmp_path / "ws"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    logpath = str(tmp_path / "train.log")
    p = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-m", "caffepy", "train",
                        "--solver", str(tmp_path / "solver.prototxt"),
                        "--cluster", str(tmp_path / "cluster.prototxt"), "--log", logpath],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    r0, r1 = (open(logpath + ".rank%d" % r).read() for r in (0, 1))
    assert "Initializing solver from parameters" in r0 and "Initializing solver" not in r1
    assert "Parameter routes" in r0
    assert "(group 0 of 2)" in r0 and "(group 1 of 2)" in r1
    assert not os.path.exists(logpath)
