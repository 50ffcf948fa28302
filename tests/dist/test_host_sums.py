"""Host-aware placement: hosts from MPI's shared-memory split (processor names label and cross-check),
one stub per host of a worker group, per-host gradient sums that equal the flat BSP sum and cross
hosts once per host and slice (in process, with a host per emulated rank)."""
import collections
import io
import json
import re

import numpy as np
import pytest

import nets
from conftest import reference
from caffepy import dist, log
from caffepy.dist import inproc, topology, transport as T
from caffepy.draw import render
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver


def test_split_decides_names_label_and_fallback():
    # the split groups ranks 0,1 and 2,3; the names label the nodes
    assert topology.host_labels(["n1", "n1", "n2", "n2"], [0, 0, 2, 2]) == (
        ["n1", "n1", "n2", "n2"], [])
    # containers all called localhost: two nodes told apart by their leader rank, with a note
    hosts, notes = topology.host_labels(["localhost"] * 4, [0, 0, 2, 2])
    assert hosts == ["localhost#0", "localhost#0", "localhost#2", "localhost#2"]
    assert len(notes) == 1 and "ranks 0, 1, 2, 3 sit on 2 different nodes" in notes[0]
    # one node under two names (short and full): one host, the leader's name, with a note
    hosts, notes = topology.host_labels(["a", "a.lan", "b", "b"], [0, 0, 2, 2])
    assert hosts == ["a", "a", "b", "b"]
    assert len(notes) == 1 and "ranks 0, 1 share memory" in notes[0] and "a, a.lan" in notes[0]
    # no MPI_Comm_split_type: the names alone
    assert topology.host_labels(["x", "y", "x"]) == (["x", "y", "x"], [])


def test_learn_hosts_falls_back_to_processor_names_without_the_split():
    """An MPI without MPI_Comm_split_type (a communicator lacking Split_type): the processor names
    decide, and rank 0 says so."""
    MPI = pytest.importorskip("mpi4py.MPI")

    class OldComm(object):          # one rank; Allgather as MPI's, on numpy buffers
        def Get_rank(self):
            return 0

        def Get_size(self):
            return 1

        def Allgather(self, send, recv):
            recv[0] = send
    stream = io.StringIO()
    log.setup(stream=stream)
    try:
        hosts = topology.learn_hosts(OldComm())
    finally:
        log.teardown()
    assert hosts == [MPI.Get_processor_name()]
    assert "Hosts from processor names (no MPI_Comm_split_type): %s (ranks 0)" % hosts[0] \
        in stream.getvalue()


def _cluster(**fields):
    fields.setdefault("sfb_mode", caffe_pb2.ClusterParameter.NEVER)   # every param dense
    return nets.cluster(**fields)


def test_one_stub_per_host_of_a_group():
    c = _cluster(nworker_groups=2, nworkers_per_group=3, nservers_per_group=2)
    t = topology.Topology(c, [10, 3])
    assert t.stubs() == [6, 7] and t.n_endpoints == 11     # no hosts: one stub per group
    t.set_hosts(["a", "a", "b", "b", "b", "b"])            # group 0 spans a and b, group 1 is on b
    C = t.coordinator
    assert C == 10 and t.n_endpoints == 12
    assert t.stubs_of_group(0) == [6, C + 1] and t.stubs_of_group(1) == [7]
    assert [t.workers_of_stub(s) for s in (6, C + 1, 7)] == [[0, 1], [2], [3, 4, 5]]
    assert [t.stub_of_worker(w) for w in range(6)] == [6, 6, C + 1, 7, 7, 7]
    assert [t.process_of(s) for s in (6, C + 1, 7)] == [0, 2, 3]
    assert [t.host_of(s) for s in (6, C + 1, 7)] == ["a", "b", "b"]
    assert t.describe(C + 1) == "stub 0.1" and t.describe(6) == "stub 0"
    assert t.group_of_stub(C + 1) == 0 and t.is_stub(C + 1) and not t.is_stub(C)
    assert [t.host_of(t.server(0, j)) for j in range(2)] == ["a", "b"]   # one server per host
    assert C + 1 in t.endpoints_of_process(2)


def _run(tmp_path, hosts, max_iter=12, **fields):
    G, K, B = 1, 4, 4
    x, y = nets.data(10 * G * B)
    solver = get_solver(nets.solver_param(B, max_iter), dtype=np.float64)
    c = _cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                 workspace=str(tmp_path / "ws"), **fields)
    stream = io.StringIO()
    log.setup(stream=stream)
    try:
        dist.train(solver, cluster=c, feeder=nets.feeder(x, y), hosts=hosts)
    finally:
        log.teardown()
    return solver, stream.getvalue()


