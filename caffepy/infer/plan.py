"""Inference mode's own engine, caffepy's steps: ``net.optimize(engine="caffepy")``, and
``Net(..., optimize=True)`` / ``net.optimize()`` wherever onnxruntime does not run the net
(caffepy.infer.engine).

The exact path runs every layer of the prototxt on its own blob, as Caffe does. This engine
rewrites the *execution plan* of a built TEST net (``net.layers`` and ``net.params`` stay as
they are, for introspection and saving) into fewer, larger passes:

1. **Folding.** A Convolution / InnerProduct whose top is read only by a BatchNorm with fixed
   statistics, optionally followed by a Scale (learned, one bottom) and / or a Bias, becomes one
   layer with ``W' = a W`` and ``b' = a (b - mu) + beta`` per output channel, where
   ``a = gamma / sqrt(var + eps)`` (``mu = sum_mu / s``, ``var = sum_var / s``; gamma 1 and beta 0
   when the Scale or Bias is absent), computed in float64. The weights are scaled in place (no
   second copy of them: peak memory stays at the exact path's), so ``net.params`` then holds the
   folded weights and saving or loading weights is refused in this mode.
2. **Fused activations.** A ReLU (any negative slope) whose bottom is only read by it, right
   after a Convolution / InnerProduct or an Eltwise SUM, runs inside that layer's output pass.
3. **Identity layers removed.** Split, and Dropout with ``scale_train: true`` (identity in
   TEST): their tops become aliases of the bottom blob.
4. **Concat elimination.** Convolutions whose top is read only by a Concat over channels write
   straight into their slice of its top (caffepy.infer.steps); a Concat with nothing left to
   copy is dropped (numba on only).
5. **Buffers reused by liveness.** Every intermediate blob's data is a view into a pool of
   buffers; a buffer is handed to a later blob once the last layer reading its previous owner
   has run (greedy, first fit by size). All activation diffs share one scratch buffer (inference
   never reads them).
6. **Compiled steps.** Each step becomes a closure over its arrays (caffepy.infer.steps:
   convolutions as GEMMs straight into their output or, for 3x3 ones, by Winograd
   (caffepy.infer.winograd); depthwise convolution, LRN and pooling by forward-only
   kernels), rebuilt whenever the buffers are; each forward pass runs them with the thread
   setting that has been fastest (caffepy.infer.threads), one of which splits the batch
   over the threads (caffepy.infer.shards).

The net's inputs and outputs keep their own memory and stay readable. A blob that was folded
away, or whose memory now also holds another blob, raises :class:`caffepy.errors.NetError` naming
the mode when read through ``net.blobs``. Backward is not available in this mode. The outputs
agree with the exact path to float32 rounding (folding reorders a few multiplications; tested
within 1e-5 relative on the zoo nets in tests/infer/test_optimize.py).
"""
import collections
import contextlib

import numpy as np

from . import shards as shards_mod
from . import steps as steps_mod
from .fold import affine_of, folded_copy, shallow
from .threads import ThreadChoice
from ..blob import Blob
from ..errors import NetError

MODE = "optimize mode (Net(..., optimize=True) / net.optimize())"
FOLDABLE = ("Convolution", "InnerProduct", "DepthwiseConvolution", "ConvolutionDepthwise")


class FoldedBlob(object):
    """Stands in ``net.blobs`` for a blob this mode does not keep: reading it is an error."""

    def __init__(self, name, why):
        self._name, self._why = name, why

    def __getattr__(self, attr):
        raise NetError("blob '%s' is not kept in %s: %s; build the net without optimize to "
                       "read it" % (self._name, MODE, self._why))


class Step(object):
    """One executed step: ``layer`` (possibly a folded copy) from ``bottom`` to ``top``;
    ``run()`` is its compiled closure (caffepy.infer.steps), rebuilt with the buffers."""
    __slots__ = ("layer", "name", "bottom", "top", "run")

    def __init__(self, layer, name, bottom, top):
        self.layer, self.name, self.bottom, self.top = layer, name, list(bottom), list(top)
        self.run = None


