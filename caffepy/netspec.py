"""The NetSpec DSL: write nets in Python, get a NetParameter (pycaffe's ``caffe.net_spec``).

::

    from caffepy import layers as L, params as P
    n = caffepy.NetSpec()
    n.data, n.label = L.DummyData(shape=[dict(dim=[64, 1, 28, 28]), dict(dim=[64])], ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, weight_filler=dict(type="xavier"))
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.relu1 = L.ReLU(n.pool1, in_place=True)
    n.loss = L.SoftmaxWithLoss(n.relu1, n.label)
    print(n.to_proto())

``L.<Type>(*bottoms, ntop=1, in_place=False, **fields)`` makes a layer. Each keyword is routed by
reflecting over the LayerParameter descriptor (caffe.proto, fork messages included, stays the one
source of truth): keys ending in ``param`` go to the LayerParameter itself; any other key goes to
the layer type's ``<type>_param`` when that message has it (found from the message type name, as
pycaffe's ``param_name_dict``; from the field name, e.g. ``ReLU6`` -> ``relu6_param``; from a small
alias table, e.g. ``Deconvolution`` -> ``convolution_param``; else from the one ``*_param``
message holding all the given keys), then to LayerParameter fields (``name``, ``loss_weight``,
``param``, ``include`` ...). Dicts become nested messages, lists repeated fields (a scalar given to a
repeated field becomes a one-element list), enums take ``P.Pooling.MAX`` or the name ``"MAX"``.
Unknown fields and values of the wrong type raise :class:`NetSpecError` (one line naming the layer
type and the field) when the layer is made, not when the net is written.

Naming follows pycaffe: a layer is named after its first top; tops are named by the NetSpec
attribute they are assigned to, else ``<Type><k>`` (k counting per type); ``in_place=True`` writes
the tops over the bottoms.
"""
import collections
import importlib
import re

import numpy as np
from google.protobuf import descriptor as _desc
from google.protobuf import message as _message

from .errors import CaffeError
from .proto import caffe_pb2

__all__ = ["NetSpec", "Top", "Function", "layers", "params", "to_proto", "param_name_dict",
           "NetSpecError", "assign_proto"]


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
    if type_name in _PARAM_NAMES:
        return _PARAM_NAMES[type_name] + "_param"
    if _norm(type_name) in _BY_FIELD:
        return _BY_FIELD[_norm(type_name)] + "_param"
    if type_name in _ALIASES:
        return _ALIASES[type_name]
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


def _is_repeated(field):
    return field.label == _desc.FieldDescriptor.LABEL_REPEATED


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
    if _is_repeated(field):
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


