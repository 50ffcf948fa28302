"""The checkpoint file format (caffepy.dist.checkpoint has the schedule, the manifest and
resume): format 2 is ``CPYCKPT2``, the header length (uint64, little-endian), the header (a
DistCheckpoint whose DistSlices hold no values but ``raw_offset`` / ``raw_length`` /
``raw_dtype`` / ``raw_history``), then every slice's values and history arrays as raw
little-endian buffers, read back with ``numpy.frombuffer`` after the header's offsets and sizes
are checked against the file. Format 1 (one DistCheckpoint, values as BlobProto float lists) is
still read. :class:`Slice` is a DistSlice header with its arrays."""
import struct

import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2, io as proto_io, packed

MAGIC = b"CPYCKPT2"
FORMAT = 2
MAX_HISTORY = 16      # history arrays of one slice (solvers keep at most 2)


class Slice(object):
    """A DistSlice header (``msg``; its fields read and set through this object) and its arrays."""

    def __init__(self, msg, values, history):
        object.__setattr__(self, "msg", msg)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "history", list(history))

    def __getattr__(self, name):
        return getattr(self.msg, name)

    def __setattr__(self, name, value):
        setattr(self.msg, name, value)


def make_slice(name, p, k, offset, version, values, history=(), count=None, shape=None):
    s = caffe_pb2.DistSlice()
    s.name, s.param, s.slice, s.offset, s.version = name, p, k, offset, version
    s.count = int(values.size if count is None else count)
    if shape is not None:
        s.shape.dim.extend(shape)
    return Slice(s, values, history)


def _le(arr):
    arr = np.asarray(arr)
    return np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).reshape(-1)


def encode(ck, slices):
    """Chunks of a format-2 file: ``ck`` (a DistCheckpoint without slices) with ``slices``."""
    payload, offset = [], 0
    for s in slices:
        arrays = [_le(s.values)] + [_le(h) for h in s.history]
        msg = ck.slices.add()
        msg.CopyFrom(s.msg)
        msg.raw_offset, msg.raw_length = offset, arrays[0].size
        msg.raw_dtype, msg.raw_history = arrays[0].dtype.str, len(arrays) - 1
        for a in arrays:
            if a.size != arrays[0].size or a.dtype != arrays[0].dtype:
                raise CaffeError("checkpoint slice %s: history arrays differ from the values" % s.name)
            payload.append(memoryview(a).cast("B"))
            offset += a.nbytes
    header = ck.SerializeToString()
    return [MAGIC, struct.pack("<Q", len(header)), header] + payload


def read_slices(path):
    """(DistCheckpoint header, [(slice msg, values, [history])]) of a format 2 or 1 file."""
    raw = proto_io._read_bytes(path)        # a one-line error where it cannot be read
    ck = caffe_pb2.DistCheckpoint()
    out = []
    if raw[:8] == MAGIC:
        if len(raw) < 16:
            raise CaffeError("%s: truncated checkpoint file (%d bytes)" % (path, len(raw)))
        n = struct.unpack("<Q", raw[8:16])[0]
        proto_io.parse_binary(raw[16:16 + n], ck, path)
        base = 16 + n
        for s in ck.slices:
            dt = _slice_dtype(s.raw_dtype or "<f4", path, s.name)
            if not 0 <= s.raw_history <= MAX_HISTORY:
                raise CaffeError("%s: slice %s declares %d history arrays (at most %d)"
                                 % (path, s.name, s.raw_history, MAX_HISTORY))
            arrays = []
            for i in range(1 + s.raw_history):
                lo = base + s.raw_offset + i * s.raw_length * dt.itemsize
                if lo + s.raw_length * dt.itemsize > len(raw):
                    raise CaffeError("%s: truncated checkpoint file (slice %s needs %d bytes, the "
                                     "file has %d)" % (path, s.name, lo + s.raw_length * dt.itemsize,
                                                       len(raw)))
                arrays.append(np.frombuffer(raw, dt, s.raw_length, lo))
            out.append((s, arrays[0], arrays[1:]))
        return ck, out
    proto_io.parse_binary(raw, ck, path)          # format 1: values in BlobProtos
    for s in ck.slices:
        out.append((s, _legacy_values(s.data), [_legacy_values(h) for h in s.history]))
    return ck, out


def _slice_dtype(code, path, name):
    """The numpy dtype of a slice's raw values: a number type, or a one-line error."""
    try:
        dt = np.dtype(code)
    except (TypeError, ValueError, SyntaxError):     # (numpy parses some strings as Python)
        dt = None
    if dt is None or dt.kind not in "fiub" or dt.itemsize == 0:
        raise CaffeError("%s: slice %s has raw_dtype %r, not a number type" % (path, name, code))
    return dt


def _legacy_values(bp):
    for name in ("double_data", "data"):
        values = packed.field_array(bp, name)
        if values is not None:
            return values
    return np.zeros(0, np.float32)


def read_file(path):
    """The DistCheckpoint header of a checkpoint file (slices without values)."""
    return read_slices(path)[0]