class Plan(object):
    """The rewritten layer sequence of an optimized net and its buffer pool."""
    engine = "caffepy"
    choice = None       # how auto chose the engine (caffepy.infer.engine)

    def __init__(self, net, keep=(), threads=None, fold_in_place=True):
        if not net.layers:
            raise NetError("net '%s' has no layers to optimize" % net.name)
        self.steps = [Step(l, n, b, t) for l, n, b, t in
                      zip(net.layers, net._layer_names, net.bottom_vecs, net.top_vecs)]
        self.gone = {}           # blob name -> why it is not readable
        self.folded = []         # (kept layer, [names of the layers folded into it])
        self.keep = set(net.inputs) | set(net.outputs) | set(keep)
        self.fold_in_place = fold_in_place
        self.index = {id(layer): i for i, layer in enumerate(net.layers)}
        self._fold_affine(net)
        self._fuse_relu(net)
        self._drop_identities(net)
        self.into = {}           # id(conv top) -> (Concat top blob, channel offset)
        self.compiled = steps_mod.available()
        self.shape_steps = self.steps      # reshaped in order, run or not (eliminated Concats)
        if self.compiled:
            self._eliminate_concat(net)
        self.pool = []
        self.scratch = steps_mod.Scratch(net.dtype)
        self.net = net
        self.threads = ThreadChoice(threads)
        self.assign_buffers(net)

    # -- helpers -------------------------------------------------------------------------------
    def _readers(self, blob, after):
        """Steps after index ``after`` that read ``blob``."""
        return [k for k in range(after + 1, len(self.steps))
                if any(b is blob for b in self.steps[k].bottom)]

    def _sole_reader(self, i, blob, net):
        """The step right after i when it is the only one to see step i's output ``blob``: it
        works in place (later readers see its result), or it is the blob's one reader and the
        blob is no net output. None otherwise."""
        readers = self._readers(blob, i)
        if not readers or readers[0] != i + 1:
            return None
        nxt = self.steps[i + 1]
        if len(nxt.top) == 1 and nxt.top[0] is blob:
            return i + 1
        name = self._name_of(net, blob)
        if len(readers) == 1 and name not in self.keep:
            return i + 1
        return None

    def _name_of(self, net, blob):
        for name, b in net.blobs.items():
            if b is blob:
                return name
        return None

    # -- 1. BatchNorm / Scale / Bias folding ---------------------------------------------------
    def _fold_affine(self, net):
        owners = collections.Counter(_address(b) for layer in net.layers for b in layer.blobs)
        i = 0
        while i < len(self.steps):
            st = self.steps[i]
            if st.layer.type not in FOLDABLE or len(st.bottom) != 1 or len(st.top) != 1 \
                    or owners[_address(st.layer.blobs[0])] > 1:     # weights shared: keep
                i += 1
                continue
            a = c = None
            folded = []
            while True:
                j = self._sole_reader(i, st.top[0], net)
                if j is None:
                    break
                nxt = self.steps[j]
                affine = affine_of(nxt.layer, len(nxt.bottom))
                if affine is None:
                    break
                na, nc = affine
                a, c = (na, nc) if a is None else (a * na, c * na + nc)
                self._merge_next(net, i, j)
                folded.append(nxt.name)
            if folded:
                st.layer = folded_copy(st.layer, a, c, self.fold_in_place)
                self.folded.append((st.name, folded))
            i += 1

    def _merge_next(self, net, i, j):
        """Step j (one bottom = step i's top) is absorbed: i now writes j's top."""
        st, nxt = self.steps[i], self.steps[j]
        old, new = st.top[0], nxt.top[0]
        if old is not new:
            name = self._name_of(net, old)
            if name is not None:
                self.gone[name] = "folded into layer '%s'" % st.name
        st.top = [new]
        del self.steps[j]

    # -- 2. ReLU fusion ------------------------------------------------------------------------
    def _fuse_relu(self, net):
        i = 0
        while i < len(self.steps):
            st = self.steps[i]
            if len(st.top) == 1 and ((st.layer.type in FOLDABLE and len(st.bottom) == 1)
                                     or _is_sum(st.layer)):
                j = self._sole_reader(i, st.top[0], net)
                if j is not None and self.steps[j].layer.type == "ReLU":
                    relu = self.steps[j]
                    if st.layer is _original(net, st.name):
                        st.layer = shallow(st.layer)
                    st.layer.fused_relu = float(relu.layer.negative_slope)
                    self._merge_next(net, i, j)
                    self.folded.append((st.name, [relu.name]))
            i += 1

    # -- 3. identities -------------------------------------------------------------------------
    def _drop_identities(self, net):
        alias = {}
        keep = []
        for st in self.steps:
            st.bottom = [alias.get(id(b), b) for b in st.bottom]
            lt = st.layer.type
            identity = lt == "Split" or (lt == "Dropout" and (st.layer.scale_train
                                                              or st.layer.ratio == 0))
            if identity and len(st.bottom) == 1:
                for t in st.top:
                    if t is not st.bottom[0]:
                        alias[id(t)] = st.bottom[0]
                continue
            keep.append(st)
        self.steps = keep
        for name, b in list(net.blobs.items()):
            if id(b) in alias:
                net.blobs[name] = alias[id(b)]     # same values as the exact path

    # -- 4. Concat elimination ------------------------------------------------------------------
    def _eliminate_concat(self, net):
        """Convolutions whose top is read only by a Concat over channels write straight into
        their slice of its top; a Concat left with nothing to copy is dropped."""
        producer = {}
        for k, st in enumerate(self.steps):
            for t in st.top:
                producer.setdefault(id(t), []).append(k)
        keep = []
        for k, st in enumerate(self.steps):
            if st.layer.type != "Concat" or len(st.top) != 1 or st.top[0].num_axes != 4 \
                    or getattr(st.layer, "axis", None) != 1:
                keep.append(st)
                continue
            top, off, rest, done = st.top[0], 0, [], []
            for b in st.bottom:
                src = producer.get(id(b), [])
                name = self._name_of(net, b)
                ok = (len(src) == 1 and src[0] < k and self._readers(b, src[0]) == [k]
                      and sum(x is b for x in st.bottom) == 1 and name not in self.keep
                      and b is not top)
                if ok:
                    pst = self.steps[src[0]]
                    ok = (len(pst.top) == 1 and len(pst.bottom) == 1
                          and steps_mod.conv_eligible(pst.layer, 1))
                if ok:
                    self.into[id(b)] = (top, off)
                    done.append(self.steps[src[0]].name)
                    if name is not None:
                        self.gone[name] = ("written straight into its channels of Concat '%s''s "
                                           "top" % st.name)
                else:
                    rest.append(b)
                off += b.shape[1]
            if rest or not done:
                keep.append(st)
            else:
                self.folded.append((done[-1], [st.name]))
        self.shape_steps, self.steps = self.steps, keep

    # -- 5. buffers by liveness ----------------------------------------------------------------
    def assign_buffers(self, net):
        """(Re)build the pool: run every step's reshape, then hand out views by liveness."""
        for st in self.shape_steps:
            st.layer.reshape(st.bottom, st.top)
        keep_ids = {id(net.blobs[n]) for n in self.keep if isinstance(net.blobs.get(n), Blob)}
        first, last, blobs = {}, {}, {}
        for k, st in enumerate(self.steps):
            for b in st.bottom:
                last[id(b)] = k
            for b in st.top:
                first.setdefault(id(b), k)
                last.setdefault(id(b), k)
                blobs[id(b)] = b
        for bid, (top, _) in self.into.items():     # a Concat's top is written from its
            first[id(top)] = min(first.get(id(top), first[bid]), first[bid])   # first producer
            last.setdefault(id(top), first[id(top)])
            blobs.setdefault(id(top), top)
        dtype = net.dtype
        order = sorted((bid for bid in blobs if bid not in keep_ids and bid not in self.into),
                       key=lambda b: first[b])
        scratch = np.empty(max([blobs[b].count for b in blobs] + [1]), dtype)
        free, pool, owner = [], [], {}
        ends = collections.defaultdict(list)
        for bid in order:
            k = first[bid]
            for done in [e for e in list(ends) if e < k]:
                free.extend(ends.pop(done))
            blob = blobs[bid]
            size = blob.count
            fit = [p for p in free if pool[p].size >= size]
            if fit:
                p = min(fit, key=lambda q: pool[q].size)
                free.remove(p)
            else:
                p = len(pool)
                pool.append(np.empty(size, dtype))
            owner.setdefault(p, []).append(bid)
            data = pool[p][:size].reshape(blob.shape)
            data[...] = blob.data
            blob.set_arrays(data, scratch[:size].reshape(blob.shape))
            ends[last[bid]].append(p)
        for bid in self.into:                       # never read: no memory of their own
            blob = blobs[bid]
            view = scratch[:blob.count].reshape(blob.shape)
            blob.set_arrays(view, view)
        self.pool = pool
        steps_mod.compile_plan(self, net)
        shards_mod.compile_shards(self)
        self.bytes = (sum(p.nbytes for p in pool) + scratch.nbytes + self.scratch.col.nbytes
                      + self.scratch.res.nbytes)
        shared = {bid for ids in owner.values() if len(ids) > 1 for bid in ids}
        for name, b in list(net.blobs.items()):
            if isinstance(b, Blob) and id(b) in shared and name not in self.keep:
                self.gone.setdefault(name, "its memory is reused by later layers")
        for name, why in self.gone.items():
            if name not in self.keep:
                net.blobs[name] = FoldedBlob(name, why)

    # -- running -------------------------------------------------------------------------------
    def forward(self, replay=None):
        """One pass; ``replay``: {layer index: [top arrays]} written instead of running those
        source layers (caffepy.infer.choice.Reference): then the steps run once, in order, on
        the whole batch, outside the thread choice."""
        from .. import common
        for b, arr in self._arrays:
            if b.data is not arr:              # a kept blob got new memory: rebuild the views
                self.assign_buffers(self.net)
                break
        if common.mode() == common.GPU:
            if self.into:
                raise NetError("net '%s': %s runs on the CPU (its convolutions write into "
                               "Concat tops); call caffepy.set_mode_cpu()" % (self.net.name, MODE))
            return sum(st.layer.forward(st.bottom, st.top) for st in self.steps)
        if replay is not None:
            return self._run_steps(replay)
        return self.threads.run(self._run_steps, self._split if self.compiled else None)

    def _split(self, t):
        segs = shards_mod.segments(self, t)
        return None if segs is None else (lambda: shards_mod.run_sharded(segs))

    def _run_steps(self, replay=None):
        loss = 0.0
        for st in self.steps:
            if replay is not None and self.index.get(id(st.layer)) in replay:
                for t, value in zip(st.top, replay[self.index[id(st.layer)]]):
                    t.data[...] = value
                continue
            r = st.run()
            if r:
                loss += r
        return loss


