"""One transport interface: send / receive / probe a DistHeader (protobuf) plus numpy buffers.

A message is ``(header, buffers)``: ``header`` a ``caffe_pb2.DistHeader`` (kind, src, dst, param,
slice, step, version, flag, offset, text; ``dtype`` / ``size`` describe the buffers, filled in by
the engine), ``buffers`` a list of 1-d numpy arrays. Nothing is pickled. Each role holds an
:class:`Endpoint` (its id from :mod:`topology`): ``send(dst, header, buffers)``,
``recv(timeout)`` (raises :class:`TransportTimeout`), ``probe()``. A sender must not write to a
buffer after sending it (the in-process engine hands the same array over: zero copy).

Engines (:class:`Engine` subclasses) own the inboxes of the endpoints that live in their process
and deliver to the others: ``inproc`` (threads and queues), ``mpi`` (mpi4py; one process per rank).
"""
import queue
import threading

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


# The core kinds. What each header field means per kind (fields not named are unset):
#   INIT     param, slice, offset: first values of a slice (worker 0 -> servers; routed: replicas)
#   GRAD     param, step[, slice, offset]: a gradient (worker -> stub: whole param; stub -> server)
#   PARAM    param, slice, offset, version (stub -> worker: flag 1 = param complete, version = its
#            new version), step = slowest group's clock
#   READY    step, flag (1 = final barrier), text (file=..;compute=..;wait=..;steps=..;stale=..)
#   GO       step;  CKPT step;  WRITTEN step, text = file, version = lr-policy current_step
#   PULL     step;  SLICE param, slice, offset, version (flag 1: a table shard, slice = its index)
#   PULLED   version = largest staleness seen, step = lr-policy current_step
#   SYNC     param, slice (param -1: flush marker);  FLUSH / FLUSHED / STOP / DONE: none
#   ERROR    text;  CLIPNORM  slice = update key's group, step, version = sender's server index
#   HEARTBEAT (kept for numbering; liveness under MPI is the watchdog's, not a message kind)
(INIT, GRAD, PARAM, READY, GO, CKPT, WRITTEN, PULL, SLICE, DONE, STOP, ERROR, HEARTBEAT, SYNC, FLUSH,
 FLUSHED, PULLED, CLIPNORM) = [register_kind(n, i) for i, n in enumerate(
    ("INIT GRAD PARAM READY GO CKPT WRITTEN PULL SLICE DONE STOP ERROR HEARTBEAT SYNC FLUSH "
     "FLUSHED PULLED CLIPNORM").split(), 1)]


class TransportTimeout(CaffeError):
    """No message arrived within the timeout."""


def header(kind, **fields):
    h = caffe_pb2.DistHeader()
    h.kind = kind
    for k, v in fields.items():
        setattr(h, k, v)
    return h


def _copy(h):
    out = caffe_pb2.DistHeader()
    out.CopyFrom(h)
    return out


def describe_buffers(h, buffers):
    del h.dtype[:]
    del h.size[:]
    h.dtype.extend(b.dtype.str for b in buffers)
    h.size.extend(int(b.size) for b in buffers)
    return h


class Stats(object):
    """Bytes and messages an engine sent to other endpoints (headers included)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bytes = 0
        self.messages = 0

    def add(self, h, buffers):
        n = h.ByteSize() + sum(int(b.nbytes) for b in buffers)
        with self.lock:
            self.bytes += n
            self.messages += 1


class Engine(object):
    """Inboxes for local endpoints; ``deliver`` routes a message to its destination."""

    name = None

    def __init__(self, topology, local_endpoints):
        self.topology = topology
        self.inboxes = {ep: queue.Queue() for ep in local_endpoints}
        self.stats = Stats()

    def endpoint(self, ep):
        if ep not in self.inboxes:
            raise CaffeError("endpoint %d (%s) does not live in this process"
                             % (ep, self.topology.describe(ep)))
        return Endpoint(self, ep)

    def deliver(self, h, buffers):
        raise NotImplementedError

    def receive(self, inbox, timeout):
        """The next message of a local inbox (``queue.Empty`` after ``timeout`` s)."""
        return inbox.get(timeout=timeout)

    def host_compute_threads(self, local_workers):
        """Workers computing at once on this host (for :func:`caffepy.blas.budget`)."""
        return local_workers

    def close(self):
        pass


class Endpoint(object):
    """One role's address: send / recv / probe."""

    def __init__(self, engine, ep):
        self.engine = engine
        self.id = ep
        self.inbox = engine.inboxes[ep]

    def send(self, dst, h, buffers=()):
        h = _copy(h)
        h.src = self.id
        h.dst = dst
        buffers = [np.ascontiguousarray(b).reshape(-1) for b in buffers]
        describe_buffers(h, buffers)
        self.engine.stats.add(h, buffers)
        self.engine.deliver(h, buffers)

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
