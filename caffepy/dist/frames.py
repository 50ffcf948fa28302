"""The MPI engine's wire format: message entries of a header message, and pooled receive arrays.

A header message (:mod:`caffepy.dist.mpi`) is ``u32 n`` (bytes of the entries) and then, per message,
``u32 header bytes, u16 buffer count``, per buffer ``(4s dtype.str, i64 size)``, and the serialized
``DistHeader``; all little-endian. The buffers' bytes follow in a bucket (8-byte aligned offsets) or
as messages of their own: :func:`encode` / :func:`decode` are the entries' two directions.
"""
import struct
import sys

import numpy as np

from ..proto import caffe_pb2

LEN = struct.Struct("<I")


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
