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
- :func:`split_net` reads a serialised NetParameter (current format, ``layer`` fields) without
  handing the blob values to protobuf: the bytes are scanned, the packed value fields cut out
  (kept as ``numpy.frombuffer`` views of the file's bytes) and the small rest parsed.
  :func:`split_blob_field` does the same for a message's repeated BlobProto field (a
  SolverState's history).
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


def field_view(bp, name):
    """The values of BlobProto float field ``name`` as a read-only 1-d array over the serialised
    message (little-endian float32 / float64; None when empty). Copy it, or assign it into a blob."""
    values = getattr(bp, name)
    if not len(values):
        return None
    wire_dtype = np.dtype("<f8" if name.startswith("double") else "<f4")
    buf = bp.SerializeToString()
    found = _payload(buf, FIELDS[name])
    if found is None or found[1] != len(values) * wire_dtype.itemsize:
        return np.asarray(values, dtype=wire_dtype)
    off, n = found
    return np.frombuffer(buf, wire_dtype, n // wire_dtype.itemsize, off)


def field_array(bp, name, dtype=None):
    """The values of BlobProto float field ``name`` as a new 1-d numpy array (None when empty)."""
    view = field_view(bp, name)
    if view is None:
        return None
    return view.astype(view.dtype.newbyteorder("=") if dtype is None else dtype)


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


def _fields(buf, lo, hi):
    """(field, wire, start, value_start, end) of each field of the message in ``buf[lo:hi]``."""
    pos = lo
    while pos < hi:
        start = pos
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = read_varint(buf, pos)
            yield field, wire, start, pos, pos
        elif wire == 1:
            pos += 8
            yield field, wire, start, pos - 8, pos
        elif wire == 5:
            pos += 4
            yield field, wire, start, pos - 4, pos
        elif wire == _LEN:
            n, pos = read_varint(buf, pos)
            pos += n
            if pos > hi:
                raise ValueError("truncated field")
            yield field, wire, start, pos - n, pos
        else:
            raise ValueError("wire type %d" % wire)
        if pos > hi:
            raise ValueError("truncated field")
    if pos != hi:
        raise ValueError("truncated field")


def _split_blob(buf, lo, hi):
    """(BlobProto bytes without its packed values, {field name: little-endian view})."""
    names = {n: name for name, n in FIELDS.items()}
    kept, values = [], {}
    for field, wire, start, vlo, end in _fields(buf, lo, hi):
        if field in names and wire == _LEN:
            dt = "<f8" if names[field].startswith("double") else "<f4"
            n = (end - vlo) // np.dtype(dt).itemsize
            values.setdefault(names[field], []).append(np.frombuffer(buf, dt, n, vlo))
        else:
            kept.append(buf[start:end])
    out = {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in values.items()}
    return b"".join(kept), out


def split_net(buf):
    """``(stripped NetParameter bytes, {(layer index, blob index): {field: view}})`` for a
    serialised NetParameter whose layers are ``layer`` (100) fields; None for V0/V1 nets
    (``layers``) or bytes that do not scan, which the caller parses the ordinary way."""
    buf = memoryview(buf)
    out, values, li = [], {}, 0
    try:
        for field, wire, start, vlo, end in _fields(buf, 0, len(buf)):
            if field == 2 and wire == _LEN:
                return None                      # V1 ``layers``: the upgrade path copies blobs
            if field != NET_LAYER or wire != _LEN:
                out.append(buf[start:end])
                continue
            body, bi = [], 0
            for f, w, s, lo, e in _fields(buf, vlo, end):
                if f == LAYER_BLOBS and w == _LEN:
                    blob, vals = _split_blob(buf, lo, e)
                    values[(li, bi)] = vals
                    body += [_tag(LAYER_BLOBS), varint(len(blob)), blob]
                    bi += 1
                else:
                    body.append(buf[s:e])
            body = b"".join(body)
            out += [_tag(NET_LAYER), varint(len(body)), body]
            li += 1
    except (ValueError, IndexError):
        return None
    return b"".join(out), values


def split_blob_field(buf, number):
    """``(stripped bytes, [{field: view}])`` for a message with a repeated BlobProto field
    ``number`` (SolverState.history is 3): the BlobProtos' packed values cut out, in order; None
    when the bytes do not scan."""
    buf = memoryview(buf)
    out, values = [], []
    try:
        for field, wire, start, vlo, end in _fields(buf, 0, len(buf)):
            if field == number and wire == _LEN:
                blob, vals = _split_blob(buf, vlo, end)
                values.append(vals)
                out += [_tag(number), varint(len(blob)), blob]
            else:
                out.append(buf[start:end])
    except (ValueError, IndexError):
        return None
    return b"".join(out), values


#: NVCaffe's ``Type`` enum -> the numpy dtype of BlobProto ``raw_data`` / ``raw_diff`` bytes
#: (native little-endian, as NVCaffe copies them).
_RAW_DTYPES = {0: "<f8", 1: "<f4", 2: "<f2"}


def raw_blob_values(proto, diff=False):
    """The values of an NVCaffe BlobProto stored as raw bytes (fp16 / fp32 / fp64 caffemodels),
    or None when the proto has none. Raises ValueError for an unknown type or a wrong size."""
    field = "raw_diff" if diff else "raw_data"
    if not proto.HasField(field):
        return None
    kind = getattr(proto, field + "_type")
    if kind not in _RAW_DTYPES:
        raise ValueError("BlobProto %s_type %d is not a float type" % (field, kind))
    raw = getattr(proto, field)
    dtype = np.dtype(_RAW_DTYPES[kind])
    if len(raw) % dtype.itemsize:
        raise ValueError("BlobProto %s holds %d bytes, not a multiple of %d"
                         % (field, len(raw), dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype)
