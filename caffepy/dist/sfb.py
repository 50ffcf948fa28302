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
(:func:`caffepy.dist.sparse.step_array`). Biases stay on the dense path. A layer uses SFB when
``m (N + K) < N K`` (:func:`plan`, overridable per layer name), so it pays off for wide layers
with small batches (CaffeNet's fc6 at batch 16: 213 K numbers instead of 37.7 M). With
``iter_size`` > 1 the factors of each pass are stacked (rows scaled by 1 / iter_size).

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


def plan(net, overrides=None):
    """The SFB layers of ``net``: {layer index: SFBLayer}.

    A layer is chosen when ``m (N + K) < N K`` at the net's current batch; ``overrides`` maps a
    layer name to True (always SFB) or False (always dense). Weights shared with other layers
    (ParamSpec names used twice) always stay dense.
    """
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(net._layer_names)
    if unknown:
        raise CaffeError("SFB overrides name unknown layers: %s" % ", ".join(sorted(unknown)))
    shared = {o for o in net.param_owners if o >= 0}
    chosen = {}
    for li, p in _weight_params(net).items():
        layer, name = net.layers[li], net._layer_names[li]
        m, n, k = layer.m, layer.num_output, layer.k
        use = overrides.get(name, m * (n + k) < n * k)
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