@pytest.mark.parametrize("wait_free", [True, False])
def test_group_over_two_hosts_sums_per_host_equals_single_process(tmp_path, monkeypatch, wait_free):
    """A group of 4 workers, 2 on host a and 2 on b, 2 servers (one per host), every param cut in
    2 slices: the same weights as the single process (1e-6), and per step and slice exactly one
    GRAD and one PARAM cross the hosts (b's share to a's server and back, or a's to b's); no
    worker gradient and no param copy for a worker ever crosses."""
    monkeypatch.setattr(topology, "SLICE_MIN", 1)
    sent = []
    deliver = inproc.InprocEngine.deliver

    def counting(self, h, buffers):
        t = self.topology
        if h.kind in (T.GRAD, T.PARAM):
            sent.append((h.kind, h.src, h.dst, h.param, h.slice, h.step,
                         t.host_of(h.src) != t.host_of(h.dst)))
        deliver(self, h, buffers)
    monkeypatch.setattr(inproc.InprocEngine, "deliver", counting)
    max_iter = 12
    solver, text = _run(tmp_path, ["a", "a", "b", "b"], max_iter, wait_free=wait_free)
    for want, p in zip(reference(1, 4, 4, max_iter=max_iter), solver.net.learnable_params):
        np.testing.assert_allclose(p.data, want, rtol=0, atol=1e-6)
    t = topology.Topology(_cluster(nworkers_per_group=4, nservers_per_group=2), [1])
    t.set_hosts(["a", "a", "b", "b"])
    stubs, servers = set(t.stubs()), set(t.servers())
    crossing = [m for m in sent if m[-1]]
    assert crossing and all({m[1], m[2]} <= stubs | servers for m in crossing)
    n_slices = 2 * 4                    # both InnerProducts' weight and bias: 2 slices each
    per_step = collections.Counter((m[0], m[5]) for m in crossing if m[0] == T.GRAD)
    assert per_step == {(T.GRAD, s): n_slices for s in range(max_iter)}
    to_server = collections.defaultdict(list)       # GRAD (param, slice, step) -> source hosts
    for kind, src, dst, p, k, step, _ in sent:
        if kind == T.GRAD and dst in servers:
            to_server[(p, k, step)].append(t.host_of(src))
    assert len(to_server) == n_slices * max_iter
    assert all(sorted(v) == ["a", "b"] for v in to_server.values())     # one message per host
    # the answers: each slice's values go to one stub per host (the first answer is the INIT one)
    answers = collections.Counter(m[5] for m in crossing if m[0] == T.PARAM)
    assert sum(answers.values()) == n_slices * (max_iter + 1)
    assert "Per-host sums" in text
    assert re.search(r"group 0: stub 0 @a:0 sums workers 0,1; stub 0\.1 @b:2 sums workers 2,3", text)
    doc = json.loads((tmp_path / "ws" / "visualization" / "net.json").read_text())
    stubs = doc["cluster"]["worker_groups"][0]["stubs"]
    assert [(st["stub"], st["host"], st["rank"], st["workers"]) for st in stubs] == [
        ("stub 0", "a", 0, [0, 1]), ("stub 0.1", "b", 2, [2, 3])]
    assert "stub 0.1 @b:2 sums 2,3" in render.to_dot(doc)


def test_hosts_must_name_every_rank(tmp_path):
    with pytest.raises(CaffeError, match="hosts: 3 names for 4 ranks"):
        _run(tmp_path, ["a", "a", "b"], 2)


@pytest.mark.parametrize("consistency", ["SSP", "ASYNC"])
def test_groups_over_hosts_under_ssp_and_async(tmp_path, consistency):
    """Two groups, each with one worker on host a and one on b (two stubs each): several steps of
    a group may be in flight (SSP), a server gathers the hosts' shares per step; the bound holds."""
    x, y = nets.data(80)
    solver = get_solver(nets.solver_param(4, 12), dtype=np.float64)
    c = _cluster(nworker_groups=2, nworkers_per_group=2, nservers_per_group=2, staleness=1,
                 consistency=consistency, workspace=str(tmp_path / "ws"))
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y), hosts=["a", "b", "a", "b"])
    assert result.step == 12
    assert all(np.isfinite(p.data).all() for p in solver.net.learnable_params)
    if consistency == "SSP":
        assert result.max_staleness <= 1
