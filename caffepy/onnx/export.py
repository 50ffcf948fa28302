"""Walk a built caffepy Net in layer order and emit its ONNX graph.

Value names: a blob written once keeps its name; a blob written in place by several layers
(``conv1`` -> ReLU ``relu1`` with top ``conv1``) is SSA-renamed: the last writer's output is
named after the blob (what ``net.blobs[name]`` holds after a forward), earlier values
``<blob>/<layer>``. Node names are the layer names (a layer's helper nodes
``<layer>/<op>``). Input layers become graph inputs, the net's outputs graph outputs.
"""
import json

import numpy as np

from .builder import ExportError, Graph, LayerContext

MIN_OPSET = 13
DEFAULT_OPSET = 13
OUTPUT_BLOBS = "caffepy.output_blobs"   # model metadata: JSON list, one blob per graph output


def _load_converters():
    from . import ops_conv, ops_fork, ops_neuron, ops_norm, ops_proposal, ops_shape  # noqa: F401


def supported_opsets():
    import onnx.defs
    return range(MIN_OPSET, onnx.defs.onnx_opset_version() + 1)


def _value_names(net, graph):
    """[[value name of top j of layer i]]: see module doc."""
    names = net._layer_names          # by index: layer names may repeat (Caffe allows it)
    last, inputs = {}, set(net.inputs)
    for i in range(len(names)):
        for t in net._wiring[i][1]:
            last[t] = i
    for b in last:
        graph.reserve(b)
    out = []
    for i, lname in enumerate(names):
        row = []
        for t in net._wiring[i][1]:
            is_input = net.net_param.layer[i].type == "Input"
            final = is_input or (last[t] == i and t not in inputs)
            row.append(t if final else graph.unique("%s/%s" % (t, lname)))
        out.append(row)
    return out


def build_graph(net, opset=DEFAULT_OPSET, dynamic_batch=False, extra_outputs=()):
    """A :class:`Graph` for the built ``net`` (its current blob shapes and weights);
    ``extra_outputs``: more blobs (their final values) to expose as graph outputs."""
    _load_converters()
    opsets = supported_opsets()
    if int(opset) not in opsets:
        raise ExportError("--opset %d is not supported: caffepy exports opsets %d to %d (the "
                          "installed onnx's newest)" % (opset, opsets[0], opsets[-1]))
    g = Graph(opset, dynamic_batch)
    from .ops_proposal import proposal_impl
    g.symbolic_axis0 = dynamic_batch or any(
        proposal_impl(layer, lp) is not None for layer, lp in zip(net.layers, net.net_param.layer)
        if lp.type in ("Python", "Proposal"))
    tops_of = _value_names(net, g)
    current = {}
    for i, layer in enumerate(net.layers):
        lp = net.net_param.layer[i]
        bottoms = [current[b] for b in lp.bottom]
        tops = tops_of[i]
        bshapes = [b.shape for b in net.bottom_vecs[i]]
        tshapes = [t.shape for t in net.top_vecs[i]]
        ctx = LayerContext(g, layer, lp, bottoms, tops, bshapes, tshapes, net)
        if lp.type == "Input":
            g.inputs.extend(zip(tops, tshapes))
        else:
            ctx.convert()
        for t, v in zip(lp.top, tops):
            current[t] = v
    for name in list(net.outputs) + [b for b in extra_outputs if b not in net.outputs]:
        g.outputs.append((current[name], net.blobs[name].shape))
    if not g.outputs:
        raise ExportError("%s: net '%s' has no output blobs to export"
                          % (getattr(net, "source", "<net>"), net.name))
    return g


