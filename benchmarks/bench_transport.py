"""Transport latency and bandwidth: caffepy's MPI engine vs plain mpi4py, across two emulated hosts.

    python3 benchmarks/bench_transport.py [--rate 10gbit] [--reps 200] [--local]

starts a cluster in one box (tools/cluster.py: hosts h1, h2, links capped with tc tbf at --rate),
runs this file under ``mpiexec -hosts h1:1,h2:1`` and prints a markdown table (``--local``: plain
``mpiexec -n 2`` on this host, no namespaces and no root: the per-message Python work without the
network). Per size:

- latency: one-way time = half the round trip of a ping-pong (median over reps);
- bandwidth: rank 0 sends ``n`` messages back to back, rank 1 answers one small message after the
  last; bytes / time (best of 3 rounds).

Plain mpi4py is ``Send`` / ``Recv`` on numpy buffers; the engine is ``Endpoint.send`` / ``recv`` of a
``GRAD`` message with one buffer (communication thread, batching, inbox queues).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = [64, 1024, 16 * 1024, 256 * 1024, 1 << 20, 4 << 20, 32 << 20]


class _Topo(object):
    """Two endpoints, endpoint r on rank r (what the engine asks of a topology)."""
    n_processes = 2

    class cluster(object):
        server_worker_separate = False

    def set_hosts(self, hosts):
        pass

    def endpoints_of_process(self, r):
        return [r]

    def process_of(self, ep):
        return ep

    def describe(self, ep):
        return "endpoint %d" % ep


def _reps(size, reps):
    return max(3, min(reps, int(reps * 65536 / max(size, 65536))))


def plain(comm, size, reps):
    rank, peer = comm.rank, 1 - comm.rank
    buf = np.zeros(size, np.uint8)
    times = []
    for _ in range(_reps(size, reps)):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(buf, dest=peer)
            comm.Recv(buf, source=peer)
        else:
            comm.Recv(buf, source=peer)
            comm.Send(buf, dest=peer)
        times.append((time.perf_counter() - t0) / 2)
    lat = float(np.median(times))
    n = max(2, min(50, (64 << 20) // size))
    best = 0.0
    for _ in range(3):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            for _ in range(n):
                comm.Send(buf, dest=peer)
            comm.Recv(buf[:1], source=peer)
        else:
            for _ in range(n):
                comm.Recv(buf, source=peer)
            comm.Send(buf[:1], dest=peer)
        best = max(best, n * size / (time.perf_counter() - t0))
    return lat, best


def engine(comm, eng, size, reps):
    from caffepy.dist import transport as T
    rank, peer = comm.rank, 1 - comm.rank
    ep = eng.endpoint(rank)
    buf = np.zeros(size, np.uint8)
    h = T.header(T.GRAD)
    times = []
    for _ in range(_reps(size, reps)):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            ep.send(peer, h, [buf])
            ep.recv(60)
        else:
            _, bufs = ep.recv(60)
            ep.send(peer, h, bufs)
        times.append((time.perf_counter() - t0) / 2)
    lat = float(np.median(times))
    n = max(2, min(50, (64 << 20) // size))
    best = 0.0
    small = np.zeros(1, np.uint8)
    for _ in range(3):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            for _ in range(n):
                ep.send(peer, h, [buf])
            ep.recv(60)
        else:
            for _ in range(n):
                ep.recv(60)
            ep.send(peer, h, [small])
        best = max(best, n * size / (time.perf_counter() - t0))
    return lat, best


def ranks_main(reps):
    from mpi4py import MPI
    from caffepy.dist.mpi import MpiEngine
    comm = MPI.COMM_WORLD.Dup()
    load = open("/proc/loadavg").read().split()[:3]
    eng = MpiEngine(_Topo(), comm=MPI.COMM_WORLD)   # Barrier on the Dup, messages on WORLD
    # per size, plain then engine back to back (the machine's load changes between sizes)
    rows = [(size, plain(comm, size, reps), engine(comm, eng, size, reps)) for size in SIZES]
    eng.close()
    if comm.rank == 0:
        print("loadavg before %s, after %s; engine polls: %s"
              % (" ".join(load), " ".join(open("/proc/loadavg").read().split()[:3]),
                 "yes" if eng.spin else "no (no core to spare)"))
        print("| size | plain mpi4py one-way | engine one-way | ratio | plain MB/s | engine MB/s "
              "| engine / plain |")
        print("|---|---|---|---|---|---|---|")
        for size, (pl, pb), (el, eb) in rows:
            name = "%d B" % size if size < 1024 else ("%d KiB" % (size >> 10) if size < 1 << 20
                                                      else "%d MiB" % (size >> 20))
            print("| %s | %.1f µs | %.1f µs | %.2fx | %.0f | %.0f | %.0f%% |"
                  % (name, pl * 1e6, el * 1e6, el / pl, pb / 1e6, eb / 1e6, 100 * eb / pb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", default="10gbit")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--local", action="store_true", help="mpiexec -n 2 on this host")
    ap.add_argument("--ranks", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ranks:
        return ranks_main(a.reps)
    cmd = [sys.executable, os.path.abspath(__file__), "--ranks", "--reps", str(a.reps)]
    if a.local:
        env = dict(os.environ, PYTHONPATH=ROOT)
        return subprocess.call(["mpiexec", "-n", "2"] + cmd, env=env, cwd=ROOT, timeout=600)
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from cluster import Cluster
    with Cluster(2, a.rate) as box:
        env = box.env(PYTHONPATH=ROOT)
        p = box.mpiexec(cmd, ppn=1, env=env, cwd=ROOT)
        try:
            return p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            return 124


if __name__ == "__main__":
    sys.exit(main())
