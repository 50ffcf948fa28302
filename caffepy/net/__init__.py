"""Net: a compiled layer graph with pycaffe's interface (Caffe's Net).

Building runs the passes of :mod:`caffepy.net.passes` (filter by NetState, insert Split layers),
then :meth:`Net._build`: instantiate each layer from the registry, wire blobs by name (a top named
like the bottom at the same index is computed in place), set the layer up, attach its parameters
(shared by ``ParamSpec.name`` with STRICT / PERMISSIVE shape checks; ``lr_mult`` / ``decay_mult``),
then :meth:`Net._analyze_backward` decides which layers and bottoms need backward (Caffe's rules:
a layer needs backward if a bottom or parameter does, and only if it contributes to a loss;
``propagate_down`` and ``force_backward`` override). Tops nobody consumes are the net's outputs.

Inference mode (:meth:`Net.optimize`) is reached through a hook, :func:`set_optimizer`:
``caffepy.infer`` installs its front door when imported and ``caffepy/__init__`` installs one that
imports it on first use, so this package never imports inference mode.

Construct as pycaffe does::

    net = Net("deploy.prototxt", caffepy.TEST, weights="w.caffemodel")
    net = Net("deploy.prototxt", "w.caffemodel", caffepy.TEST)      # legacy order

``num_classes=N``: the class count of a DIGITS classification network, which leaves its
InnerProduct classifiers' num_output to DIGITS (:mod:`caffepy.proto.digits`); building such a net
without it is a one-line error.
"""
import collections
import os

import numpy as np

from . import fusion as net_fusion
from . import passes as net_passes
from ..errors import CaffeError, NetError, ShapeError, locate_layer_error
from ..layers.base import create_layer, new_top_blob, weights_provided
from ..math import blas
from ..math.workspace import Workspace
from .params import NetParams, provided_layers, read_weights
from ..proto import caffe_pb2, digits, io as proto_io
from .pycaffe_net import PycaffeNet

_optimizer = [None]


def _naming_layer(error, name, type_name):
    """``error`` (of the same class, its attributes kept) with its message prefixed by the layer
    being set up when it met it: ``layer 'ip1' (InnerProduct): axis 1 out of range ...``."""
    named = type(error)("layer '%s' (%s): %s" % (name, type_name, error))
    named.__dict__.update(error.__dict__)
    named.__cause__ = error
    return named


def set_optimizer(optimize):
    """Install ``optimize(net, keep, threads, engine)``, inference mode's front door, which
    :meth:`Net.optimize` calls (caffepy.infer installs its own when imported)."""
    _optimizer[0] = optimize


