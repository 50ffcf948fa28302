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

from .fields import (NetSpecError, UnknownFieldError, assign_proto,  # noqa: F401
                             layer_fields, param_name_dict, type_param_field)
from ..proto import caffe_pb2

__all__ = ["NetSpec", "Top", "Function", "layers", "params", "to_proto", "param_name_dict",
           "NetSpecError", "assign_proto"]


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
