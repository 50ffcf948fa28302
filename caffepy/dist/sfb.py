"""Sufficient-factor broadcasting (SFB) for InnerProduct weights.

An InnerProduct layer's weight gradient over a batch is a product of two thin matrices, its
*sufficient factors*: with the bottom viewed as ``x`` (m, K) (m = product of the axes before
``axis``) and the top diff ``dy`` (m, N)::

    W (N, K):                dW = dy^T x       factors (u, v) = (dy, x)
    W (K, N) (``transpose``): dW = x^T dy       factors (u, v) = (x, dy)

Instead of the dense N x K gradient a worker sends ``(u, v)``, m (N + K) numbers, to every other
worker, and each worker rebuilds the gradient of the whole step locally as the mean over workers
``sum_w u_w^T v_w / W`` (one GEMM over the factors stacked in worker order, so every worker gets
the same bits) and applies the solver's own update rule to its replica of the weight
(:func:`caffepy.dist.sparse.step_array`). Biases stay on the dense path. With ``iter_size`` > 1
the factors of each pass are stacked (rows scaled by 1 / iter_size).

Which layers (:func:`plan` with a :class:`CostModel`; overridable per layer name): Poseidon's
hybrid communication (Zhang et al. 2017, its BestScheme) compares what the busiest machine moves
per step either way. With W workers, r factor rows per worker (sub-batch rows x iter_size) and an
N x K weight, SFB makes every worker send its r (N + K) numbers to the W - 1 others and receive as
many: ``2 r (N + K) (W - 1)`` per worker. Dense, a worker pushes N K and pulls N K through its
group's stub, the stub pushes the group's mean to the servers and pulls the new values; a server
holding a 1/P slice moves ``2 N K / P`` per group it serves, and roles sharing a process (stub and
worker g.0, servers on worker processes unless ``server_worker_separate``) exchange for free. The
model counts, per process of the topology (its MPI placement), the numbers it sends plus receives
and takes the maximum; a layer uses SFB when that maximum is smaller than the dense one (a tie
stays dense: SFB also costs each worker a GEMM and a replica of the history). With one worker per
group (G = W) and P separate servers this is ``2 r (N + K) (W - 1) < 2 N K max(1, W / P)``:
SFB pays off for wide layers with small batches and few workers (CaffeNet's fc6 at 16 rows per
worker and 4 workers: 640 K numbers instead of 75 M).

Wire format: ``DistHeader(kind=SFB_FACTORS, param=<learnable index>, step, flag=<worker id>)``
and two raw buffers, ``u`` then ``v`` (their widths follow from the weight's shape).
"""
import numpy as np

from ..errors import CaffeError
from . import transport as T

SFB_FACTORS = 43
T.KIND_NAMES[SFB_FACTORS] = "SFB_FACTORS"


class SFBLayer(object):
    """One InnerProduct layer on SFB: its layer index, weight param index and factor widths."""

    def __init__(self, li, param, layer):
        self.li, self.param, self.layer = li, param, layer
        n, k = layer.num_output, layer.k
        self.u_cols, self.v_cols = (k, n) if layer.transpose else (n, k)
        self.shape = layer.blobs[0].shape

    def factors(self, bottom, top):
        """(u, v) of the last backward, copied (the net reuses its buffers)."""
        x = bottom[0].data.reshape(self.layer.m, self.layer.k)
        dy = top[0].diff.reshape(self.layer.m, self.layer.num_output)
        return (x.copy(), dy.copy()) if self.layer.transpose else (dy.copy(), x.copy())


def _weight_params(net):
    """{layer index: learnable index of its weight} for InnerProduct layers with a learnable weight."""
    out = {}
    for p, (li, k) in enumerate(net.param_layer_indices):
        if k == 0 and net.layers[li].type == "InnerProduct" and net.params_lr[p] != 0:
            out[li] = p
    return out


class Choice(object):
    """The cost model's decision for one weight, with its inputs (numbers, not bytes)."""

    def __init__(self, name, shape, rows, workers, sfb_numbers, dense_numbers):
        self.name, self.shape, self.rows, self.workers = name, tuple(shape), rows, workers
        self.sfb, self.dense = sfb_numbers, dense_numbers
        self.use = sfb_numbers < dense_numbers

    def describe(self):
        return ("SFB choice for layer '%s' (weight %s, %d factor rows per worker, %d workers): "
                "factors move %d numbers, dense push/pull %d at the busiest process -> %s"
                % (self.name, "x".join(map(str, self.shape)), self.rows, self.workers, self.sfb,
                   self.dense, "SFB" if self.use else "dense"))


