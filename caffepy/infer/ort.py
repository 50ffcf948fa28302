"""Inference mode's onnxruntime engine: the parts of caffepy.infer.parts run in turn,
onnxruntime parts in onnxruntime sessions, caffepy parts as the layers' own forward.

Each onnxruntime part is an ``InferenceSession`` on the CPU with ``ORT_ENABLE_ALL`` graph
optimisation, sequential execution, one inter-op thread and as many intra-op threads as
caffepy's thread limit (caffepy.infer.threads.limit: ``OMP_NUM_THREADS`` /
``OPENBLAS_NUM_THREADS``, else the cores). Its threads spin between calls, as onnxruntime's do
by default, only when the whole net is one onnxruntime part (spinning threads would take the
cores from caffepy layers and other parts). A part's inputs are bound to the blobs' memory and
its outputs are written straight into it (copied instead where the memory is shared with another
blob the part reads or writes, as Split and Flatten tops share theirs, or where axis 0 is known
only at run time). When the shape of a part's input differs from the one its graph was built
for (a new batch through ``net.reshape()`` or through the input blob alone, a caffepy layer
with a new output size), the part's layers are reshaped and its graph and session rebuilt.

:meth:`OrtPlan.check` runs the parts on the random inputs of a
:class:`caffepy.infer.choice.Reference` (the exact path's values; data layers' batches replayed,
their cursors put back, the input blobs' values restored after) and returns the relative error
(max |a - b| / max |b|, as ``caffepy export --check``) of every output and kept blob.
:meth:`OrtPlan.commit` then makes the blobs that live only inside the runtime unreadable
(``FoldedBlob``) and gives their memory back.

The openvino engine (caffepy.infer.ov) is this class with another runtime: it overrides
``engine``, ``external_bytes`` (its models carry all their weights), ``_session`` and
``_execute``.
"""
import numpy as np

from . import threads as threads_mod
from .parts import CAFFEPY, EXTERNAL_BYTES, ORT, Cut
from .plan import FoldedBlob
from ..math.workspace import lazy_zeros

INSIDE = "computed inside %s; net.optimize(keep=[...]) keeps it readable"


def available():
    """Whether onnxruntime is installed (found without importing it: a plan imports it, and a
    choice of another engine need not load it)."""
    import importlib.util
    try:
        return importlib.util.find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        return False


