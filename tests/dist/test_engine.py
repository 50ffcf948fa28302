"""The MPI engine's framing: empty, small (one bucket), big (alone) and mixed buffers of several
dtypes arrive intact and in order, one rank to another and back."""
import os
import subprocess
import sys
import types

import pytest

from conftest import HERE, ROOT, needs_mpi
from caffepy.dist import transport as T
from caffepy.errors import CaffeError


def test_kind_registry_refuses_a_second_meaning():
    assert T.register_kind("GRAD", T.GRAD) == T.GRAD          # the same entry again is fine
    with pytest.raises(CaffeError, match="clashes"):
        T.register_kind("OTHER", T.GRAD)
    with pytest.raises(CaffeError, match="clashes"):
        T.register_kind("GRAD", 999)
    assert T.KIND_NAMES[T.GRAD] == "GRAD" and 999 not in T.KIND_NAMES


@pytest.mark.slow
@needs_mpi
def test_engine_round_trips_every_framing():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(["mpiexec", "-n", "2", sys.executable, os.path.join(HERE, "engine_run.py")],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ENGINE OK" in p.stdout


class _Topo(object):
    W, K = 2, 2

    def worker(self, g, k):
        return g * self.K + k

    def describe(self, ep):
        return "endpoint %d" % ep


def _worker(ssp, ep_id):
    """A Worker with only what receive_in_place / param_target / take_message read."""
    import numpy as np
    from caffepy.dist.worker import Worker
    engine = T.Engine(_Topo(), [0, 1, 2])          # workers 0, 1 and the stub (2) of group 0
    w = Worker.__new__(Worker)
    w.ep, w.topo, w.g, w.stub, w.ssp = engine.endpoint(ep_id), _Topo(), 0, 2, ssp
    w.flat = [np.zeros(6), np.zeros(3, np.float32)]
    w.blobs = [types.SimpleNamespace(data=f) for f in w.flat]     # what a blob's data getter gives
    w.slice_clock, w.version, w.routes, w.early, w.max_staleness = [[-1, -1], [-1]], [-1, -1], {}, [], 0
    w.timeout = 1.0
    return w, engine


def test_worker_names_its_weights_as_the_receive_target():
    import numpy as np
    w, engine = _worker(False, 0)
    w.receive_in_place(True)
    assert engine.targets == {0: w.param_target, 2: w.param_target}     # its own and its stub's
    view = w.param_target(T.header(T.PARAM, param=0, offset=2), np.dtype(np.float64), 3)
    assert np.shares_memory(view, w.flat[0]) and view.size == 3
    view[...] = 7.0                           # what the engine's receive writes in place
    assert w.flat[0].tolist() == [0, 0, 7, 7, 7, 0]
    for h, dt, n in [(T.header(T.GRAD, param=0), np.float64, 3),       # not a PARAM
                     (T.header(T.PARAM, param=1), np.float64, 3),      # dtype differs
                     (T.header(T.PARAM, param=0, offset=4), np.float64, 3),   # past the end
                     (T.header(T.PARAM, param=5), np.float64, 1)]:     # no such param
        assert w.param_target(h, np.dtype(dt), n) is None
    # take_message: a buffer received in place is not copied again; another one is written
    w.early = [(T.header(T.PARAM, param=0, slice=1, offset=2, step=1, flag=1, version=1), [view]),
               (T.header(T.PARAM, param=0, slice=0, offset=0, step=1), [np.array([1.0, 2.0])])]
    w.take_message(1)
    w.take_message(1)
    assert w.flat[0].tolist() == [1, 2, 7, 7, 7, 0] and w.version[0] == 1
    w.receive_in_place(False)
    assert engine.targets == {}
    other, engine = _worker(False, 1)           # not the stub's worker: only its own endpoint
    other.receive_in_place(True)
    assert list(engine.targets) == [1]
    ssp, engine = _worker(True, 0)              # SSP computes while answers arrive: none
    ssp.receive_in_place(True)
    assert engine.targets == {}


def test_inbox_hands_over_in_order_and_times_out():
    import queue
    import threading
    box = T.Inbox()
    assert box.empty()
    with pytest.raises(queue.Empty):
        box.get(timeout=0.01)
    threading.Timer(0.05, lambda: [box.put(i) for i in range(3)]).start()
    assert [box.get(timeout=5) for _ in range(3)] == [0, 1, 2] and box.empty()


def test_stub_of_one_worker_sends_its_diff_without_a_copy_and_sums_several_in_order():
    import numpy as np
    from caffepy.dist.stub import Stub

    class Endpoint(object):
        id = 3

        def __init__(self):
            self.sent = []

        def send(self, dst, h, bufs=()):
            self.sent.append((dst, h.slice, h.offset, bufs[0]))

    class Topo(object):
        W = 3
        slices = [[(0, 2, 0), (2, 2, 1)]]

        def __init__(self, workers):
            self.workers = workers
            self.K = len(workers)           # the group sits on one host: its stub sums all K

        def workers_of_group(self, g):
            return self.workers

        def workers_of_stub(self, ep):
            return self.workers

        def server_group_of(self, g):
            return 0

        def server(self, sg, j):
            return 10 + j
    diff = np.arange(4.0)
    one = Stub(Endpoint(), Topo([0]), 0)
    one._on_grad(T.header(T.GRAD, param=0, step=0, src=0), [diff])
    assert [(d, k, o) for d, k, o, _ in one.ep.sent] == [(10, 0, 0), (11, 1, 2)]
    assert all(np.shares_memory(b, diff) for _, _, _, b in one.ep.sent)
    two = Stub(Endpoint(), Topo([0, 1]), 0)
    two._on_grad(T.header(T.GRAD, param=0, step=0, src=1), [np.full(4, 3.0)])
    assert two.ep.sent == []                               # waits for worker 0
    two._on_grad(T.header(T.GRAD, param=0, step=0, src=0), [diff])
    got = np.concatenate([b for _, _, _, b in two.ep.sent])
    assert got.tolist() == [1.5, 2.0, 2.5, 3.0] and diff.tolist() == [0, 1, 2, 3]


def test_header_entries_round_trip_with_every_field():
    """frames.encode / decode: the buffer descriptions and a DistHeader with every field set,
    CLIPNORM's, WRITTEN's and PULLED's own fields included (one meaning per field)."""
    import numpy as np
    from caffepy.dist import frames
    fields = dict(src=1, dst=2, param=3, slice=4, step=1 << 40, version=-5, flag=1, offset=6,
                  text="file=x.bin", group=-1, server=7, lr_step=8, staleness=9)
    bufs = [np.zeros(3, np.float32), np.zeros(0, np.int64), np.zeros(5, np.complex128),
            np.zeros(2, np.uint8)]
    entries = [frames.encode(T.header(T.CLIPNORM, **fields).SerializeToString(), bufs),
               frames.encode(T.header(T.STOP).SerializeToString(), [])]
    view = memoryview(b"".join(entries))
    h, descr, pos = frames.decode(view, 0)
    assert {k: getattr(h, k) for k in fields} == fields and h.kind == T.CLIPNORM
    assert descr == [(b.dtype, b.size) for b in bufs] and pos == len(entries[0])
    h, descr, pos = frames.decode(view, pos)
    assert h.kind == T.STOP and descr == [] and pos == len(view)
    assert frames.align(9) == 16 and frames.align(16) == 16


def test_server_answers_stubs_in_other_processes_first():
    """A slice's new values go to the stubs of other processes before this process's own (whose
    worker computes again as soon as it has them); every stub of every group is answered once."""
    import numpy as np
    from caffepy.dist.server import Server

    class Endpoint(object):
        def __init__(self):
            self.sent = []
            self.engine = type("E", (), {"inboxes": {7: None, 9: None}})()

        def send(self, dst, h, bufs=()):
            self.sent.append((dst, h.kind, h.param, h.version))

    class Clock(object):
        def min_clock(self):
            return 4
    s = type("S", (), {})()
    s.p, s.k, s.offset, s.version, s.values, s.clock = 2, 0, 0, 5, np.zeros(3), Clock()
    server = Server.__new__(Server)
    server.ep, server.stable_answers = Endpoint(), True
    server.stubs = {0: [7, 8], 1: [9, 10]}      # 7 and 9 live in this process
    server._answer(s, [0, 1])
    assert [d for d, _, _, _ in server.ep.sent] == [8, 10, 7, 9]
    assert {(k, p, v) for _, k, p, v in server.ep.sent} == {(T.PARAM, 2, 5)}


def test_sends_in_flight_drop_completed_ones_with_their_buffers():
    """MpiEngine._sends_in_flight: one Testsome over the send requests; the completed requests and
    the buffers they read go, the others stay paired, in order (no mpi4py needed)."""
    import numpy as np
    from caffepy.dist.mpi import MpiEngine
    done_next = []

    class Request(object):
        @staticmethod
        def Testsome(reqs):
            return done_next.pop(0)         # (IndexError: a call nobody expected)

    eng = MpiEngine.__new__(MpiEngine)
    eng.MPI = type("MPI", (), {"Request": Request})
    bufs = [np.full(2, i) for i in range(4)]
    eng.sending, eng.kept = ["r0", "r1", "r2", "r3"], list(bufs)
    done_next[:] = [None, [0, 2], [1, 0]]
    assert eng._sends_in_flight() and eng.sending == ["r0", "r1", "r2", "r3"]     # none done
    assert eng._sends_in_flight() and eng.sending == ["r1", "r3"]
    assert [b[0] for b in eng.kept] == [1, 3]
    assert not eng._sends_in_flight() and eng.sending == [] and eng.kept == []
    assert not eng._sends_in_flight()                   # nothing in flight: no MPI call at all
