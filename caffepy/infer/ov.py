"""Inference mode's openvino engine (``pip install 'caffepy[openvino]'``): the parts of
caffepy.infer.parts, as the onnxruntime engine gets them, each compiled by openvino.

The net is cut as for onnxruntime (the same ONNX models from caffepy.onnx.part, BatchNorm /
Scale / Bias folded into new arrays; layers openvino is not handed run as caffepy layers between
the parts), except that every model carries all its weights. Each part is read from its bytes
(``Core.read_model``) and compiled for the CPU with ``INFERENCE_PRECISION_HINT`` f32 (never
bf16 or f16, also on CPUs with AMX or avx512_bf16: the outputs must agree with the exact path),
``PERFORMANCE_HINT`` LATENCY, one stream, ``INFERENCE_NUM_THREADS`` = caffepy's thread limit
(caffepy.infer.threads.limit) and no CPU pinning (caffepy layers and BLAS share the cores). A
part's inputs are the blobs' memory (shared, not copied); its outputs are written straight into
the blobs' memory where the part's shapes are static and the memory is no other blob's the part
reads or writes, and copied after the run otherwise. Running, rebuilding after a new input shape,
the check and the commit are the onnxruntime engine's (caffepy.infer.ort.OrtPlan).

The weights are read when a part is built: changing ``net.params`` in place afterwards reaches
openvino (as onnxruntime) only when a new input shape rebuilds a part; loading weights is
refused in the mode. ``openvino`` is imported inside functions only, when a plan is built.
"""
import io

import numpy as np

from .ort import OrtPlan

OPENVINO = "openvino"
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
          "ENABLE_CPU_PINNING": False}

_core = []


def available():
    """Whether openvino is installed (found without importing it: a plan imports it)."""
    import importlib.util
    try:
        return importlib.util.find_spec("openvino") is not None
    except (ImportError, ValueError):
        return False


def core():
    """The one openvino ``Core`` of the process."""
    if not _core:
        import openvino
        _core.append(openvino.Core())
    return _core[0]


def compile_model(model, threads):
    """An openvino CPU compiled model for the ModelProto bytes ``model`` (see module doc)."""
    c = core()
    config = dict(CONFIG, INFERENCE_NUM_THREADS=int(threads))
    return c.compile_model(c.read_model(io.BytesIO(model)), "CPU", config)


class OvPlan(OrtPlan):
    """The parts of an optimized net, openvino's compiled models for the ONNX ones."""
    engine = OPENVINO
    external_bytes = None

    def _session(self, part):
        compiled = compile_model(part.model, self.nthreads)
        return compiled, compiled.create_infer_request()

    def _execute(self, part):
        ins = [np.ascontiguousarray(self.blobs[b].data, np.float32) for _, b in part.inputs]
        outs = [self.blobs[b].data for _, b in part.outputs]
        key = tuple(id(a) for a in ins + outs)
        bound = self.bindings.get(id(part))
        if bound is None or bound[0] != key:       # new arrays: bind them (kept alive here)
            copied = self._bind(part, ins, outs)
            bound = self.bindings[id(part)] = (key, ins + outs, copied)
        request, copied = self.sessions[id(part)][1], bound[2]
        request.infer()
        for j in copied:
            value = request.get_tensor(part.outputs[j][0]).data
            blob = self.blobs[part.outputs[j][1]]
            blob.reshape(value.shape)
            blob.data[...] = value

    def _bind(self, part, ins, outs):
        """Indices of the outputs copied after the run; the others and every input are the
        blobs' own memory (``ins`` gets the arrays of the copied ones, kept alive with it)."""
        from openvino import Tensor
        request = self.sessions[id(part)][1]
        for (v, _), a in zip(part.inputs, ins):
            request.set_tensor(v, Tensor(a, shared_memory=True))
        copied = []
        for j, ((v, _), a) in enumerate(zip(part.outputs, outs)):
            others = ins + outs[:j] + outs[j + 1:]
            if part.symbolic or a.dtype != np.float32 or not a.flags.c_contiguous \
                    or any(np.may_share_memory(a, o) for o in others):
                copied.append(j)
                if not part.symbolic:       # memory of its own, not a blob's bound before
                    own = np.empty(a.shape, np.float32)
                    ins.append(own)
                    request.set_tensor(v, Tensor(own, shared_memory=True))
            else:
                request.set_tensor(v, Tensor(a, shared_memory=True))
        return copied