def to_model(net, opset=DEFAULT_OPSET, dynamic_batch=False, extra_outputs=()):
    """The ``onnx.ModelProto`` of ``net`` (checked with ``onnx.checker``)."""
    from .. import __version__
    g = build_graph(net, opset, dynamic_batch, extra_outputs)
    import onnx
    from google.protobuf.message import EncodeError
    try:
        model = g.to_model(net.name, __version__)
    except (ValueError, EncodeError, onnx.checker.ValidationError) as e:   # 2 GiB, checker
        weights = sum(a.nbytes for _, a in g.initializers)
        why = ("its %d bytes of weights are over protobuf's 2 GiB message limit" % weights
               if weights >= 2 ** 31 else " ".join(str(e).split())[:300])
        raise ExportError("%s: net '%s': the ONNX model cannot be written: %s"
                          % (getattr(net, "source", "<net>"), net.name, why)) from None
    blobs = list(net.outputs) + [b for b in extra_outputs if b not in net.outputs]
    onnx.helper.set_model_props(model, {OUTPUT_BLOBS: json.dumps(blobs)})
    return model


def output_blobs(model):
    """The caffepy blob behind each graph output (its value name differs when the blob is an
    input rewritten in place)."""
    props = {p.key: p.value for p in model.metadata_props}
    if OUTPUT_BLOBS in props:
        return json.loads(props[OUTPUT_BLOBS])
    return [o.name for o in model.graph.output]


def load_net(prototxt, weights=None, inputs=None, phase="TEST"):
    """A caffepy Net from files, its Input blobs optionally reshaped: ``inputs`` maps blob name
    to a shape (``--input NAME=N,C,H,W``)."""
    from ..net import Net
    from ..proto import caffe_pb2, io as proto_io
    param = proto_io.read_net(prototxt)
    if inputs:
        _set_input_shapes(param, inputs)
    phase = getattr(caffe_pb2, phase) if isinstance(phase, str) else phase
    net = Net(param, phase, weights=weights, filename=str(prototxt))
    return net


def _set_input_shapes(param, inputs):
    seen = set()
    for lp in param.layer:
        if lp.type != "Input":
            continue
        shapes = lp.input_param.shape
        for j, top in enumerate(lp.top):
            if top not in inputs:
                continue
            if len(shapes) == 1 and len(lp.top) > 1:   # one shape shared by every top
                for _ in range(len(lp.top) - 1):
                    shapes.add().CopyFrom(shapes[0])
            if j >= len(shapes):
                raise ExportError("--input %s: Input layer '%s' declares no shape for it"
                                  % (top, lp.name))
            del shapes[j].dim[:]
            shapes[j].dim.extend(int(d) for d in inputs[top])
            seen.add(top)
    missing = sorted(set(inputs) - seen)
    if missing:
        raise ExportError("--input %s: the net has no Input blob of that name" % missing[0])


def parse_input(text):
    """``NAME=N,C,H,W`` -> (name, (N, C, H, W))."""
    name, _, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not name or not shape or min(shape) <= 0:
        raise ExportError("--input %r: expected NAME=N,C,H,W with positive integer dims" % text)
    return name, shape


def save(model, path):
    from ..proto.io import atomic_write
    atomic_write(path, model.SerializeToString())


def export(net, path, opset=DEFAULT_OPSET, dynamic_batch=False, weights=None, inputs=None,
           extra_outputs=()):
    """Export ``net`` (a caffepy Net, or a .prototxt path with ``weights`` and ``inputs``
    shapes) to ONNX at ``path``; returns the ``onnx.ModelProto``. ``extra_outputs``: blobs
    exposed as graph outputs besides the net's outputs."""
    if isinstance(net, (str, bytes)) or hasattr(net, "__fspath__"):
        net = load_net(net, weights, inputs)
    model = to_model(net, opset, dynamic_batch, extra_outputs)
    save(model, path)
    return model


def random_inputs(net, seed=0):
    """{input name: array} of the values the check feeds (``zoo.input_values``)."""
    from .. import zoo
    rng = np.random.default_rng(seed)
    shapes = [net.blobs[n].shape for n in net.inputs]
    hw = next((s[2:] for s in shapes if len(s) == 4), None)
    return {n: zoo.input_values(n, net.blobs[n].shape, rng, hw).astype(np.float32)
            for n in net.inputs}