class Top(object):
    """One output blob of a layer (``fn``: the Function, ``n``: its top index)."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """A NetParameter with every layer needed to compute this top."""
        return to_proto(self)

    def _update(self, params):
        self.fn._update(params)

    def _to_proto(self, layers, names, autonames):
        return self.fn._to_proto(layers, names, autonames)

    def __repr__(self):
        return "<Top %d of %s>" % (self.n, self.fn.type_name)


class Function(object):
    """A layer: its type, its bottoms (Tops) and its keyword fields (validated at once)."""

    def __init__(self, type_name, inputs, params):
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Top):
                raise TypeError("%s input %d is not a Top (type is %s)" % (type_name, i, type(inp)))
        self.type_name = type_name
        self.inputs = tuple(inputs)
        params = dict(params)
        self.ntop = params.pop("ntop", 1)
        self.in_place = params.pop("in_place", False)
        if not isinstance(self.ntop, int) or self.ntop < 0:
            raise NetSpecError("L.%s: ntop must be a non-negative int, got %r" % (type_name, self.ntop))
        if self.in_place and self.ntop != len(self.inputs):
            raise NetSpecError("L.%s: in_place needs as many tops as bottoms (ntop=%d, %d bottoms)"
                               % (type_name, self.ntop, len(self.inputs)))
        self.params = params
        self._fields = layer_fields(type_name, params)
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _update(self, params):
        merged = dict(self.params)
        merged.update(params)
        self._fields = layer_fields(self.type_name, merged)
        self.params = merged

    def _get_name(self, names, autonames):
        if self not in names and self.ntop > 0:
            names[self] = self._get_top_name(self.tops[0], names, autonames)
        elif self not in names:
            autonames[self.type_name] += 1
            names[self] = self.type_name + str(autonames[self.type_name])
        return names[self]

    @staticmethod
    def _get_top_name(top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = top.fn.type_name + str(autonames[top.fn.type_name])
        return names[top]

    def _to_proto(self, layers, names, autonames):
        if self in layers:
            return
        bottoms = []
        for inp in self.inputs:
            inp._to_proto(layers, names, autonames)
            bottoms.append(layers[inp.fn].top[inp.n])
        layer = caffe_pb2.LayerParameter()
        layer.type = self.type_name
        layer.bottom.extend(bottoms)
        if self.in_place:
            layer.top.extend(bottoms)
        else:
            layer.top.extend(self._get_top_name(t, names, autonames) for t in self.tops)
        layer.name = self._get_name(names, autonames)
        layer.MergeFrom(self._fields)
        if self._fields.name:
            layer.name = self._fields.name
        layers[self] = layer

    def __repr__(self):
        return "<Function %s: %d bottoms, %d tops>" % (self.type_name, len(self.inputs), self.ntop)


def to_proto(*tops):
    """A NetParameter holding every layer needed to compute ``tops`` (automatic names)."""
    layers = collections.OrderedDict()
    autonames = collections.Counter()
    for top in tops:
        top._to_proto(layers, {}, autonames)
    net = caffe_pb2.NetParameter()
    net.layer.extend(layers.values())
    return net


class NetSpec(object):
    """Tops assigned as attributes (or items) get those names; ``to_proto()`` writes the net."""

    def __init__(self):
        super(NetSpec, self).__setattr__("tops", collections.OrderedDict())

    def __setattr__(self, name, value):
        if not isinstance(value, (Top, Function)):
            raise TypeError("NetSpec.%s: assign a Top (or a top-less Function), got %s"
                            % (name, type(value).__name__))
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise AttributeError("NetSpec has no top named '%s'" % name)

    __setitem__ = __setattr__

    def __getitem__(self, name):
        return self.tops[name]

    def __delitem__(self, name):
        del self.tops[name]

    def __contains__(self, name):
        return name in self.tops

    def keys(self):
        return list(self.tops)

    def vals(self):
        return list(self.tops.values())

    def update(self, name, params):
        self.tops[name]._update(params)

    def to_proto(self):
        names = {v: k for k, v in self.tops.items()}
        autonames = collections.Counter()
        layers = collections.OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        net = caffe_pb2.NetParameter()
        net.layer.extend(layers.values())
        return net


class Layers(object):
    """``L.<Type>(*bottoms, **fields)``: one Top, a tuple of Tops (ntop > 1) or the Function (0).

    ``caffepy.layers`` is this object (pycaffe's ``caffe.layers``) and also the package of layer
    implementations: lower-case names (``caffepy.layers.base``, ``.conv`` ...) resolve to the package.
    """

    def __getattr__(self, type_name):
        if not type_name[:1].isupper():
            package = importlib.import_module("caffepy.layers")
            try:
                return getattr(package, type_name)
            except AttributeError:
                if type_name.startswith("_"):
                    raise
                return importlib.import_module("caffepy.layers." + type_name)

        def layer_fn(*args, **kwargs):
            fn = Function(type_name, args, kwargs)
            if fn.ntop == 0:
                return fn
            return fn.tops[0] if fn.ntop == 1 else fn.tops
        layer_fn.__name__ = type_name
        return layer_fn


class _EnumScope(object):
    def __init__(self, type_name, message):
        self._type_name = type_name
        self._message = message

    def __getattr__(self, name):
        try:
            return getattr(self._message, name)
        except AttributeError:
            enums = [v.name for e in self._message.DESCRIPTOR.enum_types for v in e.values]
            raise AttributeError("P.%s has no value '%s' (known: %s)"
                                 % (self._type_name, name, ", ".join(enums) or "none"))


class Parameters(object):
    """``P.Pooling.MAX``: constants of the ``<Type>Parameter`` messages (and their fields' owners)."""

    def __getattr__(self, type_name):
        if type_name.startswith("__"):
            raise AttributeError(type_name)
        message = getattr(caffe_pb2, type_name + "Parameter", None)
        if message is None:
            field = type_param_field(type_name)
            if field is None:
                raise AttributeError("P.%s: caffe.proto has no %sParameter" % (type_name, type_name))
            message = getattr(caffe_pb2, caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name[
                field].message_type.name)
        return _EnumScope(type_name, message)


layers = Layers()
params = Parameters()