class CostModel(object):
    """Per-step traffic of a weight at the busiest process of ``topo`` (a
    :class:`~caffepy.dist.topology.Topology`: groups, workers, stubs, server slices, process map),
    SFB against dense; ``iter_size`` passes stack their factors."""

    def __init__(self, topo, iter_size=1):
        self.topo, self.iter_size = topo, iter_size

    def rows(self, layer):
        """Factor rows a worker sends per step: its sub-batch's rows times the passes."""
        return layer.m // self.topo.K * self.iter_size

    def sfb_numbers(self, numbers):
        """Every worker sends ``numbers`` to every other worker: sent + received per process."""
        t = self.topo
        load = {}
        for w in t.workers():
            for v in t.workers():
                a, b = t.process_of(w), t.process_of(v)
                if a != b:
                    load[a] = load.get(a, 0) + numbers
                    load[b] = load.get(b, 0) + numbers
        return max(load.values()) if load else 0

    def dense_numbers(self, p):
        """Param p's push and pull: workers to their stub, stubs (one per host of a group) to the
        servers of the slices."""
        t = self.topo
        n = t.param_counts[p]
        load = {}

        def move(a, b, count):
            if a != b:
                load[a] = load.get(a, 0) + 2 * count
                load[b] = load.get(b, 0) + 2 * count
        for g in range(t.G):
            for ep in t.stubs_of_group(g):
                stub = t.process_of(ep)
                for w in t.workers_of_stub(ep):
                    move(t.process_of(w), stub, n)
                for off, size, j in t.slices[p]:
                    move(stub, t.process_of(t.server(t.server_group_of(g), j)), size)
        return max(load.values()) if load else 0

    def choice(self, name, p, layer, shape):
        rows = self.rows(layer)
        return Choice(name, shape, rows, self.topo.W,
                      self.sfb_numbers(rows * (layer.num_output + layer.k)), self.dense_numbers(p))


def plan(net, overrides=None, cost=None, choices=None):
    """The SFB layers of ``net``: {layer index: SFBLayer}.

    ``overrides`` maps a layer name to True (always SFB) or False (always dense); any other
    InnerProduct weight is SFB when ``cost`` (a :class:`CostModel`) says so (no model: dense).
    The model's decisions go into ``choices`` ({layer name: Choice}) if given. Weights shared with
    other layers (ParamSpec names used twice) always stay dense.
    """
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(net._layer_names)
    if unknown:
        raise CaffeError("SFB overrides name unknown layers: %s" % ", ".join(sorted(unknown)))
    shared = {o for o in net.param_owners if o >= 0}
    chosen = {}
    choices = {} if choices is None else choices
    for li, p in _weight_params(net).items():
        layer, name = net.layers[li], net._layer_names[li]
        use = overrides.get(name)
        if use is None and cost is not None:
            choices[name] = cost.choice(name, p, layer, layer.blobs[0].shape)
            use = choices[name].use
        if use and p in shared:
            if overrides.get(name):
                raise CaffeError("layer '%s': a shared weight cannot use SFB" % name)
            use = False
        if use:
            chosen[li] = SFBLayer(li, p, layer)
    for name, want in overrides.items():
        li = net._layer_names.index(name)
        if want and li not in chosen:
            raise CaffeError("layer '%s' (%s) cannot use SFB: not an InnerProduct with a learnable "
                             "weight" % (name, net.layers[li].type))
    return chosen


class FactorCollector(object):
    """Hooks ``net.on_backward_layer``: keeps the factors of each SFB layer's backward passes."""

    def __init__(self, net, layers):
        self.net, self.layers = net, layers
        self.factors = {sl.param: [] for sl in layers.values()}
        net.on_backward_layer.append(self)

    def __call__(self, li):
        sl = self.layers.get(li)
        if sl is not None:
            self.factors[sl.param].append(sl.factors(self.net.bottom_vecs[li], self.net.top_vecs[li]))

    def take(self, iter_size=1):
        """{param: (u, v)} of the step (passes stacked, u scaled by 1 / iter_size); resets."""
        out = {}
        for p, pairs in self.factors.items():
            if not pairs:
                continue
            u = np.concatenate([a for a, _ in pairs]) if len(pairs) > 1 else pairs[0][0]
            v = np.concatenate([b for _, b in pairs]) if len(pairs) > 1 else pairs[0][1]
            if iter_size > 1:
                u *= u.dtype.type(1.0) / u.dtype.type(iter_size)
            out[p] = (u, v)
            self.factors[p] = []
        return out

    def detach(self):
        self.net.on_backward_layer.remove(self)


def message(param, step, worker, u, v):
    """The SFB_FACTORS message of one worker's factors: (header, buffers)."""
    return T.header(SFB_FACTORS, param=param, step=step, flag=worker), [u, v]


def unpack(h, bufs, sl):
    """(worker, u, v) of an SFB_FACTORS message for SFBLayer ``sl``."""
    if h.kind != SFB_FACTORS or h.param != sl.param:
        raise CaffeError("expected SFB factors of param %d, got %s of param %d"
                         % (sl.param, T.KIND_NAMES.get(h.kind, h.kind), h.param))
    u, v = bufs[0].reshape(-1, sl.u_cols), bufs[1].reshape(-1, sl.v_cols)
    if u.shape[0] != v.shape[0]:
        raise CaffeError("SFB factors of param %d: %d rows in u, %d in v"
                         % (sl.param, u.shape[0], v.shape[0]))
    return int(h.flag), u, v


def rebuild(by_worker, nworkers, out=None):
    """The mean gradient ``sum_w u_w^T v_w / nworkers`` from {worker: (u, v)} (worker order)."""
    if len(by_worker) != nworkers:
        raise CaffeError("SFB: factors of %d workers, expected %d" % (len(by_worker), nworkers))
    order = sorted(by_worker)
    u = np.concatenate([by_worker[w][0] for w in order])
    v = np.concatenate([by_worker[w][1] for w in order])
    g = np.matmul(u.T, v, out=out)
    if nworkers > 1:
        g *= g.dtype.type(1.0) / g.dtype.type(nworkers)
    return g


def dense_numbers(sl):
    return int(np.prod(sl.shape))


def factor_numbers(sl, m):
    return m * (sl.u_cols + sl.v_cols)
