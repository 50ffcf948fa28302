"""The MPI engine's wire format: message entries of a header message, and pooled receive arrays.

A header message (:mod:`caffepy.dist.mpi`) is ``u32 n`` (bytes of the entries) and then, per message,
``u32 header bytes, u16 buffer count``, per buffer ``(4s dtype.str, i64 size)``, and the serialized
``DistHeader``; all little-endian. The buffers' bytes follow in a bucket (8-byte aligned offsets) or
as messages of their own: :func:`encode` / :func:`decode` are the entries' two directions.
"""
import os
import re
import struct
import sys

import numpy as np

from google.protobuf import message as _message

from ..errors import CaffeError
from ..proto import caffe_pb2

LEN = struct.Struct("<I")
BIG = 64 * 1024               # bytes: buffers this large travel alone, zero copy
HEADER_MAX = 256 * 1024       # bytes of one batch of headers (a batch is cut before that)


def align(n):
    return (n + 7) & ~7


_MSG = struct.Struct("<IH")          # header bytes, buffer count
_BUF = struct.Struct("<4sq")         # dtype.str, size
_DTYPES = {}                         # dtype.str as bytes -> np.dtype
_CODES = {}                          # np.dtype -> dtype.str as bytes
PAD = [b"\0" * i for i in range(8)]


def _dtype(code):
    dt = _DTYPES.get(code)
    if dt is None:
        dt = _DTYPES[code] = np.dtype(code.rstrip(b"\0").decode("ascii"))
    return dt


def encode(raw, buffers):
    """One message entry of a header message: sizes, buffer descriptions, the DistHeader bytes."""
    out = [_MSG.pack(len(raw), len(buffers))]
    for b in buffers:
        code = _CODES.get(b.dtype)
        if code is None:
            code = _CODES[b.dtype] = b.dtype.str.encode("ascii")
        out.append(_BUF.pack(code, b.size))
    out.append(raw)
    return b"".join(out)


def decode(view, pos):
    """(DistHeader, [(dtype, size)], next position) of the entry at ``pos`` of a header message."""
    n, nbuf = _MSG.unpack_from(view, pos)
    pos += _MSG.size
    descr = []
    for _ in range(nbuf):
        code, size = _BUF.unpack_from(view, pos)
        descr.append((_dtype(code), size))
        pos += _BUF.size
    h = caffe_pb2.DistHeader()
    h.ParseFromString(view[pos:pos + n])
    return h, descr, pos + n


def cut_batches(entries):
    """(start, end) of consecutive runs of ``entries`` whose header message fits ``HEADER_MAX``
    (an entry too big alone makes a run of its own; :func:`pack_batch` refuses it)."""
    start = 0
    while start < len(entries):
        end, total = start, 8
        while end < len(entries) and (end == start or total + len(entries[end]) <= HEADER_MAX):
            total += len(entries[end])
            end += 1
        yield start, end
        start = end


def pack_batch(entries, buffer_lists):
    """(header message, bucket or None, [big buffers]) of one batch: the entries, and every buffer
    under ``BIG`` bytes at an 8-byte aligned offset, riding in the header message when it all
    fits ``HEADER_MAX`` (else in a bucket message of its own); bigger buffers travel alone."""
    heads = b"".join(entries)
    if 8 + len(heads) > HEADER_MAX:
        raise CaffeError("a message header of %d bytes exceeds %d" % (len(heads), HEADER_MAX))
    start = align(4 + len(heads))
    small, big, off = [], [], 0
    for buffers in buffer_lists:
        for b in buffers:
            n = b.nbytes
            if n >= BIG:
                big.append(b)
            elif n:             # (empty buffers take no bytes: no bucket when all are empty)
                pad = align(n) - n
                small.append(b.data)
                if pad:
                    small.append(PAD[pad])
                off += n + pad
    frame = [LEN.pack(len(heads)), heads]
    if small and start + off <= HEADER_MAX:       # small data rides in the header message
        frame.append(PAD[start - 4 - len(heads)])
        frame += small
        small = None
    return b"".join(frame), (b"".join(small) if small else None), big   # (one copy of each small)


