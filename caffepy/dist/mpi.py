"""The MPI engine (mpi4py): one process per rank; MPI calls made one at a time under one lock.

Role threads put a message for another rank on a queue (``deliver``). Whoever holds the engine's
lock runs a *progress round*: the communication thread (``mpi-comm``) whenever the lock is free, a
role thread that just queued a message or is waiting for one (so the fast path needs no hand-over
between threads). MPI_THREAD_MULTIPLE is checked at start (one-line error otherwise; the watchdog
may call ``Abort`` from its own thread). A round sends what is queued for one rank as one *batch*:
a header message (``TAG_HEADER``: the headers' byte count, each DistHeader prefixed by its length)
plus

- one flat *bucket* with every buffer under ``BIG`` bytes, each at an 8-byte aligned offset
  (small tensors: one copy), at the end of the header message when both fit ``HEADER_MAX`` (a small
  message is then one MPI message), else a message of its own (``TAG_BUCKET``);
- every buffer of ``BIG`` bytes or more as its own ``Isend`` straight from its numpy memory
  (``TAG_DATA``, zero copy).

It takes headers with a matched probe (``Improbe`` + ``Recv``) into a preallocated buffer (a
pre-posted ``ANY_SOURCE`` ``Irecv`` lost messages across hosts with UCX over TCP); once a batch's
headers came, it posts ``Irecv`` s for its bucket and big buffers straight into the arrays the
receivers get (bucket buffers are views of the one received bucket; arrays come from a pool that
reuses an array once nobody but the pool refers to it), and hands the messages to the inboxes once
they are complete, in the order each source sent them (MPI keeps one source's messages of a tag in
order). Sends and receives are non-blocking. The communication thread polls while anything is in
flight or for ``SPIN`` s after the last activity (yielding the GIL between rounds); idle, it waits
on the send queue's event for at most ``IDLE_MAX`` s between rounds. A waiting role thread polls
for at most ``SPIN`` s itself, then blocks on its inbox. On a host with more ranks than cores
nobody polls beyond one round (a spinning rank would take the core another one computes on).
mpi4py is imported here only.
"""
import collections
import os
import queue
import struct
import threading
import time

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2
from .transport import Engine

TAG_HEADER, TAG_BUCKET, TAG_DATA = 11, 12, 13
BIG = 64 * 1024               # bytes: buffers this large travel alone, zero copy
HEADER_MAX = 256 * 1024       # bytes of one batch of headers (a batch is cut before that)
SPIN = 0.0005
IDLE_MAX = 0.001
_LEN = struct.Struct("<I")


def mpi_world():
    """(comm, rank, size) of MPI_COMM_WORLD; a one-line error without mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise CaffeError("the mpi engine needs mpi4py (pip install mpi4py mpich)")
    comm = MPI.COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


def _warn_oversubscribed(hosts, rank):
    """The first rank of a host warns when that host runs more ranks than it has cores."""
    here = hosts[rank]
    if hosts.index(here) != rank:
        return
    n, cores = hosts.count(here), os.cpu_count() or 1
    if n > cores:
        from ..log import warning
        warning("mpi.py", "host %s runs %d ranks on %d cores: they will wait for each other "
                "(fewer ranks per host, or server_worker_separate false)" % (here, n, cores))


def _align(n):
    return (n + 7) & ~7


def layout(h):
    """[(dtype, size, nbytes, bucket offset or None)] of a header's buffers, and the bucket size."""
    out, off = [], 0
    for dt, size in zip(h.dtype, h.size):
        dtype = np.dtype(dt)
        nbytes = int(size) * dtype.itemsize
        if nbytes >= BIG:
            out.append((dtype, int(size), nbytes, None))
        else:
            out.append((dtype, int(size), nbytes, off))
            off = _align(off + nbytes)
    return out, off


class _Pool(object):
    """Receive buffers kept for reuse: an array whose only reference is the pool's (the receiver
    dropped every message and view of it) is handed out again for the same byte count."""

    def __init__(self, per_size=4, total=512 << 20):
        self.free = {}
        self.per_size, self.total, self.held = per_size, total, 0

    def take(self, nbytes):
        import sys
        arrays = self.free.setdefault(nbytes, [])
        for a in arrays:
            if sys.getrefcount(a) <= 3:         # the list, the loop variable, the argument
                return a
        a = np.empty(nbytes, np.uint8)
        if len(arrays) < self.per_size and self.held + nbytes <= self.total:
            arrays.append(a)
            self.held += nbytes
        return a


class _Incoming(object):
    """One received batch: its messages and the receives still in flight."""
    __slots__ = ("messages", "requests")


