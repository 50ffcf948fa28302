"""The ONNX model of a contiguous run of a net's layers, built at once: what inference mode's
onnxruntime engine (caffepy.infer.parts) runs as one part.

    part = export_part(net, layers, outputs, substitutes={i: (layer, last)}, name="net/part0")
    part.inputs, part.outputs        # [(value name, blob name)]
    part.model, part.weights         # ModelProto bytes (None when no output), external arrays

``layers``: consecutive indices into ``net.layers`` (no Input layer). Value names are the whole
net's (caffepy.onnx.export: a blob written in place by several layers is ``<blob>/<layer>`` for
all but the last writer), so parts built one after another fit together: a part's inputs are the
blobs its layers read before writing them, each named as the value its last writer before the
part produced. Its outputs are the blobs it writes that are in ``outputs``, in the order they are
first written, with their values after the part. ``substitutes`` maps a layer index ``i`` to
``(layer, last)``: ``layer`` (a stand-in, e.g. with folded weights) is converted in place of
layers ``i`` to ``last``, its outputs named as layer ``last``'s tops. Shapes are the blobs'
current static shapes, opset 13 by default; inside a part holding an RPN proposal layer (rows
counted at run time) axis 0 is symbolic, and a part reading a blob downstream of one has a
symbolic axis 0 on its inputs too. A layer without a converter, or one its converter refuses,
raises :class:`ExportError` (building a one-layer part is how a caller asks whether a layer
converts). The ``onnx`` package is not needed: the bytes come from caffepy.onnx.wire.
"""
import bisect
import weakref

from .builder import ExportError, Graph, LayerContext
from .export import _load_converters, _value_names

OPSET = 13

__all__ = ["ExportError", "ExportedPart", "export_part", "OPSET"]

_analyses = weakref.WeakKeyDictionary()     # net -> _NetNames (a built net's topology is fixed)


class ExportedPart(object):
    """What :func:`export_part` built. ``inputs`` / ``outputs``: [(value name, blob name)];
    ``shapes``: input blob name -> the shape the graph was built for; ``exit``: blob name ->
    its value name after the part (every blob the part writes); ``symbolic``: axis 0 known only
    at run time inside the part; ``dynamic``: its inputs' axis 0 too; ``model``: the serialised
    ModelProto (None when the part has no outputs); ``weights``: [(initializer name, array)] of
    the initializers of ``external_bytes`` or more, which the model names without their data."""

    def __init__(self):
        self.inputs, self.outputs = [], []
        self.shapes, self.exit = {}, {}
        self.symbolic = self.dynamic = False
        self.model = None
        self.weights = []


class _NetNames(object):
    """Per net: every layer's top value names, the names they take, which layers are proposal
    layers, which blobs are downstream of one, and each blob's writers in layer order."""

    def __init__(self, net):
        _load_converters()
        from .ops_proposal import proposal_impl
        names = Graph(OPSET)
        self.tops_of = _value_names(net, names)
        self.reserved = frozenset(names._names)
        self.proposals, self.tainted = set(), set()
        self.writers = {}           # blob name -> ([layer index], [value name])
        for i, lp in enumerate(net.net_param.layer):
            if lp.type in ("Python", "Proposal") and \
                    proposal_impl(net.layers[i], lp) is not None:
                self.proposals.add(i)
            if i in self.proposals or any(b in self.tainted for b in lp.bottom):
                self.tainted.update(lp.top)
            for t, v in zip(lp.top, self.tops_of[i]):
                idx, vals = self.writers.setdefault(t, ([], []))
                idx.append(i)
                vals.append(v)

    def value_before(self, blob, start):
        """The value name ``blob`` holds when layer ``start`` begins."""
        idx, vals = self.writers.get(blob, ((), ()))
        k = bisect.bisect_left(idx, start) - 1
        if k < 0:
            raise ExportError("blob '%s' has no value before layer %d" % (blob, start))
        return vals[k]


def _names(net):
    try:
        return _analyses[net]
    except KeyError:
        a = _analyses[net] = _NetNames(net)
        return a


def export_part(net, layers, outputs=(), substitutes=None, name=None, external_bytes=None,
                opset=OPSET):
    """The ONNX model of ``net``'s consecutive ``layers`` (see module doc): an
    :class:`ExportedPart`. ``outputs``: blob names the part exposes where it writes them (read
    after the part, the net's outputs, blobs kept); ``name``: the graph's name;
    ``external_bytes``: initializers this large are left out of the model's bytes and returned
    in ``weights`` (None: all are written)."""
    from .. import __version__
    layers = list(layers)
    substitutes = substitutes or {}
    info = _names(net)
    part = ExportedPart()
    start, wanted = layers[0], set(outputs)
    inputs, seen = [], set()           # the blobs the layers read before writing them
    for i in layers:
        lp = net.net_param.layer[i]
        inputs.extend(b for b in lp.bottom if b not in seen and b not in inputs)
        seen.update(lp.top)
    part.dynamic = any(b in info.tainted for b in inputs)
    part.symbolic = part.dynamic or any(i in info.proposals for i in layers)
    g = Graph(opset, part.dynamic)
    g.symbolic_axis0 = part.symbolic
    for nm in info.reserved:
        g.reserve(nm)
    current, produced, written, top_blobs = {}, set(), [], {}
    skip = set()
    for i in layers:
        if i in skip:
            continue
        lp, layer = net.net_param.layer[i], net.layers[i]
        bottoms = []
        for b, blob in zip(lp.bottom, net.bottom_vecs[i]):
            v = current.get(b)
            if v is None:
                v = current[b] = info.value_before(b, start)
            if v not in produced and b not in part.shapes:
                part.inputs.append((v, b))
                part.shapes[b] = tuple(blob.shape)
                g.inputs.append((v, blob.shape))
            bottoms.append(v)
        end = i
        if i in substitutes:
            layer, end = substitutes[i]
            skip.update(range(i + 1, end + 1))
        ctx = LayerContext(g, layer, lp, bottoms, info.tops_of[end],
                           [b.shape for b in net.bottom_vecs[i]],
                           [t.shape for t in net.top_vecs[i]], net)
        ctx.convert()
        for t, v, blob in zip(net.net_param.layer[end].top, info.tops_of[end], net.top_vecs[end]):
            current[t] = v
            produced.add(v)
            top_blobs[t] = blob
            if t not in written:
                written.append(t)
    part.outputs = [(current[t], t) for t in written if t in wanted]
    g.outputs = [(v, None if part.symbolic else top_blobs[t].shape) for v, t in part.outputs]
    part.exit = {t: current[t] for t in written}
    if external_bytes is not None:
        part.weights = [(nm, a) for nm, a in g.initializers if a.nbytes >= external_bytes]
    if part.outputs:
        part.model = g.to_bytes(name or net.name, __version__,
                                external={nm for nm, _ in part.weights})
    return part