def _memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def _checked_dtype(code, who):
    """A buffer's dtype from its 4-byte code: a number type, or a one-line error naming the peer."""
    dt = _DTYPES.get(code)
    if dt is not None:
        return dt
    text = code.rstrip(b"\0").decode("latin-1")
    dt = None
    if re.match(r"[<>|=]?[a-zA-Z]\d*$", text):
        try:
            dt = np.dtype(text)
        except (TypeError, ValueError, SyntaxError):
            pass
    if dt is None or dt.kind not in "biuf" or dt.itemsize == 0:
        raise CaffeError("%s: bad message header: buffer type %r is not a number type" % (who, code))
    _DTYPES[code] = dt
    return dt


def plan_batch(raw, source=None):
    """The receiving side of :func:`pack_batch`: ([(DistHeader, [(dtype, size, nbytes, bucket
    offset or None)])], bucket bytes, offset of an inline bucket in ``raw``). Every length, type
    and size the peer (rank ``source``) declares is checked before anything is allocated for it;
    a bad header is a one-line CaffeError naming the rank."""
    who = "rank %s" % source if source is not None else "peer"
    view = memoryview(raw)
    if len(view) < 4:
        raise CaffeError("%s: bad message header: %d bytes" % (who, len(view)))
    end = 4 + LEN.unpack_from(raw, 0)[0]
    if end > len(view):
        raise CaffeError("%s: bad message header: declares %d bytes of entries, holds %d"
                         % (who, end - 4, len(view) - 4))
    pos, heads, bucket_size, total = 4, [], 0, 0
    limit = _memory_bytes()
    while pos < end:
        if pos + _MSG.size > end:
            raise CaffeError("%s: bad message header: entry cut at byte %d" % (who, pos))
        n, nbuf = _MSG.unpack_from(view, pos)
        pos += _MSG.size
        if pos + nbuf * _BUF.size + n > end:
            raise CaffeError("%s: bad message header: entry of %d buffers and %d header bytes "
                             "overruns the message" % (who, nbuf, n))
        plan = []
        for _ in range(nbuf):
            code, size = _BUF.unpack_from(view, pos)
            pos += _BUF.size
            dtype = _checked_dtype(code, who)
            nbytes = size * dtype.itemsize
            total += max(nbytes, 0)
            if size < 0 or total > limit:
                raise CaffeError("%s: bad message header: buffer of %d %s values (this host has %d "
                                 "bytes of memory)" % (who, size, dtype, limit))
            if nbytes >= BIG or nbytes == 0:
                plan.append((dtype, size, nbytes, None))
            else:
                plan.append((dtype, size, nbytes, bucket_size))
                bucket_size = align(bucket_size + nbytes)
        h = caffe_pb2.DistHeader()
        try:
            h.ParseFromString(view[pos:pos + n])
        except _message.DecodeError:
            raise CaffeError("%s: bad message header: not a DistHeader" % who)
        pos += n
        heads.append((h, plan))
    if bucket_size and len(view) > align(end) and len(view) < align(end) + bucket_size:
        raise CaffeError("%s: bad message header: inline bucket of %d bytes, %d sent"
                         % (who, bucket_size, len(view) - align(end)))
    return heads, bucket_size, align(end)


class Pool(object):
    """Receive buffers kept for reuse: an array whose only reference is the pool's (the receiver
    dropped every message and view of it) is handed out again for the same byte count."""

    def __init__(self, per_size=8, total=512 << 20):
        self.free = {}
        self.per_size, self.total, self.held = per_size, total, 0

    def take(self, nbytes):
        arrays = self.free.setdefault(nbytes, [])
        for a in arrays:
            if sys.getrefcount(a) <= 3:         # the list, the loop variable, the argument
                return a
        a = np.empty(nbytes, np.uint8)
        if len(arrays) < self.per_size and self.held + nbytes <= self.total:
            arrays.append(a)
            self.held += nbytes
        return a
