"""NetSpec's reflection over caffe.proto: which ``*_param`` holds a layer type's settings, and
Python values (dicts, lists, numpy scalars, enum names) written into protobuf messages with
one-line :class:`NetSpecError` messages naming the layer and the field path.

The routing rules are described in :mod:`caffepy.netspec`, which re-exports the public names.
"""
import re

import numpy as np
from google.protobuf import descriptor as _desc
from google.protobuf import message as _message

from ..errors import CaffeError
from ..proto import caffe_pb2
from ..proto import is_repeated


class NetSpecError(CaffeError, ValueError):
    """A DSL layer with an unknown field or a value of the wrong type."""


class UnknownFieldError(NetSpecError, AttributeError):
    """A keyword that is no field of the layer's parameter message nor of LayerParameter."""


# layer types whose parameters live in a message not named after them
_ALIASES = {
    "Deconvolution": "convolution_param", "DepthwiseConvolution": "convolution_param",
    "ConvolutionDepthwise": "convolution_param", "Im2col": "convolution_param",
    "SoftmaxWithLoss": "softmax_param", "LSTM": "recurrent_param", "RNN": "recurrent_param",
    "Silence": None, "Split": None,
}


def _param_fields():
    return [f for f in caffe_pb2.LayerParameter.DESCRIPTOR.fields
            if f.name.endswith("_param") and f.message_type is not None]


def param_name_dict():
    """{message type name without 'Parameter': field name without '_param'} (pycaffe's table)."""
    table = {}
    for f in _param_fields():
        short = f.message_type.name[:-len("Parameter")] if f.message_type.name.endswith(
            "Parameter") else f.message_type.name
        table.setdefault(short, f.name[:-len("_param")])
    return table


_PARAM_NAMES = param_name_dict()
_BY_FIELD = {f.name[:-len("_param")].replace("_", "").lower(): f.name[:-len("_param")]
             for f in _param_fields()}


def _norm(name):
    return re.sub(r"[^0-9a-z]", "", name.lower())


def type_param_field(type_name, keys=()):
    """The LayerParameter field (e.g. 'convolution_param') holding ``type_name``'s settings, or None.

    ``keys`` (the non-LayerParameter keywords given) decide for types the tables do not know.
    """
    if type_name in _ALIASES:            # first: BVLC's LSTM (recurrent_param) is not caffe_ocr's Lstm
        return _ALIASES[type_name]
    if type_name in _PARAM_NAMES:
        return _PARAM_NAMES[type_name] + "_param"
    if _norm(type_name) in _BY_FIELD:
        return _BY_FIELD[_norm(type_name)] + "_param"
    keys = [k for k in keys if k not in caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name]
    if not keys:
        return None
    found = [f.name for f in _param_fields()
             if f.name != "transform_param" and all(k in f.message_type.fields_by_name for k in keys)]
    prefix = [f for f in found if _norm(type_name).startswith(_norm(f[:-len("_param")]))]
    if len(found) == 1 or len(prefix) == 1:
        return found[0] if len(found) == 1 else prefix[0]
    if type_name.endswith("Loss") and "loss_param" in found:
        return "loss_param"
    if not found:
        return None
    raise NetSpecError("L.%s: cannot tell which *_param holds %s (candidates: %s); pass e.g. "
                       "%s=dict(...)" % (type_name, ", ".join(sorted(keys)), ", ".join(found), found[0]))


