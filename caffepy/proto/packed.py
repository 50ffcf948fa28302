"""Blob data as packed bytes: BlobProto's float fields written and read without Python float lists.

BVLC declares ``BlobProto.data`` (5), ``diff`` (6), ``double_data`` (8) and ``double_diff`` (9)
``[packed = true]``: on the wire each is one length-delimited field holding the values as
little-endian float32 / float64. Filling such a field through protobuf's Python API
(``bp.data.extend(array)``) converts every value to a Python float and back (about 7 MB/s), and so
does reading it (``np.asarray(bp.data)``). Here the bytes are made and read directly:

- :func:`blob_chunks` encodes a BlobProto (shape, data, optional diff) as a list of byte chunks whose
  data chunk is a view of the array's memory (no copy); :func:`blobproto` parses those chunks into a
  message (protobuf's C parser copies the packed payload at memory speed).
- :func:`field_array` reads a packed field back as a numpy array: the message is serialised (C) and
  the field's payload taken with ``numpy.frombuffer``. Unpacked encodings (one tag per value, which
  proto2 parsers also accept) fall back to the slow path.
- :func:`net_chunks` encodes a whole NetParameter for ``Net.save`` / snapshots: each layer's
  LayerParameter without blobs (serialised by protobuf), then its blobs as :func:`blob_chunks`. Stock
  protobuf (and BVLC Caffe) parses the result into the same message ``Net.to_proto`` builds.
"""
import numpy as np

from . import caffe_pb2

FIELDS = {"data": 5, "diff": 6, "double_data": 8, "double_diff": 9}   # BlobProto field numbers
LAYER_BLOBS = 7          # LayerParameter.blobs
NET_LAYER = 100          # NetParameter.layer
_LEN = 2                 # wire type: length-delimited


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf, pos):
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _tag(number, wire=_LEN):
    return varint((number << 3) | wire)


def _le(arr, dtype):
    arr = np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<")).reshape(-1)
    return memoryview(arr).cast("B")


def blob_chunks(data, shape=None, diff=None, double=False, header=None):
    """Chunks of a serialised BlobProto: ``header`` (a BlobProto without values; default: one with
    ``shape``, else the array's shape), ``data`` and optionally ``diff`` as packed float32
    (``double``: float64 ``double_data`` / ``double_diff``)."""
    if header is None:
        header = caffe_pb2.BlobProto()
        header.shape.dim.extend(int(d) for d in (np.shape(data) if shape is None else shape))
    chunks = [header.SerializeToString()]
    names = ("double_data", "double_diff") if double else ("data", "diff")
    dtype = "<f8" if double else "<f4"
    for name, arr in zip(names, (data, diff)):
        if arr is None:
            continue
        view = _le(arr, dtype)
        if not len(view):
            continue
        chunks += [_tag(FIELDS[name]), varint(len(view)), view]
    return chunks


def chunks_len(chunks):
    return sum(len(c) for c in chunks)


def blobproto(data, shape=None, diff=None, double=False):
    """A BlobProto holding ``data`` (and ``diff``), filled at memory speed."""
    bp = caffe_pb2.BlobProto()
    bp.ParseFromString(b"".join(blob_chunks(data, shape, diff, double)))
    return bp


def _payload(buf, number):
    """(offset, length) of length-delimited field ``number`` in the serialised message, or None."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = read_varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            if field == number:
                return None          # unpacked: one tag per value
            pos += 4
        elif wire == _LEN:
            n, pos = read_varint(buf, pos)
            if field == number:
                return pos, n
            pos += n
        else:
            return None
    return None


def field_array(bp, name, dtype=None):
    """The values of BlobProto float field ``name`` as a new 1-d numpy array (None when empty)."""
    values = getattr(bp, name)
    if not len(values):
        return None
    wire_dtype = np.dtype("<f8" if name.startswith("double") else "<f4")
    dtype = wire_dtype.newbyteorder("=") if dtype is None else np.dtype(dtype)
    buf = bp.SerializeToString()
    found = _payload(buf, FIELDS[name])
    if found is None or found[1] != len(values) * wire_dtype.itemsize:
        return np.asarray(values, dtype=dtype)
    off, n = found
    return np.frombuffer(buf, wire_dtype, n // wire_dtype.itemsize, off).astype(dtype)


def net_chunks(net_param, layer_blobs):
    """Chunks of a serialised NetParameter: ``net_param`` (whose ``layer`` entries hold no blobs)
    with ``layer_blobs[i]`` (a list of blob chunk lists) appended to layer i."""
    head = caffe_pb2.NetParameter()
    head.CopyFrom(net_param)
    del head.layer[:]
    chunks = [head.SerializeToString()]
    for lp, blobs in zip(net_param.layer, layer_blobs):
        body = [lp.SerializeToString()]
        for bc in blobs:
            body += [_tag(LAYER_BLOBS), varint(chunks_len(bc))] + bc
        chunks += [_tag(NET_LAYER), varint(chunks_len(body))] + body
    return chunks
