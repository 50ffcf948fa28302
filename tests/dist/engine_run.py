"""Run under mpiexec -n 2 by test_engine.py: rank 0 sends messages of every buffer shape the engine
frames differently (none, empty, small in one bucket inline or on its own, big alone, mixed
dtypes, many at once) to
rank 1, which checks every byte and echoes them back; prints ENGINE OK on rank 0."""
import sys

import numpy as np

from caffepy.dist import transport as T
from caffepy.dist.mpi import BIG, MpiEngine


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
        for i in range(len(want)):
            h, bufs = ep.recv(30)
            assert h.param == i and len(bufs) == len(want[i]), (i, h.param)
            for a, b in zip(bufs, want[i]):
                assert a.dtype == b.dtype and np.array_equal(a, b), i
            ep.send(0, h, bufs)
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
