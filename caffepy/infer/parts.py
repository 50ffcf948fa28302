"""Inference mode's onnxruntime and openvino engines, the graph side: the net cut into parts, and
the ONNX model of each onnxruntime part (caffepy.infer.ort runs them, caffepy.infer.ov compiles
the same models for openvino; ``ORT`` names the kind of part either runtime runs).

1. **Cutting.** Every layer but the Input layers is exported alone as a one-layer part
   (caffepy.onnx.part.export_part): a layer that converts runs in onnxruntime; a layer without
   a converter or that its converter refuses (a Python layer, a data layer, a fork layer the
   exporter lacks, a configuration ONNX cannot express) and a layer with a loss weight run as
   caffepy layers. A part boundary sits at each such layer: the parts are the maximal runs of
   consecutive layers of one kind, in layer order. Input layers belong to no part (their
   blobs are the user's).
2. **Folding.** A Convolution / InnerProduct (one bottom, one top) whose value is read next only
   by a BatchNorm with fixed statistics, a Scale or a Bias (learned, one bottom, over axis 1),
   that one working in place or being the value's only reader while the blob is neither an
   output nor kept, exports as one Conv / Gemm with ``W' = a W``, ``b' = a b + c``
   (caffepy.infer.fold.folded_params, computed in float64; the net's own weights stay as they
   are). Its output value is the last folded layer's. onnxruntime fuses what is left (Conv +
   ReLU / Clip, Conv + Add, its NCHWc layouts) at ``ORT_ENABLE_ALL``.
3. **Wiring.** A part's graph inputs are the blobs its layers read before writing them; its
   graph outputs are the blobs it writes that a later layer reads, the net's outputs and the
   ``keep`` blobs (their final values). Between parts blobs travel as numpy arrays in the net's
   blob memory. Each onnxruntime part's model is built at once by
   ``caffepy.onnx.part.export_part`` (the folded layers handed to it as substitutes), which
   names the values as ``caffepy.onnx.export`` does, so the parts' inputs and outputs match up.
4. **Shapes.** Every shape is the blob's current static shape (opset 13, no Shape or computed
   Reshape nodes). A part holding an RPN proposal layer (rows known only at run time) has a
   symbolic axis 0 after it, and a part reading a blob downstream of one a symbolic batch axis
   (``export_part`` decides both).
"""
import types

from .fold import affine_of, folded_params, shallow
from ..onnx.part import ExportError, export_part

OPSET = 13
EXTERNAL_BYTES = 4096       # initializers this large go to onnxruntime as arrays, not as bytes
FOLDABLE = ("Convolution", "InnerProduct", "DepthwiseConvolution", "ConvolutionDepthwise")
ORT, CAFFEPY = "onnxruntime", "caffepy"


class Part(object):
    """Consecutive layers run by one engine. ``kind``: ORT or CAFFEPY; ``layers``: indices into
    ``net.layers`` (for an onnxruntime part, folded layers included). An onnxruntime part also
    has ``inputs`` / ``outputs`` ([(value name, blob name)]), ``shapes`` (blob name -> the input
    shape it was built for), ``symbolic`` (axis 0 known only at run time inside), ``dynamic``
    (its inputs' axis 0 too), ``model`` (the serialised ModelProto; None when nothing it
    computes is read) and ``weights`` ([(initializer name, array)] of the initializers of
    ``EXTERNAL_BYTES`` or more, which the model names without their data: onnxruntime reads
    them from these arrays, the net's own parameter memory where nothing was folded)."""

    def __init__(self, kind):
        self.kind = kind
        self.layers = []
        self.inputs, self.outputs = [], []
        self.shapes = {}
        self.symbolic = self.dynamic = False
        self.model = None
        self.weights = []