class Net(NetParams, PycaffeNet):
    """A built net; pycaffe's batching and MemoryData helpers come from PycaffeNet."""

    _plan = None    # caffepy.infer.plan.Plan once in inference mode
    fusion = None   # caffepy.net.fusion.Fusion: the layer chains run as one step in training

    def __init__(self, source, *args, phase=None, weights=None, level=0, stages=(),
                 dtype=np.float32, filename=None, strict=None, optimize=False, num_classes=None,
                 **kwargs):
        if "stages" in kwargs:
            stages = kwargs.pop("stages")
        if kwargs:
            raise TypeError("Net() got unexpected arguments: %s" % ", ".join(sorted(kwargs)))
        phase, weights = _parse_ctor_args(args, phase, weights)
        self.dtype = np.dtype(dtype)
        # strict: fields the schema lacks are errors; False ignores them (named in a WARNING)
        param = proto_io.read_net(source, strict=strict)
        if phase is None:
            phase = param.state.phase if param.HasField("state") else caffe_pb2.TRAIN
        self.phase = phase
        # OpenBLAS's idle threads: quiet for training, spinning for inference (caffepy.math.blas)
        blas.use_regime("train" if phase == caffe_pb2.TRAIN else "infer")
        # ``filename``: where a NetParameter came from, for error messages (file:line of the layer)
        self.source = filename or (source if isinstance(source, (str, os.PathLike)) else "<NetParameter>")
        # a DIGITS classification network's open num_output: the class count (caffepy.proto.digits)
        digits.complete(param, num_classes, os.fspath(self.source))
        self.name = param.name
        self.on_backward_layer = []  # callables f(layer_index), fired after each layer's backward
        self._building = self._building_type = None
        # the weights are read first: the layers they provide are not filled only to be overwritten
        reads = [read_weights(w) for w in (weights.split(",") if isinstance(weights, str)
                                           else weights)] if weights is not None else []
        state = None
        try:
            state = net_passes.make_state(param, phase=phase, level=level, stages=stages)
            filtered = net_passes.filter_net(param, state)
            self.net_param = net_passes.insert_splits(filtered)
            with weights_provided(provided_layers(reads)):
                self._build()
            self._building = None
            self._analyze_backward()
            self._share_workspace()
            self.fusion = net_fusion.find(self)   # BatchNorm -> Scale -> ReLU chains: one step
        except CaffeError as e:
            if getattr(e, "layer_name", None) is None:
                e.layer_name = self._building     # the layer being set up, if any (summary uses it)
            if self._building is not None and e.layer_name == self._building \
                    and isinstance(e, ShapeError) and "layer '" not in str(e):
                # a blob's own shape error: name the layer that met it
                e = _naming_layer(e, self._building, self._building_type)
            raise locate_layer_error(e, self.source,
                                     net_passes.name_occurrence(param, state, e.layer_name))
        for read in reads:
            self._copy_read(read)
        if optimize:
            self.optimize(engine=optimize if isinstance(optimize, str) else None)

    def optimize(self, keep=(), threads=None, engine=None):
        """Inference mode, forward only; call after loading weights. ``engine``: "auto"
        (default, or ``CAFFEPY_INFER_ENGINE``: the fastest here of the engines whose outputs
        match the exact path, caffepy.infer.engine), "onnxruntime", "openvino" or "caffepy"
        (caffepy's own steps, caffepy.infer.plan: BatchNorm/Scale folded, ReLUs fused, Split and
        Dropout removed, activation buffers reused). ``keep``: further blob names to keep readable;
        ``threads``: "auto" / "fixed" (caffepy.infer.threads)."""
        if _optimizer[0] is None:
            raise NetError("net '%s': inference mode is not available (import caffepy.infer)"
                           % self.name)
        return _optimizer[0](self, keep, threads, engine)

    # -- building ------------------------------------------------------------------------------
    def _build(self):
        self.layers = []
        self._layer_names = []
        self.blobs = collections.OrderedDict()
        self.bottom_vecs, self.top_vecs = [], []
        self.bottom_names, self.top_names = collections.OrderedDict(), collections.OrderedDict()
        self._wiring = []         # (bottom names, top names) per layer index (names may repeat)
        self.bottom_need_backward, self.layer_need_backward = [], []
        self.blob_loss_weights = collections.OrderedDict()
        self.learnable_params, self.params_lr, self.params_weight_decay = [], [], []
        self.param_owners, self.param_display_names, self.param_layer_indices = [], [], []
        self.inputs = []
        blob_need_backward = {}
        available = collections.OrderedDict()
        param_by_name = {}
        for li, lp in enumerate(self.net_param.layer):
            self._building, self._building_type = lp.name, lp.type
            if not lp.HasField("phase"):
                lp.phase = self.phase
            if len(lp.propagate_down) and len(lp.propagate_down) != len(lp.bottom):
                raise NetError("layer '%s' (%s): propagate_down has %d values for %d bottoms"
                               % (lp.name, lp.type, len(lp.propagate_down), len(lp.bottom)))
            layer = create_layer(lp, phase=self.phase, dtype=self.dtype)
            layer.set_net(self)
            bottoms, need = [], []
            for j, name in enumerate(lp.bottom):
                if name not in self.blobs:
                    raise NetError("layer '%s' (%s): unknown bottom blob '%s' (bottom index %d)"
                                   % (lp.name, lp.type, name, j))
                bottoms.append(self.blobs[name])
                available.pop(name, None)
                pd = lp.propagate_down[j] if len(lp.propagate_down) else True
                need.append(bool(blob_need_backward.get(name, False) and pd))
            tops, top_names = [], list(lp.top)
            n_auto = 0
            if layer.auto_top_blobs:
                want = max(layer.min_top_blobs or 0, layer.exact_num_top_blobs or 0)
                n_auto = max(0, want - len(top_names))
            for j, name in enumerate(top_names):
                if j < len(lp.bottom) and lp.bottom[j] == name:
                    blob = self.blobs[name]           # in place
                elif name in self.blobs:
                    raise NetError("layer '%s' (%s): top blob '%s' produced by multiple sources"
                                   % (lp.name, lp.type, name))
                else:
                    blob = new_top_blob(self.dtype)
                    self.blobs[name] = blob
                tops.append(blob)
                available[name] = blob
            for _ in range(n_auto):
                tops.append(new_top_blob(self.dtype))
            if lp.type == "Input":
                self.inputs.extend(top_names)
            in_place = [(j, tuple(t.shape), t.count) for j, t in enumerate(tops)
                        if j < len(bottoms) and t is bottoms[j]]
            try:
                layer.setup(bottoms, tops)
            except (MemoryError, OverflowError) as e:     # a declared shape the host cannot hold
                raise NetError("layer '%s' (%s): its blobs do not fit in memory (tops %s: %s)"
                               % (lp.name, lp.type, [tuple(t.shape) for t in tops],
                                  type(e).__name__))
            net_passes.check_in_place(lp, tops, in_place)
            self.layers.append(layer)
            self._layer_names.append(lp.name)
            self.bottom_vecs.append(bottoms)
            self.top_vecs.append(tops)
            self.bottom_names[lp.name] = list(lp.bottom)
            self.top_names[lp.name] = top_names
            self._wiring.append((list(lp.bottom), top_names))
            for j, name in enumerate(top_names):
                w = layer.loss(j)
                if w or name not in self.blob_loss_weights:
                    self.blob_loss_weights[name] = w   # every blob, 0 for non-loss (pycaffe)
            need_bw = any(need)
            need_bw |= self._append_params(li, layer, lp, param_by_name)
            for name in top_names:
                blob_need_backward[name] = need_bw
            self.bottom_need_backward.append(need)
            self.layer_need_backward.append(need_bw)
        self.outputs = sorted(available)   # Caffe keeps available blobs in a std::set
        self.params = collections.OrderedDict(
            (name, layer.blobs) for name, layer in zip(self._layer_names, self.layers) if layer.blobs)

    def _analyze_backward(self):
        under_loss, skip = set(), set()
        for i in range(len(self.layers) - 1, -1, -1):
            layer, names = self.layers[i], self._wiring[i][1]
            contributes, skip_down = False, True
            for j, name in enumerate(names):
                if layer.loss(j) or name in under_loss:
                    contributes = True
                if name not in skip:
                    skip_down = False
            if self.layer_need_backward[i] and skip_down:
                self.layer_need_backward[i] = False
                self.bottom_need_backward[i] = [False] * len(self.bottom_need_backward[i])
            if not contributes:
                self.layer_need_backward[i] = False
            for j, name in enumerate(self._wiring[i][0]):
                if contributes:
                    under_loss.add(name)
                else:
                    self.bottom_need_backward[i][j] = False
                if not self.bottom_need_backward[i][j]:
                    skip.add(name)
        if self.net_param.force_backward:
            for i, layer in enumerate(self.layers):
                self.layer_need_backward[i] = True
                self.bottom_need_backward[i] = [
                    nb or layer.allow_force_backward(j) for j, nb in enumerate(self.bottom_need_backward[i])]
                layer.param_propagate_down = [True] * len(layer.blobs)

    def _share_workspace(self):
        """One scratch Workspace for every layer that declares one (the convolutions: column
        buffers, transposes, GEMM results), and column buffers kept from forward to backward only
        by layers that run backward with a weight gradient (the others recompute them if a
        weight gradient is asked for)."""
        shared = Workspace()
        for i, layer in enumerate(self.layers):
            if hasattr(type(layer), "workspace"):
                layer.workspace = shared
            if hasattr(type(layer), "keep_columns"):     # only the weight gradient reads them
                layer.keep_columns = bool(self.layer_need_backward[i]
                                          and layer.param_propagate_down[:1] == [True])

    # -- running -------------------------------------------------------------------------------
    def _index(self, layer_name):
        try:
            return self._layer_names.index(layer_name)
        except ValueError:
            raise NetError("net '%s' has no layer named '%s'" % (self.name, layer_name))

    def forward_from_to(self, start=0, end=None):
        """Run layers start..end (inclusive); returns the weighted loss."""
        end = len(self.layers) - 1 if end is None else end
        if self._plan is not None:
            if start != 0 or end != len(self.layers) - 1:
                raise NetError("net '%s': forward from/to a layer is not available in optimize "
                               "mode (layers are merged)" % self.name)
            return self._plan.forward()
        loss, i = 0.0, start
        chains = self.fusion.by_first if self.fusion and self.fusion.enabled else {}
        while i <= end:
            chain = chains.get(i)
            if chain is not None and chain.last <= end and chain.forward():
                i = chain.last + 1
                continue
            loss += self.layers[i].forward(self.bottom_vecs[i], self.top_vecs[i])
            i += 1
        return loss

    def backward_from_to(self, start=None, end=0):
        if self._plan is not None:
            raise NetError("net '%s': backward is not available in optimize mode" % self.name)
        start = len(self.layers) - 1 if start is None else start
        callbacks = self.on_backward_layer
        chains = self.fusion.by_last if self.fusion and self.fusion.enabled else {}
        i = start
        while i >= end:
            chain = chains.get(i)
            if chain is not None and chain.first >= end and chain.backward():
                for j in range(chain.last, chain.first - 1, -1):
                    for cb in callbacks:
                        cb(j)
                i = chain.first - 1
                continue
            if self.layer_need_backward[i]:
                self.layers[i].backward(self.top_vecs[i], self.bottom_need_backward[i], self.bottom_vecs[i])
                for cb in callbacks:
                    cb(i)
            i -= 1

    def forward_prefilled(self):
        return self.forward_from_to(0, len(self.layers) - 1)

    def forward_backward(self):
        loss = self.forward_from_to()
        self.backward_from_to()
        return loss

    def forward(self, blobs=None, start=None, end=None, **inputs):
        """pycaffe's forward: set ``inputs`` (must match the net inputs), run, return {output: data}."""
        blobs = list(blobs or [])
        start_i = 0 if start is None else self._index(start)
        if end is not None:
            end_i = self._index(end)
            outputs = set(self.top_names[end] + blobs)
        else:
            end_i = len(self.layers) - 1
            outputs = set(self.outputs + blobs)
        if inputs:
            if set(inputs) != set(self.inputs):
                raise NetError("input blob arguments %s do not match net inputs %s"
                               % (sorted(inputs), sorted(self.inputs)))
            for name, value in inputs.items():
                value = np.asarray(value)
                if value.ndim == 0 or value.shape[0] != self.blobs[name].shape[0]:
                    raise ShapeError("input '%s' is not batch sized: got shape %s, blob shape %s"
                                     % (name, value.shape, self.blobs[name].shape))
                self.blobs[name].data[...] = value
        self.forward_from_to(start_i, end_i)
        return {name: self.blobs[name].data for name in outputs}

    def backward(self, diffs=None, start=None, end=None, **top_diffs):
        """pycaffe's backward: set output diffs from kwargs, run, return {input: diff}."""
        diffs = list(diffs or [])
        start_i = len(self.layers) - 1 if start is None else self._index(start)
        if end is not None:
            end_i = self._index(end)
            outputs = set(self.bottom_names[end] + diffs)
        else:
            end_i = 0
            outputs = set(self.inputs + diffs)
        if top_diffs:
            if set(top_diffs) != set(self.outputs):
                raise NetError("top diff arguments %s do not match net outputs %s"
                               % (sorted(top_diffs), sorted(self.outputs)))
            for name, value in top_diffs.items():
                value = np.asarray(value)
                if value.ndim == 0 or value.shape[0] != self.blobs[name].shape[0]:
                    raise ShapeError("diff for '%s' is not batch sized: got shape %s, blob shape %s"
                                     % (name, value.shape, self.blobs[name].shape))
                self.blobs[name].diff[...] = value
        self.backward_from_to(start_i, end_i)
        return {name: self.blobs[name].diff for name in outputs}

    def reshape(self):
        if self._plan is not None:
            return self._plan.assign_buffers(self)
        for layer, bottom, top in zip(self.layers, self.bottom_vecs, self.top_vecs):
            layer.reshape(bottom, top)

    # -- lookups -------------------------------------------------------------------------------
    def has_blob(self, name):
        return name in self.blobs

    def blob_by_name(self, name):
        return self.blobs[name]

    def has_layer(self, name):
        return name in self._layer_names

    def layer_by_name(self, name):
        return self.layers[self._index(name)]

    @property
    def layer_names(self):
        return list(self._layer_names)

    @property
    def blob_names(self):
        return list(self.blobs)

    @property
    def layer_dict(self):
        return collections.OrderedDict(zip(self._layer_names, self.layers))

    def __repr__(self):
        return "<caffepy.Net '%s' phase=%s: %d layers, %d blobs>" % (
            self.name, caffe_pb2.Phase.Name(self.phase), len(self.layers), len(self.blobs))


def _parse_ctor_args(args, phase, weights):
    """Accept Net(proto, phase), Net(proto, weights, phase) and keyword forms."""
    if len(args) == 1:
        if isinstance(args[0], (str, os.PathLike)):
            weights = args[0]
        else:
            phase = args[0]
    elif len(args) == 2:
        weights, phase = args
    elif len(args) > 2:
        raise TypeError("Net(proto, [weights,] phase) takes at most 3 positional arguments")
    if weights is not None and not isinstance(weights, (list, tuple)):
        weights = os.fspath(weights)
    return phase, weights

