"""Run under mpiexec -n 2 by test_engine.py: rank 0 sends messages of every buffer shape the engine
frames differently (none, empty, small in one bucket inline or on its own, big alone, mixed
dtypes, many at once) to
rank 1, which checks every byte and echoes them back; then PARAM messages that rank 1 receives in
place (its target: one preallocated array; inline, big alone, and in a bucket of its own, which
falls back to a pool buffer) and a header with every field set; then messages sent and taken while
both ranks are *computing* (Engine.computing: nobody spins, the computing thread drives progress
at its "layer boundaries"): they arrive intact and the communication thread stays off the core;
prints ENGINE OK on rank 0."""
import sys
import threading
import time

import numpy as np

from caffepy.dist import transport as T
from caffepy.dist.frames import BIG
from caffepy.dist.mpi import QUIET_NAP, MpiEngine


class Topo(object):
    n_processes = 2

    class cluster(object):
        server_worker_separate = False

    def set_hosts(self, hosts):
        self.hosts = hosts

    def endpoints_of_process(self, r):
        return [r]

    def process_of(self, ep):
        return ep

    def describe(self, ep):
        return "endpoint %d" % ep


def messages():
    rng = np.random.default_rng(1)
    out = [[], [np.zeros(0)], [np.arange(5, dtype=np.int64)], [np.zeros(0), np.ones(3, np.float32)],
           [rng.normal(size=BIG // 8 + 3)], [np.arange(7, dtype=np.int32), rng.normal(size=BIG),
                                             np.zeros(0, np.int64), np.ones(1, np.uint8)]]
    out += [[rng.normal(size=BIG // 8 - 16) for _ in range(6)]]   # small, but too many to ride inline
    out += [[rng.normal(size=int(n))] for n in rng.integers(0, 3 * BIG // 8, size=40)]
    return out


def main():
    eng = MpiEngine(Topo())
    ep = eng.endpoint(eng.rank)
    want = messages()
    if eng.rank == 0:
        for i, bufs in enumerate(want):
            ep.send(1, T.header(T.GRAD, param=i), bufs)
        for i in range(len(want)):
            h, bufs = ep.recv(30)
            assert h.param == i and len(bufs) == len(want[i]), (i, h.param)
            for a, b in zip(bufs, want[i]):
                assert a.dtype == b.dtype and np.array_equal(a, b), i
        print("ENGINE OK", flush=True)
    else:
        weights = in_place_target(eng)     # (before the echo that lets rank 0 send the PARAMs)
        for i in range(len(want)):
            h, bufs = ep.recv(30)
            assert h.param == i and len(bufs) == len(want[i]), (i, h.param)
            for a, b in zip(bufs, want[i]):
                assert a.dtype == b.dtype and np.array_equal(a, b), i
            ep.send(0, h, bufs)
    in_place(eng, ep, None if eng.rank == 0 else weights)
    quiet(eng, ep)
    eng.close()
    return 0


def quiet(eng, ep):
    """While this rank computes (a numpy loop standing for the layers, progress() after each), the
    other rank's messages (small and big) come in through those rounds (only where the rank has a
    core to spare: ``layer_rounds``) and the communication thread's own rounds, at most one per
    QUIET_NAP s (it neither spins nor is woken by sends)."""
    rng = np.random.default_rng(2)
    want = [[rng.normal(size=int(n))] for n in (10, BIG // 8 + 5, 3, 2 * BIG // 8, 1000)] * 4
    a = rng.normal(size=(200, 200))
    rounds = [0, 0]         # (communication thread, others)
    progress = eng._progress

    def counted():
        rounds[threading.current_thread() is not eng.thread] += 1
        return progress()
    eng._progress = counted
    eng.computing(ep.id, True)
    t0 = time.perf_counter()
    if eng.rank == 1:
        for i, bufs in enumerate(want):
            ep.send(0, T.header(T.GRAD, param=i), bufs)
            a = np.tanh(a @ a.T * 1e-3)          # a "layer"
            eng.progress()
    got = []
    while eng.rank == 0 and len(got) < len(want):
        a = np.tanh(a @ a.T * 1e-3)
        eng.progress()
        while ep.probe():
            got.append(ep.recv(0))
    window = time.perf_counter() - t0
    comm = rounds[0]
    eng.computing(ep.id, False)
    eng._progress = progress
    if eng.rank == 0:
        for i, (h, bufs) in enumerate(got):
            assert h.param == i and np.array_equal(bufs[0], want[i][0]), i
        print("quiet window %.3f s: %d rounds of the communication thread, %d of the computing one"
              % (window, comm, rounds[1]))
        assert (rounds[1] >= 1) == eng.layer_rounds and comm <= window / QUIET_NAP + 5, (
            comm, window, rounds[1], eng.layer_rounds)
        ep.send(1, T.header(T.DONE))
    else:
        assert ep.recv(30)[0].kind == T.DONE


FIELDS = dict(param=3, slice=2, step=1 << 40, version=-7, flag=1, offset=5, text="file=a;b",
              group=-1, server=4, lr_step=123456789012, staleness=2)


N = BIG // 8 + 100
SIZES = [(0, 10), (N, N), (2 * N, 20)]


def in_place_target(eng):
    """Rank 1 names ``weights`` as the target of PARAM values (param = offset in it), before any
    can arrive (a header taken before that lands in a pool array)."""
    weights = np.zeros(3 * N)

    def target(h, dtype, size):
        if h.kind != T.PARAM or dtype != weights.dtype:
            return None
        return weights[h.param:h.param + size]

    eng.set_target(1, target)
    return weights


def in_place(eng, ep, weights):
    """Rank 0 sends PARAM values; rank 1 checks the values it got and whether each landed in
    ``weights`` itself."""
    sizes = SIZES
    if eng.rank == 0:
        for off, size in sizes[:2]:
            ep.send(1, T.header(T.PARAM, param=off), [np.arange(size, dtype=np.float64) + off])
        bucket = [np.full(BIG // 8 - 16, 1.0) for _ in range(6)]      # bucket of its own
        ep.send(1, T.header(T.PARAM, param=sizes[2][0]), [np.arange(20.0) + sizes[2][0]] + bucket)
        ep.send(1, T.header(T.GRAD, **FIELDS), [np.ones(3)])
        h, bufs = ep.recv(30)
        assert h.text == "in place 1 1 0 fields ok", h.text
        return
    same = []
    for off, size in sizes:
        h, bufs = ep.recv(30)
        assert h.param == off and np.array_equal(bufs[0], np.arange(size, dtype=np.float64) + off), (off, h.param, bufs[0][:5], len(bufs[0]))
        same.append(int(np.shares_memory(bufs[0], weights)))
        if same[-1]:
            assert np.array_equal(weights[off:off + size], bufs[0])
    h, bufs = ep.recv(30)
    got = {k: getattr(h, k) for k in FIELDS}
    assert got == FIELDS and h.kind == T.GRAD and h.src == 0 and h.dst == 1, got
    eng.set_target(1, None)
    ep.send(0, T.header(T.DONE, text="in place %d %d %d fields ok" % tuple(same)))


if __name__ == "__main__":
    sys.exit(main())
