"""ASYNC and SSP: the staleness bound holds (instrumented at servers and workers); clocks unit-tested."""
import time
import types

import numpy as np
import pytest

import nets
from caffepy import dist
from caffepy.dist.consistency import SliceClock
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver


def test_slice_clock_ssp_releases_in_order():
    c = SliceClock("SSP", [0, 1], staleness=1)
    g = np.ones(2)
    assert c.on_gradient(0, 0, g)[1] == [0]          # clock 1 vs slowest 0: within 1
    assert c.on_gradient(0, 1, g)[1] == []           # clock 2 vs 0: held back
    assert sorted(c.on_gradient(1, 0, g)[1]) == [0, 1]  # slowest moves: both answered
    assert c.max_staleness <= 1


def test_slice_clock_bsp_averages_once():
    c = SliceClock("BSP", [0, 1], staleness=0)
    assert c.on_gradient(0, 0, np.array([1.0]))[0] is None
    grad, answer = c.on_gradient(1, 0, np.array([3.0]))
    assert grad[0] == 2.0 and answer == [0, 1]


def _uneven_feeder(x, y, slow_group, delay=0.01):
    """The test hook: worker ``slow_group`` (one worker per group) sleeps ``delay`` s in its data
    layer's forward, every step, whichever worker class (plain or wait-free) runs the net."""
    def feed(w, nworkers, net):
        nets.feeder(x, y)(w, nworkers, net)
        if w == slow_group:
            data = net.layers[0]
            forward = data.forward
            data.forward = lambda bottom, top: (time.sleep(delay), forward(bottom, top))[1]
    return feed


@pytest.mark.parametrize("mode,staleness", [("SSP", 2), ("SSP", 0), ("ASYNC", 0)])
def test_staleness_bound_never_exceeded(tmp_path, mode, staleness):
    x, y = nets.data(160)
    solver = get_solver(nets.solver_param(4, 40), dtype=np.float64)
    c = nets.cluster(nworker_groups=4, nservers_per_group=2, consistency=mode, staleness=staleness,
                     workspace=str(tmp_path))
    result = dist.train(solver, cluster=c, feeder=_uneven_feeder(x, y, 3))
    assert result.step == 40
    if mode == "SSP":
        # the fast groups compute on their caches up to the bound, never beyond it
        assert result.max_staleness == staleness
        assert max(int(r["stale"]) for w, r in result.reports.items() if w != 3) == staleness
    else:
        assert result.max_staleness > 2      # the slow group lags: ASYNC lets it


@pytest.mark.parametrize("mode,staleness", [("ASYNC", 0), ("SSP", 1)])
def test_download_holds_every_update(tmp_path, mode, staleness):
    """The final download happens after every group's last gradient was applied: each dense slice
    of server group 0 has taken exactly groups x steps updates (ASYNC / SSP apply each on arrival)."""
    x, y = nets.data(160)
    solver = get_solver(nets.solver_param(4, 30), dtype=np.float64)
    c = nets.cluster(nworker_groups=4, nservers_per_group=2, consistency=mode, staleness=staleness,
                     workspace=str(tmp_path))
    result = dist.train(solver, cluster=c, feeder=_uneven_feeder(x, y, 1))
    assert result.param_versions
    n_params = len(solver.net.learnable_params)
    assert {p for p, _ in result.param_versions} == set(range(n_params))
    assert set(result.param_versions.values()) == {4 * 30}


def test_barrier_keeps_a_peers_early_message_for_the_next_step():
    """A peer that got its GO first may send next-step messages (SFB factors, table rows) before
    this worker's GO arrives: the barrier keeps them for the step instead of failing."""
    from caffepy.dist import transport as T
    from caffepy.dist.worker import Worker
    early = T.header(43, param=2, step=10, src=5)
    inbox = [(early, ["factors"]), (T.header(T.GO), [])]

    class Endpoint(object):
        id = 1
        sent = []

        def send(self, dst, h, bufs=()):
            self.sent.append(h.kind)

        def recv(self, timeout=None, what=""):
            return inbox.pop(0)
    w = Worker.__new__(Worker)
    w.ep, w.param = Endpoint(), caffe_pb2.SolverParameter()
    w.topo = type("Topo", (), {"coordinator": 0})()
    w.t_compute = w.t_wait = 0.0
    w.steps = w.max_staleness = 0
    handled = []
    w.routes = {43: lambda h, bufs: handled.append((h.step, bufs))}
    w.early = []
    w.barrier(10, final=False)
    assert Endpoint.sent == [T.READY] and not handled
    w.take_message(10)                          # the step's receive loop handles it, in order
    assert handled == [(10, ["factors"])] and not w.early


