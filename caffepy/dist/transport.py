"""One transport interface: send / receive / probe a DistHeader (protobuf) plus numpy buffers.

A message is ``(header, buffers)``: ``header`` a ``caffe_pb2.DistHeader`` (kind, src, dst and the
fields its kind uses, below: one meaning per field), ``buffers`` a list of 1-d numpy arrays. The
engines describe the buffers (dtype, size) in their own frame, outside the header. Nothing is
pickled. Each role holds an :class:`Endpoint` (its id from :mod:`topology`): ``send(dst, header,
buffers)``, ``recv(timeout)`` (raises :class:`TransportTimeout`), ``probe()``. A sender must not
write to a buffer after sending it (the in-process engine hands the same array over: zero copy).

Engines (:class:`Engine` subclasses) own the inboxes (:class:`Inbox`) of the endpoints that live in
their process and deliver to the others: ``inproc`` (threads and queues), ``mpi`` (mpi4py; one
process per rank). A receiver may name where a message's first buffer should land
(:meth:`Engine.set_target`): an engine that receives from the wire writes it there directly.
"""
import collections
import os
import queue
import threading
import time

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2

KIND_NAMES = {}        # DistHeader.kind -> name: the one registry of message kinds


def register_kind(name, number):
    """Register a message kind (``DistHeader.kind``); a number or a name taken twice is an error."""
    taken = {v: k for k, v in KIND_NAMES.items()}
    if KIND_NAMES.get(number, name) != name or taken.get(name, number) != number:
        raise CaffeError("message kind %s = %d clashes with the registered %s = %d"
                         % (name, number, KIND_NAMES.get(number, name), taken.get(name, number)))
    KIND_NAMES[number] = name
    return number


# The core kinds. What each header field means per kind (fields not named are unset; a field has one
# meaning for every kind that sets it):
#   INIT     param, slice, offset: first values of a slice (worker 0 -> servers; routed: replicas)
#   GRAD     param, step[, slice, offset]: a gradient (worker -> stub: whole param; stub -> server)
#   PARAM    param, slice, offset, version (stub -> worker: flag 1 = param complete, version = its
#            new version), step = slowest group's clock
#   READY    step, flag (1 = final barrier), text (file=..;compute=..;wait=..;steps=..;stale=..)
#   GO       step;  CKPT step;  WRITTEN step, text = file, lr_step
#   PULL     step;  SLICE param, slice, offset, version (flag 1: a table shard, slice = its index)
#   PULLED   staleness (the largest the server answered with), lr_step
#   SYNC     param, slice (param -1: flush marker);  FLUSH / FLUSHED / STOP / DONE: none
#   ERROR    text;  CLIPNORM  group (the update key's group, -1: BSP), step, server (sender's index)
#   HEARTBEAT (kept for numbering; liveness under MPI is the watchdog's, not a message kind)
#   PREEMPT  text = the signal (a rank that got it -> coordinator; coordinator -> workers: "at
#            which step boundary can you stop?");  CLOCK step (worker -> coordinator: that
#            boundary);  STOPAT step (coordinator -> workers: the step every worker stops at)
# (lr_step = the server's lr-policy current_step. Headers are never written to disk.)
(INIT, GRAD, PARAM, READY, GO, CKPT, WRITTEN, PULL, SLICE, DONE, STOP, ERROR, HEARTBEAT, SYNC, FLUSH,
 FLUSHED, PULLED, CLIPNORM) = [register_kind(n, i) for i, n in enumerate(
    ("INIT GRAD PARAM READY GO CKPT WRITTEN PULL SLICE DONE STOP ERROR HEARTBEAT SYNC FLUSH "
     "FLUSHED PULLED CLIPNORM").split(), 1)]
PREEMPT, CLOCK, STOPAT = [register_kind(n, i) for i, n in enumerate(("PREEMPT", "CLOCK", "STOPAT"), 40)]


class TransportTimeout(CaffeError):
    """No message arrived within the timeout."""


def header(kind, **fields):
    return caffe_pb2.DistHeader(kind=kind, **fields)


_new_header = caffe_pb2.DistHeader


def _flat(b):
    if type(b) is np.ndarray and b.ndim == 1 and b.flags.c_contiguous:
        return b
    return np.ascontiguousarray(b).reshape(-1)


