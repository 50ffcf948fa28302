"""An ONNX ModelProto as bytes without the ``onnx`` package (protobuf wire format, written here).

Inference mode's onnxruntime engine (caffepy.infer.ort) hands onnxruntime the serialised model,
and onnxruntime is a dependency of caffepy while ``onnx`` is an extra; so the graph records of
:class:`caffepy.onnx.builder.Graph` are encoded directly. Only the fields caffepy's converters
emit are written; the field numbers are those of onnx.proto:

    ModelProto      ir_version 1, producer_name 2, producer_version 3, graph 7, opset_import 8,
                    metadata_props 14
    GraphProto      node 1, name 2, initializer 5, input 11, output 12
    NodeProto       input 1, output 2, name 3, op_type 4, attribute 5
    AttributeProto  name 1, f 2, i 3, s 4, t 5, floats 7, ints 8, strings 9, type 20
    TensorProto     dims 1, data_type 2, name 8, raw_data 9 (little-endian); a tensor the
                    caller hands onnxruntime itself (``external``) has no data, only
                    data_location 14 = EXTERNAL and external_data 13 {location: "memory"}
    ValueInfoProto  name 1, type 2 -> TypeProto.tensor_type 1 -> elem_type 1, shape 2
                    -> TensorShapeProto.dim 1 -> dim_value 1 | dim_param 2

``tests/infer/test_ort.py`` parses the bytes with ``onnx`` (where installed) against
``Graph.to_model``.
"""
import struct

import numpy as np

from ..proto.packed import varint

# TensorProto.DataType
DTYPES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3,
          np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
          np.dtype(np.float64): 11}
FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS = 1, 2, 3, 4, 6, 7, 8   # AttributeType


def _varint(n):
    return varint(n & ((1 << 64) - 1))      # negative int64: two's complement, 10 bytes


def _key(field, wire):
    return _varint((field << 3) | wire)


def _int(field, n):
    return _key(field, 0) + _varint(int(n))


def _bytes(field, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return _key(field, 2) + _varint(len(data)) + data


def _float(field, x):
    return _key(field, 5) + struct.pack("<f", float(x))


def tensor(name, array, external=False):
    """TensorProto of a numpy array (raw little-endian data, or none when ``external``: see
    module doc)."""
    a = np.ascontiguousarray(array)
    if a.dtype not in DTYPES:
        raise ValueError("tensor '%s': dtype %s has no ONNX encoding here" % (name, a.dtype))
    body = b"".join(_int(1, d) for d in a.shape)
    body += _int(2, DTYPES[a.dtype]) + _bytes(8, name)
    if external:
        return body + _bytes(13, _bytes(1, "location") + _bytes(2, "memory")) + _int(14, 1)
    return body + _bytes(9, a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())


def _is_int(v):
    return isinstance(v, (bool, int, np.integer))


def attribute(name, value):
    """AttributeProto, its type inferred as onnx.helper.make_attribute does."""
    body = _bytes(1, name)
    if _is_int(value):
        return body + _int(3, value) + _int(20, INT)
    if isinstance(value, (float, np.floating)):
        return body + _float(2, value) + _int(20, FLOAT)
    if isinstance(value, (str, bytes)):
        return body + _bytes(4, value) + _int(20, STRING)
    if isinstance(value, np.ndarray):
        return body + _bytes(5, tensor("", value)) + _int(20, TENSOR)
    values = list(value)
    if values and all(_is_int(v) for v in values):
        return body + b"".join(_int(8, v) for v in values) + _int(20, INTS)
    if values and all(isinstance(v, (int, float, np.integer, np.floating)) for v in values):
        return body + b"".join(_float(7, v) for v in values) + _int(20, FLOATS)
    if values and all(isinstance(v, (str, bytes)) for v in values):
        return body + b"".join(_bytes(9, v) for v in values) + _int(20, STRINGS)
    raise ValueError("attribute '%s': cannot encode %r" % (name, value))


def node(op, inputs, outputs, name, attrs):
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, name) + _bytes(4, op)
    return body + b"".join(_bytes(5, attribute(k, v)) for k, v in sorted(attrs.items())
                            if v is not None)


def value_info(name, dims, elem=1):
    """ValueInfoProto of a tensor; ``dims`` ints or strings (symbolic), None: shape unknown."""
    tt = _int(1, elem)
    if dims is not None:
        shape = b"".join(_bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d))
                         for d in dims)
        tt += _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tt))


def model(graph, name, producer_version, ir_version, metadata=(), external=()):
    """The ModelProto bytes of a :class:`caffepy.onnx.builder.Graph`; ``external``: names of
    initializers written without their data (see module doc)."""
    g = b"".join(_bytes(1, node(*n)) for n in graph.nodes) + _bytes(2, name or "caffepy")
    g += b"".join(_bytes(5, tensor(nm, a, nm in external)) for nm, a in graph.initializers)
    g += b"".join(_bytes(11, value_info(nm, None if s is None else graph.dims(s)))
                  for nm, s in graph.inputs)
    g += b"".join(_bytes(12, value_info(nm, None if s is None else graph.dims(s)))
                  for nm, s in graph.outputs)
    out = _int(1, ir_version) + _bytes(2, "caffepy") + _bytes(3, producer_version)
    out += _bytes(7, g) + _bytes(8, _bytes(1, "") + _int(2, graph.opset))
    return out + b"".join(_bytes(14, _bytes(1, k) + _bytes(2, v)) for k, v in metadata)
