"""Compiled steps of inference mode (caffepy.infer.plan): one closure per step of a Plan.

After the Plan has rewritten the layer sequence and handed out buffers, :func:`compile_steps`
turns every step into a closure over the arrays it reads and writes, so a forward pass is a loop
of plain calls: no reshape, no shape checks, no allocation, no loss-weight sum per layer.

* **Convolution** (2-d, one bottom, numba on; grouped ones too, but not depthwise: one GEMM per
  image and group): per image, ``Y_n = W col(x_n)`` by one
  GEMM written straight into the top (or into its channel slice of a Concat's top, see below),
  then one pass adding the bias and applying the fused ReLU in place. ``col(x_n)`` is ``x_n``
  itself for a 1x1 / stride 1 / pad 0 convolution (no im2col), otherwise an im2col into one
  column buffer that all convolutions share. For a batch whose output planes are small
  (``OH * OW < BATCH_GEMM_BELOW``) one GEMM over the whole batch's columns is faster than N
  thin ones: the columns of all images go side by side, and the result is scattered to the
  images with the bias and ReLU in the same pass.
* **Concat elimination**: a Concat (axis 1) whose bottoms are such convolutions' tops, each read
  by nothing else, is not run: each convolution writes its channels of the Concat's top.
  Bottoms of other kinds are still copied into their slice by the remaining Concat step.
* **Pooling** MAX / AVE (2-d, one top, numba on): straight into the top; MAX keeps no argmax.
* **Depthwise convolution** (2-d, group = channels, any multiplier) and **LRN** across
  channels: forward-only kernels (caffepy.infer.kernels) with the bias and ReLU fused;
  on part of the batch also an **Eltwise SUM** of two bottoms (with its fused ReLU).
* Each closure can also be built for part of the batch (``_closure(..., part=(lo, hi))``),
  with its own scratch buffers: caffepy.infer.shards runs the parts on several threads.
* **Element-wise layers computed through the C math library** in the exact path (Sigmoid, TanH,
  BNLL, ELU, Swish, Exp, Log, Power: caffepy.math._numba_libm) run their numpy formula here.
* Every other step calls its layer's ``forward_cpu`` (its reshape already ran when the buffers
  were assigned); a layer with a loss weight, or any layer in GPU mode, runs ``forward``.

Without numba every step runs its layer's own forward pass (same results, no speed-up here).
"""
import numpy as np

from ..blob import Blob
from ..layers.conv import ConvolutionLayer
from . import winograd
from ..math import kernels

# OH * OW below which a batch of images is convolved by one GEMM instead of one per image
BATCH_GEMM_BELOW = 1024


def available():
    """Whether the compiled steps can be used now (numba installed and switched on); a Plan
    decides this once, when it is built."""
    return kernels.get() is not None


def _ik():
    from . import kernels as infer_kernels
    return infer_kernels


def _plain_conv(layer):
    """A Convolution whose forward is Convolution's: a subclass with a forward of its own
    (ConvolutionFixed rounds its weights first) keeps its layer."""
    return (isinstance(layer, ConvolutionLayer)
            and type(layer).forward_cpu is ConvolutionLayer.forward_cpu)


def conv_eligible(layer, nbottom):
    """Whether a step's layer is a convolution the compiled step runs (2-d; grouped ones too,
    but not depthwise ones: :func:`dw_eligible`)."""
    return (_plain_conv(layer) and nbottom == 1 and layer.num_spatial == 2
            and layer.axis == 1 and (layer.group == 1 or layer.channels != layer.group)
            and layer.plain_weights)