def _steps_per_second(tmp_path, mode, staleness, wait_free, steps=60, delay=0.005):
    x, y = nets.data(160)
    solver = get_solver(nets.solver_param(4, steps), dtype=np.float64)
    c = nets.cluster(nworker_groups=4, nservers_per_group=2, consistency=mode, staleness=staleness,
                     workspace=str(tmp_path / mode), wait_free=wait_free)
    result = dist.train(solver, cluster=c, feeder=_uneven_feeder(x, y, 3, delay=delay))
    assert result.step == steps and result.max_staleness <= staleness
    return 4 * steps / result.seconds, result


def test_ssp_outpaces_bsp_with_a_slowed_group(tmp_path):
    """Group 3 sleeps 20 ms a step. BSP: every step every group waits for it and then for the
    round trip through stub and servers. SSP (staleness 3): the slowed group does not wait (it is
    the slowest: its cache needs only its own update of 3 steps back, long arrived) and the others
    run ahead on their caches. The sleep dominates so that the comparison holds on a loaded box."""
    bsp, _ = _steps_per_second(tmp_path, "BSP", 0, False, 30, 0.02)
    ssp, result = _steps_per_second(tmp_path, "SSP", 3, False, 30, 0.02)
    waited = {w: float(r["wait"]) for w, r in result.reports.items()}
    assert waited[3] < 0.2 * min(waited[w] for w in (0, 1, 2))
    assert ssp > bsp, "SSP %.0f steps/s, BSP %.0f" % (ssp, bsp)


def test_ssp_wait_free_keeps_the_bound(tmp_path):
    """Wait-free workers under SSP wait layer by layer for cached params within the bound only."""
    _, result = _steps_per_second(tmp_path, "SSP", 1, True)
    assert result.max_staleness == 1
    assert set(result.param_versions.values()) == {4 * 60}


def test_stub_versions_count_rounds_per_slice():
    """Answers of two rounds in flight, interleaved across servers: a param's version is complete
    only when every slice has had the round (per-slice counts, not a total)."""
    from caffepy.dist import transport as T
    from caffepy.dist.stub import Stub

    class Endpoint(object):
        id = 2

        def __init__(self):
            self.sent = []

        def send(self, dst, h, bufs=()):
            self.sent.append((h.flag, h.version))

    class Topo(object):
        slices = [[(0, 2, 0), (2, 2, 1)]]
        K = 1

        def workers_of_stub(self, ep):
            return [0]

        def server_group_of(self, g):
            return 0
    stub = Stub(Endpoint(), Topo(), 0)
    for k, rnd in [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1), (1, 2)]:
        stub._on_param(T.header(T.PARAM, param=0, slice=k, version=rnd, step=rnd), [np.zeros(2)])
    assert stub.ep.sent == [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1), (1, 2)]


def test_wait_fresh_blocks_outside_the_bound_and_before_the_first_values():
    """Worker.wait_fresh takes messages only while the cache is staler than c - staleness, and a
    cache that never had values (clock -1) is never fresh, whatever the bound."""
    from caffepy.dist import transport as T
    from caffepy.dist.worker import Worker

    class Endpoint(object):
        id = 0

        def __init__(self, inbox):
            self.inbox = list(inbox)

        def probe(self):
            return False

        def recv(self, timeout=None, what=""):
            return self.inbox.pop(0)
    w = Worker.__new__(Worker)
    w.ssp, w.bound, w.start, w.max_staleness, w.routes, w.early = True, 2, 0, 0, {}, []
    w.timeout, w.g = 1.0, 0
    w.flat = [np.zeros(4)]
    w.blobs = [types.SimpleNamespace(data=w.flat[0])]       # what a blob's data getter gives
    w.slice_clock = [[-1, -1]]
    w.version = [-1]
    w.param = caffe_pb2.SolverParameter(max_iter=10)
    first = [(T.header(T.PARAM, param=0, slice=k, offset=2 * k, step=0, version=0, flag=k),
              [np.full(2, 1.0)]) for k in (0, 1)]
    w.ep = Endpoint(first)
    w.wait_fresh(0)                              # bound 2 would allow clock -2: values needed
    assert not w.ep.inbox and w.slice_clock == [[0, 0]] and w.flat[0].tolist() == [1.0] * 4
    w.ep = Endpoint([])
    w.wait_fresh(2)                              # clock 0 is within 2 of step 2: no wait
    assert w.max_staleness == 2
    w.ep = Endpoint([(T.header(T.PARAM, param=0, slice=1, offset=2, step=1), [np.zeros(2)]),
                     (T.header(T.PARAM, param=0, slice=0, offset=0, step=1), [np.zeros(2)])])
    w.wait_fresh(3)                              # needs clock 1 on both slices
    assert not w.ep.inbox and w.slice_clock == [[1, 1]] and w.max_staleness == 2