def session(model, threads, spin, weights=()):
    """An onnxruntime CPU session for the ModelProto bytes ``model`` and the arrays ``weights``
    ([(initializer name, array)], kept alive by the caller) of its external initializers."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    if weights:
        so.add_external_initializers([nm for nm, _ in weights],
                                     [ort.OrtValue.ortvalue_from_numpy(a) for _, a in weights])
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


class Step(object):
    """One timed unit of ``caffepy time --optimize``: an onnxruntime part or a caffepy layer."""
    __slots__ = ("name", "run")

    def __init__(self, name, run):
        self.name, self.run = name, run


class OrtPlan(object):
    """The parts of an optimized net and their sessions (see module doc)."""
    engine = ORT
    external_bytes = EXTERNAL_BYTES
    choice = None       # how auto chose the engine (caffepy.infer.engine)

    def __init__(self, net, keep=(), threads=None):
        self.net, self.keep = net, set(keep)
        self.cut = Cut(net, keep, self.external_bytes)
        self.parts = self.cut.parts
        self.blobs = self.cut.blobs
        self.nthreads = threads_mod.limit()
        n_ort = sum(p.kind == ORT for p in self.parts)
        self.spin = n_ort == 1 and len(self.parts) == 1
        self.sessions, self.bindings = {}, {}
        for part in self.parts:
            if part.kind == ORT and part.model is not None:
                self.sessions[id(part)] = self._session(part)
        names = net._layer_names
        self.folded = [(names[i], [names[k] for k in chain])
                       for i, (chain, _, _) in sorted(self.cut.chains.items())]
        self.steps = []
        for k, part in enumerate(self.parts):
            if part.kind == ORT:
                self.steps.append(Step("%s[%s..%s]" % (self.engine, names[part.layers[0]],
                                                       names[part.layers[-1]]),
                                       lambda p=part: self._run_part(p)))
            else:
                self.steps.extend(Step(names[i], lambda i=i: self._run_layer(i))
                                  for i in part.layers)
        self.gone = {}
        self.rebuilds = 0       # parts rebuilt for new input shapes

    def describe(self):
        """One line: how many layers run where."""
        n_ort = sum(len(p.layers) for p in self.parts if p.kind == ORT)
        n_cp = sum(len(p.layers) for p in self.parts if p.kind == CAFFEPY)
        return ("%d %s part(s) of %d layers (%d folded), %d caffepy layer(s), %d "
                "threads" % (sum(p.kind == ORT for p in self.parts), self.engine, n_ort,
                             len(self.cut.absorbed), n_cp, self.nthreads))

    # -- running -------------------------------------------------------------------------------
    def forward(self, replay=None):
        """One pass; ``replay``: {layer index: [top arrays]} written instead of running those
        (source) caffepy layers. Returns the weighted loss of the caffepy layers."""
        loss = 0.0
        for part in self.parts:
            if part.kind == ORT:
                self._run_part(part)
                continue
            for i in part.layers:
                if replay is not None and i in replay:
                    for t, value in zip(self.net.top_vecs[i], replay[i]):
                        t.reshape(value.shape)
                        t.data[...] = value
                else:
                    loss += self._run_layer(i)
        return loss

    def _run_layer(self, i):
        net = self.net
        return net.layers[i].forward(net.bottom_vecs[i], net.top_vecs[i])

    def _stale(self, part):
        for _, b in part.inputs:
            shape, built = self.blobs[b].shape, part.shapes[b]
            if (shape[1:] != built[1:]) if part.dynamic else (shape != built):
                return True
        return False

    def _session(self, part):
        return session(part.model, self.nthreads, self.spin, part.weights)

    def _run_part(self, part):
        if part.model is None:
            return
        if self._stale(part):
            self._rebuild(part)
        self._execute(part)

    def _execute(self, part):
        ins = [np.ascontiguousarray(self.blobs[b].data, np.float32) for _, b in part.inputs]
        outs = [self.blobs[b].data for _, b in part.outputs]
        key = tuple(id(a) for a in ins + outs)
        bound = self.bindings.get(id(part))
        if bound is None or bound[0] != key:       # new arrays: bind them (kept alive here)
            bound = self.bindings[id(part)] = (key, ins + outs) + self._bind(part, ins, outs)
        _, _, io, copied = bound
        self.sessions[id(part)].run_with_iobinding(io)
        if copied:
            values = io.copy_outputs_to_cpu()
            for j in copied:
                blob = self.blobs[part.outputs[j][1]]
                blob.reshape(values[j].shape)
                blob.data[...] = values[j]

    def _bind(self, part, ins, outs):
        """(io binding, indices of the outputs copied after the run)."""
        io = self.sessions[id(part)].io_binding()
        for (v, _), a in zip(part.inputs, ins):
            io.bind_cpu_input(v, a)
        copied = []
        for j, ((v, _), a) in enumerate(zip(part.outputs, outs)):
            others = ins + outs[:j] + outs[j + 1:]
            if part.symbolic or a.dtype != np.float32 or not a.flags.c_contiguous \
                    or any(np.may_share_memory(a, o) for o in others):
                io.bind_output(v, "cpu")
                copied.append(j)
            else:
                io.bind_output(v, "cpu", 0, np.float32, list(a.shape), a.ctypes.data)
        return io, copied

    def _rebuild(self, part):
        self.rebuilds += 1
        self.cut.reshape(part)
        self.cut.build(part)
        self.bindings.pop(id(part), None)
        self.sessions.pop(id(part), None)
        if part.model is not None:
            self.sessions[id(part)] = self._session(part)

    def assign_buffers(self, net):
        """``Net.reshape()``: every layer reshaped; parts whose inputs changed are rebuilt on
        the next forward."""
        for i, layer in enumerate(net.layers):
            layer.reshape(net.bottom_vecs[i], net.top_vecs[i])

    # -- entering the mode ---------------------------------------------------------------------
    def check(self, reference=None, seed=0):
        """{output or kept blob: relative error} of the parts against the exact path
        (``reference``: a caffepy.infer.choice.Reference; one on ``seed``'s inputs when None)."""
        from .choice import Reference
        if reference is None:
            reference = Reference(self.net, self.keep, seed)
        return reference.errors(self.forward)

    def commit(self):
        """Blobs that live only inside onnxruntime become FoldedBlobs in ``net.blobs`` and get
        fresh, never-written memory; the shared convolution workspace is emptied."""
        net = self.net
        readable = self.cut.readable() | self.keep
        for name, blob in self.blobs.items():
            if name in readable:
                continue
            self.gone[name] = self.cut.gone.get(name, INSIDE % self.engine)
            net.blobs[name] = FoldedBlob(name, self.gone[name])
            blob.set_arrays(lazy_zeros(blob.shape, blob.dtype), lazy_zeros(blob.shape, blob.dtype))
        for layer in net.layers:
            ws = getattr(layer, "workspace", None)
            if ws is not None:
                ws.clear()
        self.bindings.clear()