class Scratch(object):
    """Column and GEMM-result buffers shared by all steps (they run one after another)."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.col = np.empty(0, dtype)
        self.res = np.empty(0, dtype)

    def need(self, col, res):
        if col > self.col.size:
            self.col = np.empty(col, self.dtype)
        if res > self.res.size:
            self.res = np.empty(res, self.dtype)


def conv_buffers(layer, x, scratch):
    """Size the column and result buffers a compiled convolution needs."""
    if winograd.eligible(layer, x.shape):
        scratch.need(*winograd.buffers(layer, x.shape))
        return
    n, c, h, w = x.shape
    oh, ow = layer.out_spatial
    p = oh * ow
    k = c // layer.group * layer.kernel[0] * layer.kernel[1]
    one = _is_1x1(layer)
    batched = _batched(layer, n, p)
    col = (k * p * n if batched else (0 if one else k * p))
    res = layer.num_output * p * n if batched else 0
    scratch.need(col, res)


def _is_1x1(layer):
    return (layer.kernel == (1, 1) and layer.stride == (1, 1) and layer.pad == (0, 0))


def _batched(layer, n, p):
    """Whether the convolution runs one GEMM over the whole batch's columns (small planes, one
    group) instead of one per image (and group)."""
    return n > 1 and p < BATCH_GEMM_BELOW and layer.group == 1


def conv_step(layer, x, out, scratch, plan=None):
    """The closure of a convolution from x (N, C, H, W) into out (N, M, OH * OW) (a view: the
    top, or a channel slice of a Concat's top); a 3x3 one by Winograd when it pays
    (caffepy.infer.winograd; ``plan`` keeps the transformed filters). A grouped one (G groups,
    not depthwise) runs one GEMM per image and group, ``Y_ng = W_g col(x_ng)``, into the group's
    output channels."""
    ik = _ik()
    n, c, h, w = x.shape
    oh, ow = layer.out_spatial
    p = oh * ow
    m, g = layer.num_output, layer.group
    cg, mg = c // g, m // g
    (kh, kw), (ph, pw), (sh, sw), (dh, dw) = (layer.kernel, layer.pad, layer.stride,
                                              layer.dilation)
    k = cg * kh * kw
    bias = layer.blobs[1].data.reshape(-1) if layer.bias_term else np.empty(0, x.dtype)
    relu = layer.fused_relu is not None
    slope = float(layer.fused_relu) if relu else 0.0
    if plan is not None and winograd.eligible(layer, x.shape):
        return winograd.step(layer, winograd.weights(plan, layer), x, out, bias, slope, relu,
                             scratch)
    wg = layer.blobs[0].data.reshape(g, mg, k)
    one = _is_1x1(layer)
    geo = (kh, kw, ph, pw, sh, sw, dh, dw, oh, ow)
    xs = x.reshape(n, c, h * w)
    matmul, im2col = np.matmul, ik.im2col
    if _batched(layer, n, p):
        wmat = wg[0]
        col = scratch.col[:k * n * p].reshape(k, n * p)
        res = scratch.res[:m * n * p].reshape(m, n * p)
        gather, scatter = ik.gather, ik.scatter_bias_act
        if one:
            def run():
                gather(xs, col)
                matmul(wmat, col, out=res)
                scatter(res, bias, slope, relu, out)
        else:
            cols = [col[:, i * p:(i + 1) * p] for i in range(n)]

            def run():
                for i in range(n):
                    im2col(x[i], *geo, cols[i])
                matmul(wmat, col, out=res)
                scatter(res, bias, slope, relu, out)
        return run
    bias_act = ik.bias_act
    col = None if one else scratch.col[:k * p].reshape(k, p)
    # per image: its groups' GEMMs (1x1 straight from the image), then its bias + ReLU pass
    images = [(out[i], [(x[i, j * cg:(j + 1) * cg], xs[i, j * cg:(j + 1) * cg], wg[j],
                         out[i, j * mg:(j + 1) * mg]) for j in range(g)]) for i in range(n)]

    def run():
        for yi, groups in images:
            for xj, xflat, wj, yj in groups:
                if one:
                    matmul(wj, xflat, out=yj)
                else:
                    im2col(xj, *geo, col)
                    matmul(wj, col, out=yj)
            bias_act(yi, bias, slope, relu)
    return run


def dw_eligible(layer, nbottom):
    """Whether a step's layer is a 2-d depthwise convolution (group = channels, any multiplier)
    the compiled depthwise step runs."""
    return (_plain_conv(layer) and nbottom == 1 and layer.num_spatial == 2
            and layer.axis == 1 and layer.channels == layer.group > 1
            and layer.plain_weights)


def dw_step(layer, x, y):
    """The closure of a depthwise convolution x (N, C, H, W) -> y (N, M, OH, OW): the
    forward-only kernel (row-buffer taps, bias and ReLU fused), same sums as the layer's."""
    kern = _ik().dw_conv
    bias = layer.blobs[1].data.reshape(-1) if layer.bias_term else np.empty(0, x.dtype)
    relu = layer.fused_relu is not None
    slope = float(layer.fused_relu) if relu else 0.0
    (kh, kw), (ph, pw), (sh, sw), (dh, dw) = (layer.kernel, layer.pad, layer.stride,
                                              layer.dilation)
    w = layer.blobs[0].data
    y4 = y.reshape((y.shape[0], layer.num_output) + tuple(layer.out_spatial))
    return lambda: kern(x, w, bias, kh, kw, ph, pw, sh, sw, dh, dw, slope, relu, y4)


def lrn_step(layer, x, y):
    """The closure of an LRN across channels (4-d), or None for WITHIN_CHANNEL."""
    if not layer.across or x.ndim != 4:
        return None
    kern = _ik().lrn_across
    dt = x.dtype.type
    x3, y3 = x.reshape(x.shape[0], x.shape[1], -1), y.reshape(y.shape[0], y.shape[1], -1)
    args = (layer.size, dt(layer.alpha / layer.size), float(layer.beta), dt(layer.k))
    return lambda: kern(x3, *args, y3)


def sum_step(layer, a, b, y):
    """The closure of an Eltwise SUM of two bottoms (coefficients, fused ReLU)."""
    kern = _ik().sum2_act
    relu = layer.fused_relu is not None
    slope = float(layer.fused_relu) if relu else 0.0
    ca, cb = float(layer.coeffs[0]), float(layer.coeffs[1])
    a, b, y = a.reshape(-1), b.reshape(-1), y.reshape(-1)
    return lambda: kern(a, b, ca, cb, slope, relu, y)


def _is_sum2(layer, st):
    return (layer.type == "Eltwise" and len(st.bottom) == 2
            and layer.op == type(layer.layer_param.eltwise_param).SUM)


def pool_step(layer, x, y):
    """The closure of a MAX / AVE Pooling layer, or None when it is of another kind."""
    ik = _ik()
    P = type(layer.layer_param.pooling_param)
    if layer.method not in (P.MAX, P.AVE) or x.ndim != 4:
        return None
    g = layer.geom
    geo = g.kernel + g.stride + g.pad
    xp = x.reshape((-1,) + x.shape[2:])
    yp = y.reshape((-1,) + y.shape[2:])
    if layer.method == P.AVE:
        from ..math._numba_kernels import ave_pool as ave
        div, zero = layer._divisors(x.dtype), x.dtype.type(0)
        return lambda: ave(xp, *geo, div, zero, yp)
    mp = ik.max_pool_flat if tuple(g.stride) == (1, 1) else ik.max_pool_rows
    lowest = -np.finfo(x.dtype).max
    return lambda: mp(xp, *geo, lowest, yp)


def copy_step(pairs):
    """Copies (src, dst) array pairs: the bottoms a Concat still has to copy."""
    def run():
        for src, dst in pairs:
            np.copyto(dst, src)
    return run


def layer_step(layer, bottom, top):
    if any(layer.loss_weights):
        return lambda: layer.forward(bottom, top)
    if _numpy_elementwise(layer):
        f, x, y = layer.f, bottom[0], top[0]

        def run():
            y.data[...] = f(x.data)
        return run
    fwd = layer.forward_cpu
    return lambda: fwd(bottom, top)


def _numpy_elementwise(layer):
    """An element-wise layer (Sigmoid, TanH, Swish ...) whose exact forward goes through the C
    math library in Caffe's order (caffepy.math._numba_libm; 5x numpy's time for tanh): here its
    numpy formula, within a unit or two in the last place, which the plan's check allows."""
    from ..layers.neuron import ElementwiseLayer
    return isinstance(layer, ElementwiseLayer) and \
        type(layer).c_forward is not ElementwiseLayer.c_forward and \
        type(layer).forward_cpu is ElementwiseLayer.forward_cpu


def compile_plan(plan, net):
    """Give every step of ``plan`` its closure (after the buffers were assigned) and note the
    arrays of the kept blobs (a kept blob that gets new memory makes the plan rebuild). The
    per-shard closures (caffepy.infer.shards) are made by the caller afterwards."""
    for st in plan.steps:
        if plan.compiled and conv_eligible(st.layer, len(st.bottom)):
            conv_buffers(st.layer, st.bottom[0].data, plan.scratch)
    plan.wino = {}
    kept = [net.blobs.get(n) for n in sorted(plan.keep)]
    plan._arrays = [(b, b.data) for b in kept if isinstance(b, Blob)]
    for st in plan.steps:
        st.run = _closure(plan, st)


def _out_view(plan, top, m, arr):
    """(N, M, P) array a convolution writes: its top, or its slice of a Concat's top."""
    into = plan.into.get(id(top))
    if into is None:
        t = arr(top)
        return t.reshape(t.shape[0], m, -1)
    cat, off = into
    c = arr(cat)
    return c.reshape(c.shape[0], c.shape[1], -1)[:, off:off + m]


def splittable(plan, st):
    """Whether step ``st`` has a closure that can run on part of the batch (see _closure)."""
    layer = st.layer
    if not plan.compiled or any(layer.loss_weights):
        return False
    if conv_eligible(layer, len(st.bottom)) or dw_eligible(layer, len(st.bottom)):
        return True
    if layer.type == "Pooling" and len(st.top) == 1:
        P = type(layer.layer_param.pooling_param)
        return layer.method in (P.MAX, P.AVE)
    if layer.type == "LRN":
        return layer.across
    if _is_sum2(layer, st):
        return True
    return layer.type == "Concat" and any(id(b) in plan.into for b in st.bottom)


def _closure(plan, st, arr=None, scratch=None):
    """The closure of step ``st``; ``arr(blob)``: the array it reads or writes for a blob
    (default its data; caffepy.infer.shards gives a part's images), ``scratch``: the
    column buffers (default the plan's)."""
    layer = st.layer
    full = arr is None
    arr = (lambda b: b.data) if full else arr
    scratch = plan.scratch if scratch is None else scratch
    if plan.compiled and (full or splittable(plan, st)):
        if conv_eligible(layer, len(st.bottom)):
            out = _out_view(plan, st.top[0], layer.num_output, arr)
            return conv_step(layer, arr(st.bottom[0]), out, scratch, plan)
        if dw_eligible(layer, len(st.bottom)):
            return dw_step(layer, arr(st.bottom[0]), arr(st.top[0]))
        if layer.type in ("Pooling", "LRN") and len(st.top) == 1 \
                and not any(layer.loss_weights):
            make = pool_step if layer.type == "Pooling" else lrn_step
            fn = make(layer, arr(st.bottom[0]), arr(st.top[0]))
            if fn is not None:
                return fn
        if not full and _is_sum2(layer, st):        # on the whole batch: the layer's own
            return sum_step(layer, arr(st.bottom[0]), arr(st.bottom[1]), arr(st.top[0]))
        if layer.type == "Concat" and any(id(b) in plan.into for b in st.bottom):
            top = arr(st.top[0])
            t3 = top.reshape(top.shape[0], top.shape[1], -1)
            pairs, off = [], 0
            for b in st.bottom:
                c = b.shape[1]
                if id(b) not in plan.into:
                    x = arr(b)
                    pairs.append((x.reshape(x.shape[0], c, -1), t3[:, off:off + c]))
                off += c
            return copy_step(pairs)
    if not full:
        raise ValueError("step '%s' cannot run on part of the batch" % st.name)
    return layer_step(layer, st.bottom, st.top)
