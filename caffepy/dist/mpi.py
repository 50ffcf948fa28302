"""The MPI engine (mpi4py): one process per rank; MPI calls made one at a time under one lock.

Role threads put a message for another rank on a queue (``deliver``). Whoever holds the engine's
lock runs a *progress round*: the communication thread (``mpi-comm``) whenever the lock is free, a
role thread that is waiting for a message (so the fast path needs no hand-over between threads); a
role thread that just queued a message sends it itself when the lock is free (no probe), and wakes
the communication thread only while something it sent is still in flight. MPI_THREAD_MULTIPLE is checked at start (one-line error otherwise; the watchdog
may call ``Abort`` from its own thread). A round sends what is queued for one rank as one *batch*,
a header message (``TAG_HEADER``; entries of fixed structs, :mod:`caffepy.dist.frames`)::

    u32 n = bytes of the message entries; then per message:
        u32 header bytes, u16 buffer count, per buffer (4s dtype.str, i64 size), the DistHeader
    [zero padding to 8 bytes; the bucket, when it fits HEADER_MAX]

- the *bucket*: every buffer under ``BIG`` bytes, each at an 8-byte aligned offset (small tensors:
  one copy), at the end of the header message when it fits (a small message is one MPI message
  and its buffers are views of that message's bytes), else a message of its own (``TAG_BUCKET``);
- every buffer of ``BIG`` bytes or more as its own ``Isend`` straight from its numpy memory
  (``TAG_DATA``, zero copy).

It takes headers with a matched probe (``Improbe`` + ``Recv``) into a fresh byte array of the
probed size (a pre-posted ``ANY_SOURCE`` ``Irecv`` lost messages across hosts with UCX over TCP);
then it posts ``Irecv`` s for the batch's bucket and big buffers straight into the arrays the
receivers get: a target the receiving endpoint named (:meth:`Engine.set_target`: a worker's
weights), else arrays from a pool that reuses an array once nobody but the pool refers to it. A
targeted buffer inside the header message is copied once, from the message into the target. It
hands the messages to the inboxes once they are complete, in the order each source sent them (MPI
keeps one source's messages of a tag in order). Sends and receives are non-blocking.

Who polls, where each rank of the host can have a core (its affinity holds at least as many cores as
its host has ranks): a role thread waiting for a message *claims* the lock (the communication thread
steps aside) and polls for ``SPIN`` s (yielding its core every ``TIGHT`` s: a message whose
sender never yielded its core reached the peer only once that spin ended, so a ping-pong could lock
into ~0.75 ms one-way), then blocks on its inbox; the communication thread polls
while anything is in flight or for ``SPIN`` s after the last activity. Where the communication
thread has a core of its own (more cores than ranks on the host), a waiting role thread polls on
while data is in flight (``BUSY_SPIN`` s more: no hand-over mid-message) and the communication
thread only yields (``sched_yield``, ~2 µs) between rounds; else it naps (``sleep(0)``: the timer
slack, ~50 µs), which idles the link: UCX over TCP moves eager messages (below ~3 MiB) only
inside progress calls on both sides.
Where ranks outnumber cores nobody spins: a waiting role thread makes one round and blocks, the
communication thread polls every ``NAP`` s while anything is in flight. Idle, it waits on the send
queue's event for ``NAP`` up to ``IDLE_MAX`` s between rounds. While a local worker computes
(:meth:`MpiEngine.computing`, wait-free backprop's overlap) the rank's core is the worker's: nobody
spins or claims, a send does not wake the communication thread, the worker makes one round at each
layer boundary (:meth:`MpiEngine.progress`) where the rank has a core to spare (on a rank of one core
those rounds cost the worker more than they moved: measured, BENCHMARKS.md) and the communication
thread one only after ``QUIET_NAP`` s without any. mpi4py is imported here and in ``topology.learn_hosts`` only, inside
functions.
"""
import collections
import os
import threading
import time

import numpy as np

from ..errors import CaffeError
from .frames import Pool as _Pool, cut_batches, encode, pack_batch, plan_batch
from .transport import Engine, affinity_cores as _cores, warn_oversubscribed

