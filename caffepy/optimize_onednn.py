"""oneDNN convolutions in inference mode (caffepy.optimize; ``pip install caffepy[onednn]``).

Where oneDNN is loaded (caffepy.math.onednn), a compiled convolution step (2-d, one group: the
ones caffepy.optimize_steps would run as GEMMs or by Winograd) runs oneDNN's
``forward_inference`` primitive instead (caffepy.math.onednn_infer.InferConvPlan): the bias and a
fused ReLU inside the primitive, the layer's (folded) weights reordered into oneDNN's blocked
format once per compiled plan, the input and output reordered per pass through two work arrays
that every convolution of the plan shares (``Scratch.dnnl_x`` / ``dnnl_y``, sized before any
closure is made, like the column buffers). A geometry oneDNN declines keeps the GEMM step.
The plans of one layer (the whole batch, each part of a split batch) share its reordered
weights. oneDNN's OpenMP threads follow the numba thread count of each pass
(caffepy.optimize_threads) and are one per part in a split batch (caffepy.optimize_shards).
``CAFFEPY_ONEDNN=0`` switches it off here too.

Only a plan compiled under one OpenMP thread (``OMP_NUM_THREADS=1``, ``NUMBA_NUM_THREADS=1``,
``numba.set_num_threads(1)``, a one-core process) takes oneDNN; with more threads the GEMM steps
run, whose thread choice (caffepy.optimize_threads) is tuned for them. Measured on the 2-core
VM, one process, the same run (bench_infer.py, 19:07-19:13): at one thread oneDNN took GoogLeNet
b1 from 38.2 to 31.7 ms, ResNet-50 89.4 -> 59.5, MobileNet v1 18.5 -> 15.5, CaffeNet 31.7 ->
21.7 (SqueezeNet 11.8 -> 11.7), and at b8 1.3-2.1x; at two threads it was slower at b1
(GoogLeNet 28.0 -> 39.2, SqueezeNet 9.6 -> 11.7) and mixed at b8 (ResNet-50 337 -> 390,
CaffeNet 128 -> 103): each convolution is three OpenMP regions (input reorder, primitive,
output reorder), each waking a sleeping thread (``OMP_WAIT_POLICY=PASSIVE``, which the GEMM
path needs), and letting the threads spin made it slower still.
"""
import os

import numpy as np


def _lib():
    from .math import onednn
    return onednn.get()


def limit_threads(n):
    """oneDNN's threads for the calling thread, where oneDNN is already loaded (never loads it)."""
    from .math import onednn
    if onednn._switch.value is not None:
        onednn.limit_threads(n)


def one_thread():
    """Whether the passes run one OpenMP thread (numba's limit, which oneDNN's threads follow,
    is one, or ``OMP_NUM_THREADS=1``), when the plan is compiled."""
    from .math import kernels
    return kernels.threads() <= 1 or os.environ.get("OMP_NUM_THREADS", "").strip() == "1"


def usable(layer, x):
    """Whether the compiled convolution step of ``layer`` on ``x`` may run through oneDNN: a
    float32 layer, oneDNN loaded, and a plan compiled under one thread (see the module doc)."""
    return x.dtype == np.float32 and layer.blobs[0].data.dtype == np.float32 and \
        one_thread() and _lib() is not None        # (not loaded where it would not be used)


def plan_for(plan, layer, x_shape, scratch, y_strides=None):
    """The InferConvPlan of ``layer`` for input shape ``x_shape`` writing into an output of
    element strides ``y_strides`` (None: plain), cached per compiled plan and per ``scratch``
    (the parts of a split batch run at once, and a plan binds its arrays per call: one plan per
    part); None where oneDNN declines the geometry."""
    from .math import onednn, onednn_infer
    cache = plan.__dict__.setdefault("dnnl", {})
    key = (id(layer), tuple(x_shape), y_strides, id(scratch))
    if key not in cache:
        weights = plan.__dict__.setdefault("dnnl_w", {}).setdefault(id(layer), [])
        try:
            cache[key] = onednn_infer.InferConvPlan(
                tuple(x_shape), layer.blobs[0].data,
                layer.blobs[1].data.reshape(-1) if layer.bias_term else None,
                layer.out_spatial, layer.group, layer.stride, layer.pad, layer.dilation,
                relu=None if layer.fused_relu is None else float(layer.fused_relu),
                y_strides=y_strides, weights=weights)
        except onednn.OneDNNError:
            cache[key] = None
    return cache[key]


def buffers(plan, layer, x, scratch):
    """Size the plan's oneDNN work arrays for ``layer`` on ``x``; False where oneDNN declines
    (the caller sizes the GEMM step's buffers instead)."""
    p = plan_for(plan, layer, x.shape, scratch)
    if p is None:
        return False
    # an output written into a Concat's slice goes through the work array even where oneDNN
    # chose the plain format: room for the whole output
    y = x.shape[0] * layer.num_output * int(np.prod(layer.out_spatial))
    scratch.need_dnnl(p.scratch[0], max(p.scratch[1], y))
    return True


def step(plan, layer, x, out, scratch):
    """The closure of ``layer`` from x (N, C, H, W) into out (N, M, OH * OW) (a view: the top or
    its slice of a Concat's top), or None where oneDNN declines or the work arrays were not
    sized for it."""
    n, m = out.shape[0], out.shape[1]
    out4 = out.reshape((n, m) + tuple(layer.out_spatial))
    assert np.shares_memory(out4, out)
    strides = None if out4.flags.c_contiguous else tuple(s // out4.itemsize for s in out4.strides)
    p = plan_for(plan, layer, x.shape, scratch, strides)
    if p is None or p.scratch[0] > scratch.dnnl_x.size or p.scratch[1] > scratch.dnnl_y.size:
        return None
    fwd, sx, sy = p.forward, scratch.dnnl_x, scratch.dnnl_y

    def run():
        fwd(x, out4, sx, sy)
    return run