def _is_sum(layer):
    return layer.type == "Eltwise" and layer.op == type(layer.layer_param.eltwise_param).SUM


def _address(blob):
    return blob.data.__array_interface__["data"][0]


def _original(net, name):
    return net.layers[net._layer_names.index(name)]


def validate(net, keep=(), threads=None):
    """The checks of entering inference mode, whatever the engine."""
    from ..proto import caffe_pb2
    if net._plan is not None:
        raise NetError("net '%s' is already in %s" % (net.name, MODE))
    if net.phase != caffe_pb2.TEST:
        raise NetError("net '%s': %s needs a TEST-phase net" % (net.name, MODE))
    unknown = [k for k in keep if k not in net.blobs]
    if unknown:
        raise NetError("net '%s': cannot keep unknown blob(s) %s in %s"
                       % (net.name, ", ".join(unknown), MODE))
    if threads not in (None, "auto", "fixed"):
        raise NetError("net '%s': threads must be 'auto' or 'fixed' in %s, got %r"
                       % (net.name, MODE, threads))


@contextlib.contextmanager
def trial(net, keep=(), threads=None):
    """A Plan of ``net`` to check and time, after which the net is as it was: weights folded
    into new arrays (not in place), and ``net.blobs``, every blob's arrays and every layer's
    shapes put back when the block ends."""
    names = dict(net.blobs)
    blobs = {id(b): b for b in list(names.values())
             + [b for vec in net.bottom_vecs + net.top_vecs for b in vec]}
    storage = [(b, b.storage()) for b in blobs.values()]
    try:
        yield Plan(net, keep, threads, fold_in_place=False)
    finally:
        net.blobs.clear()
        net.blobs.update(names)
        for b, s in storage:
            b.restore(s)
        for layer, bottom, top in zip(net.layers, net.bottom_vecs, net.top_vecs):
            layer.reshape(bottom, top)


def optimize(net, keep=(), threads=None):
    """Switch ``net`` (built, weights loaded) to inference mode with caffepy's own steps;
    returns the Plan. ``keep``: names of further blobs to keep readable (never folded away,
    memory of their own). ``threads``: "auto" (default, or ``CAFFEPY_THREADS``) runs each
    forward pass with the BLAS thread limit or one thread, whichever has been faster
    (caffepy.infer.threads); "fixed" always uses the limit. ``Net.optimize`` chooses the engine
    first (caffepy.infer.engine)."""
    validate(net, keep, threads)
    plan = Plan(net, keep, threads)
    net._plan = plan
    return plan