class Cut(object):
    """The parts of a net, the folding (``chains``: conv index -> [indices folded into it];
    ``absorbed``: those indices) and the blobs folded away (``gone``: name -> why).
    ``external_bytes``: initializers this large are left out of the models' bytes and handed
    over as arrays (None: every model carries all its weights, as the openvino engine needs)."""

    def __init__(self, net, keep=(), external_bytes=EXTERNAL_BYTES):
        self.net = net
        self.external_bytes = external_bytes
        self.blobs = dict(net.blobs)            # the Blob objects (net.blobs gets stand-ins)
        self.final = set(net.outputs) | set(keep)
        self.readers = {}                       # id(blob) -> indices of the layers reading it
        self.last_read = {}                     # blob name -> last layer index reading it
        for i, lp in enumerate(net.net_param.layer):
            for b, blob in zip(lp.bottom, net.bottom_vecs[i]):
                self.readers.setdefault(id(blob), []).append(i)
                self.last_read[b] = i
        kinds = [None if lp.type == "Input" else (ORT if self._converts(i) else CAFFEPY)
                 for i, lp in enumerate(net.net_param.layer)]
        self.chains, self.absorbed, self.gone = {}, set(), {}
        for i, kind in enumerate(kinds):
            if kind == ORT and i not in self.absorbed:
                self._fold(i, kinds)
        self.parts = []
        for i, kind in enumerate(kinds):
            if kind is None:
                continue
            if not self.parts or self.parts[-1].kind != kind:
                self.parts.append(Part(kind))
            self.parts[-1].layers.append(i)
        self._wire()

    # -- 1. which layers convert ---------------------------------------------------------------
    def _converts(self, i):
        """Whether layer ``i`` exports as a one-layer part (and has no loss weight)."""
        if any(getattr(self.net.layers[i], "loss_weights", ())):
            return False
        try:
            export_part(self.net, [i], opset=OPSET)
        except ExportError:
            return False
        return True

    # -- 2. folding ----------------------------------------------------------------------------
    def _sole_reader(self, j, blob, name):
        """The layer right after j when it is the only one to see layer j's output ``blob``:
        it works in place, or it is the blob's one reader and the blob is neither an output
        nor kept. None otherwise."""
        readers = [k for k in self.readers.get(id(blob), ()) if k > j]
        if not readers or readers[0] != j + 1:
            return None
        tops = self.net.top_vecs[j + 1]
        if len(tops) == 1 and tops[0] is blob:
            return j + 1
        if len(readers) == 1 and name not in self.final:
            return j + 1
        return None

    def _fold(self, i, kinds):
        net = self.net
        if net.layers[i].type not in FOLDABLE or len(net.bottom_vecs[i]) != 1 \
                or len(net.top_vecs[i]) != 1:
            return
        j, chain, a, c = i, [], None, None
        while True:
            blob, name = net.top_vecs[j][0], net.net_param.layer[j].top[0]
            k = self._sole_reader(j, blob, name)
            if k is None or kinds[k] != ORT:
                break
            affine = affine_of(net.layers[k], len(net.bottom_vecs[k]))
            if affine is None:
                break
            na, nc = affine
            a, c = (na, nc) if a is None else (a * na, c * na + nc)
            if net.top_vecs[k][0] is not blob:
                self.gone[name] = "folded into layer '%s'" % net._layer_names[i]
            chain.append(k)
            j = k
        if chain:
            self.chains[i] = (chain, a, c)
            self.absorbed.update(chain)

    # -- 3. wiring -----------------------------------------------------------------------------
    def _wire(self):
        for part in self.parts:
            if part.kind == ORT:
                self.build(part)

    def build(self, part):
        """(Re)build ``part``'s graph from the blobs' current shapes: its inputs, outputs and
        ``model`` (caffepy.onnx.part.export_part, the folded layers as substitutes)."""
        net = self.net
        substitutes = {}
        for i in part.layers:
            if i in self.chains:
                chain, a, c = self.chains[i]
                w, bias = folded_params(net.layers[i], a, c)
                substitutes[i] = (_with_params(net.layers[i], w, bias), chain[-1])
        last = part.layers[-1]
        wanted = {b for b, k in self.last_read.items() if k > last} | self.final
        built = export_part(net, part.layers, wanted, substitutes, opset=OPSET,
                            name="%s/part%d" % (net.name, self.parts.index(part)),
                            external_bytes=self.external_bytes)
        part.inputs, part.outputs, part.shapes = built.inputs, built.outputs, built.shapes
        part.symbolic, part.dynamic = built.symbolic, built.dynamic
        part.model, part.weights = built.model, built.weights

    def reshape(self, part):
        """Run the reshape of every layer of ``part`` (the shapes its graph is built from)."""
        net = self.net
        for i in part.layers:
            net.layers[i].reshape(net.bottom_vecs[i], net.top_vecs[i])

    def readable(self):
        """Blob names whose values stay in the net's blob memory: inputs, tops of caffepy
        layers, outputs of onnxruntime parts."""
        net = self.net
        out = set(net.inputs)
        for part in self.parts:
            if part.kind == CAFFEPY:
                for i in part.layers:
                    out.update(net.net_param.layer[i].top)
            else:
                out.update(t for _, t in part.outputs)
        return out


def _with_params(layer, w, bias):
    """A copy of ``layer`` whose converter reads the folded weights ``w`` and ``bias``."""
    new = shallow(layer)
    new.blobs = [types.SimpleNamespace(data=w), types.SimpleNamespace(data=bias)]
    new.bias_term = True
    return new