TAG_HEADER, TAG_BUCKET, TAG_DATA = 11, 12, 13
SPIN = 0.0005                 # s a waiting role thread polls (the comm thread after activity)
BUSY_SPIN = 0.02              # s more while data is in flight
TIGHT = 0.00005               # s a waiting role thread polls between two yields of its core
NAP = 0.00005
IDLE_MAX = 0.001
QUIET_NAP = 0.002             # s without a round before the communication thread makes one (quiet)


def _nap():
    time.sleep(0)           # (sleeps the timer slack, ~50 µs)


class _Incoming(object):
    """One received batch: its messages and the receives still in flight."""
    __slots__ = ("messages", "requests")

    def __init__(self):
        self.messages, self.requests = [], []


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
        warn_oversubscribed(self.hosts, self.rank)
        # polling only pays while a core is free for it: none on a host with more ranks than cores
        here = self.hosts.count(self.hosts[self.rank])
        self.spin = SPIN if here <= _cores() else 0.0
        own_core = here < _cores()          # (the comm thread has a core of its own)
        self.pause = os.sched_yield if own_core else _nap     # (between the comm thread's rounds)
        self.layer_rounds = own_core        # progress(): a computing worker's rounds (see there)
        self.busy_spin = BUSY_SPIN if own_core else 0.0
        self.claims = []                     # role threads about to take the lock (list: atomic)
        super(MpiEngine, self).__init__(topology, topology.endpoints_of_process(self.rank))
        self.outbox = collections.deque()
        self.wake = threading.Event()
        self._closed = threading.Event()
        self.error = None
        self.last_active = time.perf_counter()      # of the last round that moved something
        self.last_round = self.last_active          # of the last round (quiet: see computing)
        self.pool = _Pool()
        self.lock = threading.Lock()        # held by whoever makes MPI calls (one at a time)
        self.status = MPI.Status()
        self.sending, self.kept = [], []     # send requests in flight, the buffers they read
        self.incoming = {}                   # source -> deque of _Incoming not complete yet
        self.computers = set()               # local workers computing now (quiet: nobody spins)
        self.handed = 0                      # messages handed to local inboxes (a spin stops)
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
        inbox = self.inboxes.get(h.dst)
        if inbox is not None:
            inbox.put((h, buffers))
            return
        if self.error is not None:
            raise CaffeError("mpi engine: %s" % self.error)
        self.outbox.append((self.topology.process_of(h.dst), h.SerializeToString(), buffers))
        if self.lock.acquire(False):      # send now from this thread if MPI is free (only send:
            try:                          # receiving is for the waiting threads and the comm thread)
                if self.outbox:
                    self._send_batches()
                if self._sends_in_flight() and not self.computers:   # (in flight: the comm
                    self.wake.set()     # thread drives them; quiet: the computing worker's rounds do)
            finally:
                self.lock.release()
        elif not self.computers:
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
        idle, pause, claims, lock = 0.0, self.pause, self.claims, self.lock
        while not (self._closed.is_set() and not self.outbox and not self.sending):
            self.wake.clear()           # (a deliver after this wakes the wait below)
            if claims or not lock.acquire(False):   # a role thread polls: it wakes this one
                self.wake.wait(IDLE_MAX)            # when it stops with work in flight
                continue
            try:
                active, busy = self._progress()
            finally:
                lock.release()
            now = self.last_round = time.perf_counter()
            if self.computers:          # a worker computes: no spin, a round only where nobody
                idle = 0.0              # made one for QUIET_NAP s (the worker's layers do)
                while self.computers and not self._closed.is_set():
                    left = self.last_round + QUIET_NAP - time.perf_counter()
                    if left <= 0 or self.wake.wait(left):
                        break
            elif active or (busy and self.spin):
                self.last_active, idle = now, 0.0
                pause()
            elif busy:                  # in flight, no core to spare: poll every NAP s
                idle = 0.0
                self.wake.wait(NAP)
            elif now - self.last_active < self.spin:
                idle = 0.0
                pause()
            else:
                idle = min(IDLE_MAX, idle * 2 or NAP)
                self.wake.wait(idle)

    def _progress(self):
        """One round (the caller holds ``lock``): send what is queued, take arrived headers, hand
        over completed batches; returns (something happened, something is in flight)."""
        MPI, status = self.MPI, self.status
        active = False
        if self.outbox:
            self._send_batches()
            active = True
        improbe = self.comm.Improbe
        while True:         # (a pre-posted ANY_SOURCE Irecv lost messages across hosts: UCX/TCP)
            msg = improbe(MPI.ANY_SOURCE, TAG_HEADER, status)
            if msg is None:
                break
            source = status.Get_source()
            raw = bytearray(status.Get_count(MPI.BYTE))
            msg.Recv([raw, MPI.BYTE])
            inc = self._post_receives(raw, source)
            pending = self.incoming.get(source)
            if inc.requests or pending:
                if pending is None:
                    pending = self.incoming[source] = collections.deque()
                pending.append(inc)
            else:
                self._hand_over(inc)
            active = True
        if self.incoming:
            for source in list(self.incoming):
                pending = self.incoming[source]
                while pending and MPI.Request.Testall(pending[0].requests):
                    self._hand_over(pending.popleft())
                    active = True
                if not pending:
                    del self.incoming[source]
        return active, self._sends_in_flight() or bool(self.incoming)

    def _sends_in_flight(self):
        """Drop the completed sends and the buffers they read (one MPI call); any left?"""
        reqs = self.sending
        if not reqs:
            return False
        done = self.MPI.Request.Testsome(reqs)
        if done:
            if len(done) == len(reqs):
                del reqs[:], self.kept[:]
                return False
            done = set(done)
            kept = self.kept
            reqs[:] = [r for i, r in enumerate(reqs) if i not in done]
            kept[:] = [b for i, b in enumerate(kept) if i not in done]
        return True

    def _hand_over(self, inc):
        for h, bufs in inc.messages:
            inbox = self.inboxes.get(h.dst)
            if inbox is not None:
                inbox.put((h, bufs))
                self.handed += 1

    def receive(self, inbox, timeout):
        """A role thread waiting for a message drives progress itself while nobody else does (no
        hand-over between threads on the fast path): it holds the lock for at most ``spin`` s,
        so the communication thread sleeps meanwhile, then blocks on its inbox. It stops sooner
        when a round handed a message to another local thread: that thread gets the core (and
        polls in its turn), without the communication thread spinning beside it. While a local
        worker computes (quiet) it makes one round and blocks."""
        items = inbox.items
        if items:
            return items.popleft()
        quiet, handed = bool(self.computers), self.handed
        if self.spin and not quiet:     # the communication thread steps aside while a claim is up
            claims = self.claims
            claims.append(None)
            try:
                got = self.lock.acquire(timeout=self.spin)
            finally:
                claims.pop()
        else:
            got = self.lock.acquire(False)
        if got:                 # (no core to spare or quiet: one round, then block)
            item = busy = None
            try:
                progress, clock, yield_ = self._progress, time.perf_counter, os.sched_yield
                start = clock()
                spin = 0.0 if quiet else self.spin
                end, tight = start + spin, start + TIGHT
                last = end + (0.0 if quiet else self.busy_spin)
                while self.error is None:
                    busy = progress()[1]
                    if items:
                        item = items.popleft()
                        break
                    if self.handed != handed:   # another local thread got a message: its turn
                        break
                    now = clock()           # (while data is in flight, on: no hand-over mid-message)
                    if now > end and (not busy or now > last):
                        break
                    if now > tight:         # (what this spin would hold off gets the core, e.g.
                        yield_()            # deferred network softirqs: see TIGHT)
                        tight = now + TIGHT
            finally:
                self.lock.release()
            if item is not None:
                if busy and not self.computers:     # (still in flight: the comm thread drives it)
                    self.wake.set()
                return item
            if self.spin and not self.computers and self.handed == handed:
                self.last_active = time.perf_counter()  # the communication thread polls on for
                self.wake.set()                         # SPIN s while this blocks
        elif not self.computers:    # (the lock's holder was slow: the communication thread takes over)
            self.wake.set()
        return Engine.receive(self, inbox, timeout)

    # -- quiet while a local worker computes (wait-free backprop) ---------------------------------
    def computing(self, who, on):
        """While a local worker computes nobody spins on the rank's core: a role thread waiting for
        a message makes one round and blocks, the worker drives progress at its layer boundaries
        (:meth:`progress`), and the communication thread makes a round only when nobody made one
        for ``QUIET_NAP`` s (a long layer); sends do not wake it."""
        if on:
            self.computers.add(who)
        else:
            self.computers.discard(who)
            self.last_active = time.perf_counter()
            self.wake.set()         # back to polling at once (the worker is about to wait)

    def progress(self):
        """One progress round from a computing thread, if nobody else is making MPI calls now;
        none where the rank has no core to spare (``layer_rounds`` false): there the rounds, each
        moving paced TCP fragments on the worker's own core, slowed a wait-free step by more than
        they hid (CIFAR10-quick at 1 Gbit/s, one core per rank), and the communication thread's
        ``QUIET_NAP`` rounds move the data alone."""
        if self.layer_rounds and self.lock.acquire(False):
            try:
                self._progress()
                self.last_round = time.perf_counter()
            finally:
                self.lock.release()

    def _send_batches(self):
        outbox = self.outbox
        if len(outbox) == 1:
            rank, raw, buffers = outbox.popleft()
            self._send_batch(rank, [encode(raw, buffers)], [buffers])
            return
        by_rank = {}
        while outbox:
            rank, raw, buffers = outbox.popleft()
            entries, bufs = by_rank.setdefault(rank, ([], []))
            entries.append(encode(raw, buffers))
            bufs.append(buffers)
        for rank, (entries, bufs) in by_rank.items():
            for start, end in cut_batches(entries):     # (each batch's entries fit HEADER_MAX)
                self._send_batch(rank, entries[start:end], bufs[start:end])

    def _send_batch(self, rank, entries, buffer_lists):
        MPI, comm, sending, kept = self.MPI, self.comm, self.sending, self.kept
        frame, bucket, big = pack_batch(entries, buffer_lists)
        sending.append(comm.Isend([frame, MPI.BYTE], rank, TAG_HEADER))
        kept.append(frame)
        if bucket is not None:
            sending.append(comm.Isend([bucket, MPI.BYTE], rank, TAG_BUCKET))
            kept.append(bucket)
        for b in big:
            sending.append(comm.Isend([b.view(np.uint8), MPI.BYTE], rank, TAG_DATA))
            kept.append(b)

    def _post_receives(self, raw, source):
        MPI, comm = self.MPI, self.comm
        inc = _Incoming()
        heads, bucket_size, start = plan_batch(raw, source)
        inline = bucket_size and len(raw) > start
        bucket = None
        if inline:
            bucket = np.frombuffer(raw, np.uint8, bucket_size, start)
        elif bucket_size:
            bucket = self.pool.take(bucket_size)
            inc.requests.append(comm.Irecv([bucket, MPI.BYTE], source, TAG_BUCKET))
        targets = self.targets
        for h, plan in heads:
            bufs = []
            target = targets.get(h.dst) if targets else None
            for dtype, size, nbytes, off in plan:
                dst = None
                if target is not None and not bufs:
                    dst = target(h, dtype, size)
                    if dst is not None and off is not None and not inline:
                        dst = None            # (a bucket of its own: not read yet, no target)
                if nbytes == 0:
                    arr = np.empty(size, dtype)
                elif off is None:
                    if dst is None:
                        dst = self.pool.take(nbytes).view(dtype)
                    inc.requests.append(comm.Irecv([dst.view(np.uint8), MPI.BYTE], source, TAG_DATA))
                    arr = dst
                else:
                    arr = bucket[off:off + nbytes].view(dtype)
                    if dst is not None:
                        dst[...] = arr
                        arr = dst
                bufs.append(arr)
            inc.messages.append((h, bufs))
        return inc

    def close(self):
        """Stop the thread once what is queued has been sent (at most 5 s)."""
        self._closed.set()
        self.wake.set()
        self.thread.join(timeout=5)
