"""The graph being built and the per-layer context handed to each converter.

Nodes and initializers are plain Python records here; ``Graph.to_model`` turns them into an
``onnx.ModelProto`` (the only place that touches the ``onnx`` package). A converter is a function
``f(ctx)`` registered for one or more Caffe type strings with :func:`converter`; it reads the
layer (``ctx.lp``, ``ctx.layer``, the static blob shapes ``ctx.bshapes`` / ``ctx.tshapes``) and
emits nodes whose last outputs are exactly ``ctx.tops``. It refuses a layer it cannot express
faithfully with ``raise ctx.refuse(why)``: one line naming the layer, its type and the reason.
"""
import numpy as np

from ..errors import CaffeError

CONVERTERS = {}
#: (type name, class name) -> the converter of a fork's variant class (:func:`variant_converter`)
VARIANT_CONVERTERS = {}


class ExportError(CaffeError):
    """A net (or one of its layers) that has no faithful ONNX form, or a bad export request."""


#: ``variants`` of a converter that handles (or refuses, for one reason) every class of its types
ALL = "all"


def converter(*type_names, variants=()):
    """Register ``fn`` for ``type_names``. ``variants``: the names of the fork classes that
    register under one of those type names (caffepy.layers.registry.register_variant) which
    ``fn`` converts too, or :data:`ALL`; a layer of any other variant class without a converter
    of its own (:func:`variant_converter`) is refused (:meth:`LayerContext.convert`)."""
    def register(fn):
        if variants or not hasattr(fn, "variants"):        # a refusing converter keeps ALL
            fn.variants = variants if variants == ALL else frozenset(variants)
        for t in type_names:
            if t in CONVERTERS:
                raise ValueError("ONNX converter for %s registered twice" % t)
            CONVERTERS[t] = fn
        return fn
    return register


def variant_converter(type_name, class_name):
    """Register ``fn`` for the fork class ``class_name`` that caffepy builds under ``type_name``
    (caffepy.layers.registry.register_variant): it converts those layers instead of the type's
    converter."""
    def register(fn):
        key = (type_name, class_name)
        if key in VARIANT_CONVERTERS:
            raise ValueError("ONNX converter for %s %s registered twice" % key)
        VARIANT_CONVERTERS[key] = fn
        return fn
    return register


class Graph(object):
    """Nodes, initializers, inputs and outputs of the ONNX graph; names made unique."""

    def __init__(self, opset, dynamic_batch=False):
        self.opset = int(opset)
        self.dynamic_batch = bool(dynamic_batch)
        # axis 0 symbolic in the shapes written into the graph: with a dynamic batch, and after
        # a layer whose output count is known only at run time (RPN proposals)
        self.symbolic_axis0 = self.dynamic_batch
        self.nodes, self.initializers = [], []
        self.inputs, self.outputs = [], []
        self._names = set()
        self._node_names = set()

    def unique(self, base, taken=None):
        taken = self._names if taken is None else taken
        name, i = base, 1
        while name in taken:
            name, i = "%s_%d" % (base, i), i + 1
        taken.add(name)
        return name

    def reserve(self, name):
        self._names.add(name)

    def const(self, base, array, dtype=np.float32):
        name = self.unique(base)
        self.initializers.append((name, np.ascontiguousarray(np.asarray(array, dtype=dtype))))
        return name

    def node(self, op, inputs, outputs, name, attrs):
        self.nodes.append((op, list(inputs), list(outputs), self.unique(name, self._node_names),
                           dict(attrs)))

    def dims(self, shape):
        dims = list(int(d) for d in shape)
        if self.dynamic_batch and dims:
            dims[0] = "N"
        return dims

    def to_model(self, name, producer_version):
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        nodes = [helper.make_node(op, ins, outs, name=nm, **attrs)
                 for op, ins, outs, nm, attrs in self.nodes]
        inits = [numpy_helper.from_array(a, nm) for nm, a in self.initializers]

        def info(nm, shape, elem):
            return helper.make_tensor_value_info(nm, elem, None if shape is None else self.dims(shape))
        inputs = [info(nm, s, TensorProto.FLOAT) for nm, s in self.inputs]
        outputs = [info(nm, s, TensorProto.FLOAT) for nm, s in self.outputs]
        graph = helper.make_graph(nodes, name or "caffepy", inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="caffepy", producer_version=producer_version)
        model.ir_version = min(model.ir_version, _IR_FOR_OPSET.get(self.opset, model.ir_version))
        onnx.checker.check_model(model)
        return model

    def to_bytes(self, name, producer_version, metadata=(), external=()):
        """The serialised ModelProto, written without the ``onnx`` package and unchecked
        (caffepy.onnx.wire; inference mode's onnxruntime engine). ``external``: initializer
        names written without data, for the caller to hand onnxruntime as arrays."""
        from . import wire
        return wire.model(self, name, producer_version, _IR_FOR_OPSET.get(self.opset, 7),
                          metadata, external)


# the IR version each opset first shipped with (older runtimes refuse newer IR versions)
_IR_FOR_OPSET = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