class MpiEngine(Engine):
    name = "mpi"

    def __init__(self, topology, comm=None, setup=None):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm or MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise CaffeError("MPI gave thread level %d, the mpi engine needs MPI_THREAD_MULTIPLE (%d): "
                             "leave mpi4py.rc.thread_level at 'multiple' and use a thread-safe MPI"
                             % (MPI.Query_thread(), MPI.THREAD_MULTIPLE))
        if self.comm.Get_size() != topology.n_processes:
            raise CaffeError("the cluster needs %d MPI processes (%d workers%s), mpiexec started %d"
                             % (topology.n_processes, topology.W,
                                " + %d servers" % topology.S if topology.cluster.server_worker_separate
                                else "", self.comm.Get_size()))
        # collectives before the communication thread starts: every rank's host
        from .topology import learn_hosts      # (hostsum: shared-memory split, names as fallback)
        self.hosts = learn_hosts(self.comm)
        topology.set_hosts(self.hosts)
        _warn_oversubscribed(self.hosts, self.rank)
        # polling only pays while a core is free for it: none on a host with more ranks than cores
        here = self.hosts.count(self.hosts[self.rank])
        self.spin = SPIN if here <= (os.cpu_count() or 1) else 0.0
        super(MpiEngine, self).__init__(topology, topology.endpoints_of_process(self.rank))
        self.outbox = collections.deque()
        self.wake = threading.Event()
        self._closed = threading.Event()
        self.error = None
        self.pool = _Pool()
        self.lock = threading.Lock()        # held by whoever makes MPI calls (one at a time)
        self.hbuf = np.empty(HEADER_MAX, np.uint8)
        self.status = MPI.Status()
        self.sending = []                    # (request, buffers it reads)
        self.incoming = collections.defaultdict(collections.deque)   # source -> [_Incoming]
        if setup is not None:        # more collectives (the watchdog's address), before the thread
            setup(self)
        self.thread = threading.Thread(target=self._loop, name="mpi-comm", daemon=True)
        self.thread.start()

    def host_compute_threads(self, local_workers):
        """Ranks on this host (learnt at start; else as the launcher reports them), each counted
        as ``local_workers`` nets."""
        here = self.hosts[self.rank]
        return sum(1 for h in self.hosts if h == here) * max(1, local_workers)

    def deliver(self, h, buffers):
        if h.dst in self.inboxes:
            self.inboxes[h.dst].put((h, buffers))
            return
        if self.error is not None:
            raise CaffeError("mpi engine: %s" % self.error)
        self.outbox.append((self.topology.process_of(h.dst), h.SerializeToString(), buffers))
        if self.lock.acquire(blocking=False):      # send now from this thread if MPI is free
            try:
                self._progress()
            finally:
                self.lock.release()
        else:
            self.wake.set()

    # -- the communication thread ---------------------------------------------------------------
    def _loop(self):
        try:
            self._run()
        except BaseException as e:  # the guard (watchdog) sees the rank stop; say why here
            self.error = "communication thread failed: %s" % e
            for inbox in self.inboxes.values():
                from . import transport as T
                inbox.put((T.header(T.ERROR, text=self.error), []))

    def _run(self):
        last, idle = time.perf_counter(), 0.0
        while not (self._closed.is_set() and not self.outbox and not self.sending):
            if not self.lock.acquire(timeout=IDLE_MAX):
                continue
            try:
                active, busy = self._progress()
            finally:
                self.lock.release()
            now = time.perf_counter()
            if active or busy:
                last, idle = now, 0.0
                time.sleep(0)
            elif now - last < self.spin:
                time.sleep(0)
            else:
                idle = min(IDLE_MAX, idle * 2 or 0.00005)
                self.wake.wait(idle)
                self.wake.clear()

    def _progress(self):
        """One round (the caller holds ``lock``): send what is queued, take arrived headers, hand
        over completed batches; returns (something happened, something is in flight)."""
        MPI, comm, status = self.MPI, self.comm, self.status
        active = False
        if self.outbox:
            self._send_batches(self.sending)
            active = True
        while True:         # (a pre-posted ANY_SOURCE Irecv lost messages across hosts: UCX/TCP)
            msg = comm.Improbe(source=MPI.ANY_SOURCE, tag=TAG_HEADER, status=status)
            if msg is None:
                break
            source, n = status.Get_source(), status.Get_count(MPI.BYTE)
            msg.Recv([self.hbuf[:n], MPI.BYTE])
            self.incoming[source].append(self._post_receives(self.hbuf[:n], source))
            active = True
        for queue_ in self.incoming.values():
            while queue_ and MPI.Request.Testall(queue_[0].requests):
                for h, bufs in queue_.popleft().messages:
                    inbox = self.inboxes.get(h.dst)
                    if inbox is not None:
                        inbox.put((h, bufs))
                active = True
        if self.sending:
            self.sending[:] = [(r, keep) for r, keep in self.sending if not r.Test()]
        return active, bool(self.sending) or any(self.incoming.values())

    def receive(self, inbox, timeout):
        """A role thread waiting for a message drives progress itself while nobody else does (no
        hand-over between threads on the fast path), for at most ``spin`` s, then blocks."""
        end = time.perf_counter() + self.spin
        while time.perf_counter() < end and self.error is None:
            try:
                return inbox.get_nowait()
            except queue.Empty:
                pass
            if self.lock.acquire(blocking=False):
                try:
                    self._progress()
                finally:
                    self.lock.release()
            else:
                time.sleep(0)
        return Engine.receive(self, inbox, timeout)

    def _send_batches(self, sending):
        MPI, comm = self.MPI, self.comm
        by_rank = collections.OrderedDict()
        while self.outbox:
            rank, raw, buffers = self.outbox.popleft()
            by_rank.setdefault(rank, []).append((raw, buffers))
        for rank, items in by_rank.items():
            start = 0
            while start < len(items):     # cut so that a batch's headers fit HEADER_MAX
                end, total = start, 4
                while end < len(items) and (end == start or total + 4 + len(items[end][0]) <= HEADER_MAX):
                    total += 4 + len(items[end][0])
                    end += 1
                self._send_batch(rank, items[start:end], sending)
                start = end

    def _send_batch(self, rank, items, sending):
        MPI, comm = self.MPI, self.comm
        heads = bytearray()
        small, big, off = [], [], 0
        for raw, buffers in items:
            if 8 + len(raw) > HEADER_MAX:
                raise CaffeError("a message header of %d bytes exceeds %d" % (len(raw), HEADER_MAX))
            heads += _LEN.pack(len(raw)) + raw
            for b in buffers:
                if b.nbytes >= BIG:
                    big.append(b)
                else:
                    small.append((off, b))
                    off = _align(off + b.nbytes)
        inline = 4 + len(heads) + off <= HEADER_MAX       # small data rides in the header message
        frame = np.empty(4 + len(heads) + (off if inline else 0), np.uint8)
        frame[:4] = np.frombuffer(_LEN.pack(len(heads)), np.uint8)
        frame[4:4 + len(heads)] = np.frombuffer(bytes(heads), np.uint8)
        bucket = frame[4 + len(heads):] if inline else np.empty(off, np.uint8)
        for o, b in small:
            bucket[o:o + b.nbytes] = b.view(np.uint8)
        sending.append((comm.Isend([frame, MPI.BYTE], dest=rank, tag=TAG_HEADER), frame))
        if off and not inline:      # (empty buffers take no bytes: no bucket when all are empty)
            sending.append((comm.Isend([bucket, MPI.BYTE], dest=rank, tag=TAG_BUCKET), bucket))
        for b in big:
            sending.append((comm.Isend([b.view(np.uint8), MPI.BYTE], dest=rank, tag=TAG_DATA), b))

    def _post_receives(self, raw, source):
        MPI, comm = self.MPI, self.comm
        inc = _Incoming()
        inc.messages, inc.requests = [], []
        heads, bucket_size = [], 0
        nhead = _LEN.unpack_from(raw, 0)[0]
        inline = raw[4 + nhead:]
        raw, pos = raw[4:4 + nhead].tobytes(), 0
        while pos < len(raw):
            n = _LEN.unpack_from(raw, pos)[0]
            h = caffe_pb2.DistHeader()
            h.ParseFromString(raw[pos + 4:pos + 4 + n])
            pos += 4 + n
            plan, size = layout(h)
            heads.append((h, plan, bucket_size))
            bucket_size += size
        bucket = self.pool.take(bucket_size) if bucket_size else None
        if bucket is not None and inline.size:
            bucket[...] = inline
        elif bucket is not None:
            inc.requests.append(comm.Irecv([bucket, MPI.BYTE], source=source, tag=TAG_BUCKET))
        for h, plan, base in heads:
            bufs = []
            for dtype, size, nbytes, off in plan:
                if nbytes == 0:
                    arr = np.empty(size, dtype)
                elif off is None:
                    raw_arr = self.pool.take(nbytes)
                    inc.requests.append(comm.Irecv([raw_arr, MPI.BYTE], source=source, tag=TAG_DATA))
                    arr = raw_arr.view(dtype)
                else:
                    arr = bucket[base + off:base + off + nbytes].view(dtype)
                bufs.append(arr)
            inc.messages.append((h, bufs))
        return inc

    def close(self):
        """Stop the thread once what is queued has been sent (at most 5 s)."""
        self._closed.set()
        self.wake.set()
        self.thread.join(timeout=5)