class Inbox(object):
    """One consumer's message queue: ``put`` from any thread is an append (a waiting consumer is
    woken); ``get(timeout)`` raises ``queue.Empty`` after ``timeout`` s (None: no limit)."""

    def __init__(self):
        self.items = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.waiting = False

    def put(self, item):
        self.items.append(item)
        if self.waiting:
            with self.cond:
                self.cond.notify()

    def get_nowait(self):
        try:
            return self.items.popleft()
        except IndexError:
            raise queue.Empty

    def get(self, timeout=None):
        items = self.items
        if items:
            return items.popleft()
        end = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            self.waiting = True        # a put after this sees it; one before it left an item
            try:
                while not items:
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        raise queue.Empty
                    self.cond.wait(left)
                return items.popleft()
            finally:
                self.waiting = False

    def empty(self):
        return not self.items

    def qsize(self):
        return len(self.items)


class Stats(object):
    """Bytes and messages an engine sent to other endpoints (headers included)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bytes = 0
        self.messages = 0

    def add(self, h, buffers):
        n = h.ByteSize()
        for b in buffers:
            n += b.nbytes
        with self.lock:
            self.bytes += n
            self.messages += 1


class Engine(object):
    """Inboxes for local endpoints; ``deliver`` routes a message to its destination."""

    name = None

    def __init__(self, topology, local_endpoints):
        self.topology = topology
        self.inboxes = {ep: Inbox() for ep in local_endpoints}
        self.stats = Stats()
        self.targets = {}

    def endpoint(self, ep):
        if ep not in self.inboxes:
            raise CaffeError("endpoint %d (%s) does not live in this process"
                             % (ep, self.topology.describe(ep)))
        return Endpoint(self, ep)

    def deliver(self, h, buffers):
        raise NotImplementedError

    def set_target(self, ep, target):
        """``target(header, dtype, size)`` -> a writable contiguous 1-d array of that dtype and size
        to receive the first buffer of a message for local endpoint ``ep`` into, or None. An engine
        that receives from the wire writes there directly and hands that array over as the buffer
        (called from whichever thread makes the engine's receive calls; None removes it)."""
        if target is None:
            self.targets.pop(ep, None)
        else:
            self.targets[ep] = target

    def receive(self, inbox, timeout):
        """The next message of a local inbox (``queue.Empty`` after ``timeout`` s)."""
        return inbox.get(timeout=timeout)

    def host_compute_threads(self, local_workers):
        """Workers computing at once on this host (for :func:`caffepy.math.blas.budget`)."""
        return local_workers

    def computing(self, who, on):
        """A local worker ``who`` starts (``on``) or stops computing: an engine whose threads poll
        keeps off the core meanwhile (the worker drives progress with :meth:`progress`)."""

    def progress(self):
        """One cheap round of communication progress from a computing thread (nothing to do for an
        engine without a wire)."""

    def close(self):
        pass


class Endpoint(object):
    """One role's address: send / recv / probe."""

    def __init__(self, engine, ep):
        self.engine = engine
        self.id = ep
        self.inbox = engine.inboxes[ep]

    def send(self, dst, h, buffers=()):
        out = _new_header()
        out.CopyFrom(h)
        out.src = self.id
        out.dst = dst
        buffers = [_flat(b) for b in buffers]
        self.engine.stats.add(out, buffers)
        self.engine.deliver(out, buffers)

    def recv(self, timeout=None, what="a message"):
        try:
            return self.engine.receive(self.inbox, timeout)
        except queue.Empty:
            raise TransportTimeout("%s: no %s within %g s"
                                   % (self.engine.topology.describe(self.id), what, timeout))

    def probe(self):
        return not self.inbox.empty()

    def post(self, h, buffers=()):
        """Put a message into this endpoint's own inbox (local wake-ups)."""
        self.inbox.put((h, list(buffers)))


def affinity_cores():
    """Cores this process may run on (its affinity; the machine's where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def warn_oversubscribed(hosts, rank):
    """The first rank of a host warns when that host runs more ranks than it has cores."""
    here = hosts[rank]
    if hosts.index(here) != rank:
        return
    n, cores = hosts.count(here), os.cpu_count() or 1
    if n > cores:
        from ..log import warning
        warning("mpi.py", "host %s runs %d ranks on %d cores: they will wait for each other "
                "(fewer ranks per host, or server_worker_separate false)" % (here, n, cores))