def _plain(value):
    """numpy scalars/arrays and tuples -> Python values/lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return value


def _kind(field):
    if field.type == _desc.FieldDescriptor.TYPE_MESSAGE:
        return "message %s" % field.message_type.name
    if field.type == _desc.FieldDescriptor.TYPE_ENUM:
        return "enum %s (%s)" % (field.enum_type.name, ", ".join(v.name for v in field.enum_type.values))
    return {_desc.FieldDescriptor.CPPTYPE_INT32: "int", _desc.FieldDescriptor.CPPTYPE_INT64: "int",
            _desc.FieldDescriptor.CPPTYPE_UINT32: "int", _desc.FieldDescriptor.CPPTYPE_UINT64: "int",
            _desc.FieldDescriptor.CPPTYPE_FLOAT: "float", _desc.FieldDescriptor.CPPTYPE_DOUBLE: "float",
            _desc.FieldDescriptor.CPPTYPE_BOOL: "bool",
            _desc.FieldDescriptor.CPPTYPE_STRING: "string"}.get(field.cpp_type, "value")


def assign_proto(proto, name, value, where="?", prefix=None):
    """Set field ``name`` of message ``proto`` from a Python value (dicts, lists, scalars).

    ``where`` names the layer and ``prefix`` the path to ``proto`` for error messages.
    Raises :class:`NetSpecError`.
    """
    prefix = prefix or proto.DESCRIPTOR.name
    path = "%s.%s" % (prefix, name)
    field = proto.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        raise UnknownFieldError("%s: unknown field '%s' (%s is a %s)"
                                % (where, path, prefix, proto.DESCRIPTOR.name))
    value = _plain(value)
    if is_repeated(field):
        values = value if isinstance(value, list) else [value]
        target = getattr(proto, name)
        for i, v in enumerate(values):
            v = _plain(v)
            if field.type == _desc.FieldDescriptor.TYPE_MESSAGE:
                _fill_message(target.add(), v, where, "%s[%d]" % (path, i))
            else:
                _check_scalar(field, v, where, path)
                try:
                    target.append(v)
                except (TypeError, ValueError) as e:
                    raise _type_error(where, path, field, v, e)
    elif field.type == _desc.FieldDescriptor.TYPE_MESSAGE:
        _fill_message(getattr(proto, name), value, where, path)
    else:
        _check_scalar(field, value, where, path)
        try:
            setattr(proto, name, value)
        except (TypeError, ValueError) as e:
            raise _type_error(where, path, field, value, e)


def _check_scalar(field, value, where, path):
    if isinstance(value, (list, dict)):
        raise NetSpecError("%s: %s takes a single %s, got %s" % (where, path, _kind(field),
                                                                  type(value).__name__))
    if field.cpp_type == _desc.FieldDescriptor.CPPTYPE_BOOL and not isinstance(value, (bool, int)):
        raise NetSpecError("%s: %s takes a bool, got %r" % (where, path, value))


def _type_error(where, path, field, value, err):
    return NetSpecError("%s: %s takes %s, got %r (%s)" % (where, path, _kind(field), value,
                                                          type(value).__name__))


def _fill_message(msg, value, where, path):
    if isinstance(value, _message.Message):
        if value.DESCRIPTOR is not msg.DESCRIPTOR:
            raise NetSpecError("%s: %s takes a %s, got a %s" % (where, path, msg.DESCRIPTOR.name,
                                                                value.DESCRIPTOR.name))
        msg.CopyFrom(value)
        return
    if not isinstance(value, dict):
        raise NetSpecError("%s: %s is a message %s: give a dict, got %r"
                           % (where, path, msg.DESCRIPTOR.name, value))
    for k, v in value.items():
        assign_proto(msg, k, v, where, path)


def layer_fields(type_name, params, where=None):
    """A LayerParameter holding ``params`` routed as the module doc says (type not set)."""
    where = where or "L.%s" % type_name
    layer = caffe_pb2.LayerParameter()
    lp_fields = caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name
    sub_name = None
    plain_keys = [k for k in params if not k.endswith("param")]
    if plain_keys:
        sub_name = type_param_field(type_name, plain_keys)
    for k, v in params.items():
        if k.endswith("param") or sub_name is None:
            target = layer
        else:
            sub = getattr(layer, sub_name)
            target = sub if k in sub.DESCRIPTOR.fields_by_name else layer
        if target is layer and k not in lp_fields:
            owner = "%s nor LayerParameter" % sub_name if sub_name else "LayerParameter"
            raise UnknownFieldError("%s: unknown field '%s' (not in %s)" % (where, k, owner))
        assign_proto(target, k, v, where, sub_name if target is not layer else "layer")
    return layer