class LayerContext(object):
    """What a converter sees of one layer (see module doc)."""

    def __init__(self, graph, layer, lp, bottoms, tops, bshapes, tshapes, net):
        self.g, self.layer, self.lp, self.net = graph, layer, lp, net
        self.name, self.type = lp.name, lp.type
        self.bottoms, self.tops = list(bottoms), list(tops)
        self.bshapes, self.tshapes = [tuple(s) for s in bshapes], [tuple(s) for s in tshapes]
        self._first = True

    @property
    def dynamic(self):
        return self.g.symbolic_axis0

    @property
    def opset(self):
        return self.g.opset

    def refuse(self, why):
        return ExportError("layer '%s' (%s): %s" % (self.name, self.type, why))

    def convert(self):
        """Run this layer's converter: the one registered for its class when it is a fork's
        variant of the type name (caffepy.layers.registry.register_variant,
        :func:`variant_converter`), else the type's. A variant class that neither has its own
        nor is listed in the type converter's ``variants`` is refused, and so is a layer the
        converter meets without knowing it (an attribute, index or key it lacks): a one-line
        refusal naming the class, never a model that computes the other layer's function or a
        crash (inference mode then runs the layer in caffepy)."""
        from ..layers.registry import is_variant
        cls = type(self.layer)
        fn = VARIANT_CONVERTERS.get((self.type, cls.__name__))
        if fn is None:
            fn = CONVERTERS.get(self.type)
            if fn is None:
                raise self.refuse("no ONNX converter for this layer type")
            handled = getattr(fn, "variants", frozenset())
            if handled != ALL and cls.__name__ not in handled and is_variant(self.type, cls):
                raise self.refuse("caffepy's %s (a Caffe fork's layer under this type name, %s) "
                                  "has no ONNX converter" % (cls.__name__, cls.__module__))
        try:
            fn(self)
        except (AttributeError, IndexError, KeyError, TypeError) as e:
            raise self.refuse("the ONNX converter for type '%s' does not handle caffepy's %s "
                              "(%s: %s)" % (self.type, type(self.layer).__name__,
                                            type(e).__name__, e)) from e

    def tmp(self, suffix):
        """A fresh value name for an intermediate result of this layer."""
        return self.g.unique("%s/%s" % (self.name, suffix))

    def const(self, suffix, array, dtype=np.float32):
        return self.g.const("%s/%s" % (self.name, suffix), array, dtype)

    def ints(self, suffix, values):
        return self.const(suffix, np.asarray(values, dtype=np.int64).reshape(-1), np.int64)

    def node(self, op, inputs, outputs=None, n_out=1, **attrs):
        """Emit one node; ``outputs`` default to fresh names. Returns the output name, or the
        list of names when there are several. The layer's first node carries the layer's name."""
        if outputs is None:
            outputs = [self.tmp(op.lower()) for _ in range(n_out)]
        elif isinstance(outputs, str):
            outputs = [outputs]
        name = self.name if self._first else "%s/%s" % (self.name, op.lower())
        self._first = False
        self.g.node(op, inputs, outputs, name, attrs)
        return outputs[0] if len(outputs) == 1 else list(outputs)

    # -- shape helpers -------------------------------------------------------------------------
    def shape_dims(self, out_shape, in_shape):
        """Reshape target for a static ``out_shape``; with a dynamic batch axis 0 becomes 0 (copy
        the input's) when both shapes share it, else the export is refused."""
        dims = [int(d) for d in out_shape]
        if self.dynamic and dims:
            if not in_shape or int(in_shape[0]) != dims[0]:
                raise self.refuse("reshapes axis 0 (%s -> %s), which is symbolic here (--dynamic-"
                              "batch, or a count known at run time)"
                              % (tuple(in_shape), tuple(out_shape)))
            dims[0] = 0
        return dims

    def reshape(self, x, out_shape, in_shape, output=None):
        return self.node("Reshape", [x, self.ints("shape", self.shape_dims(out_shape, in_shape))],
                         output)

    def reduce(self, op, x, axes, keepdims, output=None):
        """A Reduce* node; axes as an input from opset 18 (13 for ReduceSum), else an attribute."""
        axes = [int(a) for a in axes]
        if op == "ReduceSum" or self.opset >= 18:
            return self.node(op, [x, self.ints("axes", axes)], output, keepdims=int(keepdims))
        return self.node(op, [x], output, axes=axes, keepdims=int(keepdims))

    def unsqueeze(self, x, axes, output=None):
        return self.node("Unsqueeze", [x, self.ints("axes", axes)], output)

    def mul_const(self, x, value, suffix="scale", output=None):
        return self.node("Mul", [x, self.const(suffix, value)], output)

    def finish(self, x, i=0):
        """Make the value ``x`` become top ``i`` (an Identity when it is another value)."""
        if x != self.tops[i]:
            self.node("Identity", [x], self.tops[i])


def param_blob(layer, i):
    """Parameter blob ``i`` of a caffepy layer as a float32 array."""
    return np.asarray(layer.blobs[i].data, dtype=np.float32)
