"""Convolution and Deconvolution through oneDNN (caffepy.math.onednn) where it is installed: the
layer's forward and backward hand a batch to one oneDNN primitive each instead of im2col + GEMM.

Taken for the training of float32 Convolution / Deconvolution layers (see :func:`forward`) with
1-3 spatial axes and the channel axis 1, except the direct depthwise kernel's cases
(caffepy.math._numba_kernels), a ReLU fused by inference mode (caffepy.infer.plan has its own
steps), geometries whose channels fill less than ``MIN_CHANNEL_EFFICIENCY`` of oneDNN's padded
channel blocks, and one-channel sources under kernels of ``SINGLE_CHANNEL_GEMM_MIN_KERNEL``
positions or more. Same semantics as the GEMM path: forward writes the top, backward adds dW and
db to the parameter diffs (Caffe accumulates them) and overwrites the bottom diff. A geometry
oneDNN cannot run (it raises while building the primitives) falls back to the GEMM path for that
layer and shape.
"""
import numpy as np

from ..math import blas
from ..math import kernels, onednn

MAX_PLANS = 4   # per layer: a net fed images of many sizes must not keep a plan for each
# Below this share of real channels in oneDNN's padded blocks (ConvPlan.channel_efficiency) the
# GEMM path is faster. Training step forward + backward at 2 threads (2026-11-27, AVX-512):
# 20 -> 50 channels (0.49) 7.3 ms against GEMM's 6.3; 20 -> 64 (0.63) 7.4 / 7.3; 24 -> 40
# (0.63) 3.9 / 5.3; 32 -> 50 (0.78) 7.3 / 10.1. The share is the one 16-float blocks give
# (CHANNEL_BLOCK), on every ISA: with AVX2's 8-float blocks LeNet's conv2 (20 -> 50) pads less
# (0.74) but still runs faster on the GEMM path (LeNet's training step at batch 64, 2 threads,
# 2026-11-30, AVX2, 4 alternated rounds of 2 s: median 20.8 ms with the layer on GEMM against
# 22.1 on oneDNN).
MIN_CHANNEL_EFFICIENCY = 0.55
CHANNEL_BLOCK = 16
# A 1x1 convolution (stride any, no padding) over planes of at least this many positions runs
# in Caffe's NCHW layout (ConvPlan plain): there it is one GEMM per image, and the reorders into
# and out of the channel-blocked formats cost more than the blocked kernels save. Forward +
# backward at 2 threads (2026-11-28, AVX-512, batch 8, plain / blocked time): 64 -> 256 at
# 56 x 56 0.70, 256 -> 64 at 56 0.66, 512 -> 128 at 28 0.86, 1024 -> 256 at 14 0.91,
# 256 -> 128 stride 2 at 56 0.65, 1024 -> 2048 stride 2 at 14 0.90; on 7 x 7 planes blocked
# wins (2048 -> 512 1.08, 512 -> 2048 1.10, 832 -> 384 1.04), and for every 3x3 and 5x5 kernel
# measured (64 -> 64 3x3 at 56 1.74, CIFAR10-quick's 5x5 2.0-2.7).
PLAIN_1X1_MIN_POSITIONS = 14 * 14
# With AVX2's 8-float blocks, a 1x1 convolution whose input has more than this many channels per
# plane position stays blocked: forward + backward at 2 threads (2026-11-30, AVX2, batch 8,
# plain / blocked, median of 5 alternated rounds): 1024 -> 256 at 14 x 14 (5.2 channels a
# position) 1.28, 1024 -> 2048 stride 2 at 14 1.26; 512 -> 1024 stride 2 at 28 (0.65) 0.99,
# 1024 -> 512 stride 2 at 14 (5.2, but a quarter of the outputs) 0.94 -- not taken on that one
# alone --, 256 -> 1024 at 14 (1.3) 0.93, the 56 x 56 and 28 x 28 ones 0.73-0.89.
PLAIN_1X1_MAX_CHANNELS_PER_POSITION_AVX2 = 4
# A convolution of a single input channel (a gray image's first layer) with a kernel of this many
# positions or more runs on the GEMM path: oneDNN's weight gradient from a one-channel source is
# slower than im2col + GEMM there, and its 3x3 is not. Forward + backward at 2 threads
# (2026-11-30, AVX2: 8-float blocks, oneDNN / GEMM time): LeNet's conv1 (64 x 1 x 28 x 28,
# 20 outputs, 5x5) 1.42-1.58; 4x4 1.15; 7x7 1.46; 50 outputs 5x5 1.11; 16 x 1 x 96 x 96,
# 64 outputs 7x7 stride 2 1.89; 3x3 0.84-0.89 (oneDNN faster); 2 and 3 input channels 5x5 1.07
# and 0.53.
SINGLE_CHANNEL_GEMM_MIN_KERNEL = 16


def _plain(layer):
    """Whether the layer's plan runs in the plain layout (see PLAIN_1X1_MIN_POSITIONS and
    PLAIN_1X1_MAX_CHANNELS_PER_POSITION_AVX2)."""
    positions = int(np.prod(layer.in_spatial))
    if (layer.reverse or layer.group != 1 or layer.num_spatial != 2
            or any(k != 1 for k in layer.kernel) or any(layer.pad)
            or positions < PLAIN_1X1_MIN_POSITIONS):
        return False
    return not (onednn.channel_block() == 8 and layer.channels > positions
                * PLAIN_1X1_MAX_CHANNELS_PER_POSITION_AVX2)


def _scratch_fn(layer):
    def scratch(slot, floats):
        return onednn.aligned(layer._scratch(slot, (floats + onednn.ALIGN // 4,)), floats)
    return scratch


def plan(layer):
    """The layer's ConvPlan for its current shape, or None (oneDNN off / missing / declines)."""
    if (onednn.get() is None or layer.dtype != np.float32 or layer.axis != 1
            or not 1 <= layer.num_spatial <= 3 or getattr(layer, "fused_relu", None) is not None
            or getattr(layer, "_depthwise", bool)() or getattr(layer, "shape_offset", None)
            or (layer.channels == 1
                and int(np.prod(layer.kernel)) >= SINGLE_CHANNEL_GEMM_MIN_KERNEL)):
        return None
    plans = layer.__dict__.setdefault("_dnnl_plans", {})
    # before a plan is made: oneDNN fixes a primitive's split over threads when it makes it,
    # from the calling thread's OpenMP count (made under the default, a primitive run after
    # limit_threads(1) still ran two threads: measured in inference mode)
    limit = blas.active_limit()
    if limit is not None:
        onednn.limit_threads(limit)
    key = (layer.outer, tuple(layer.in_spatial))
    if key in plans:
        plans[key] = plans.pop(key)             # most recently used last
    else:
        while len(plans) >= MAX_PLANS:          # inputs of changing size: keep the latest few
            del plans[next(iter(plans))]
        try:
            p = onednn.ConvPlan(
                layer.outer, layer.channels, layer.in_spatial, layer.num_output,
                layer.out_spatial, layer.group, layer.kernel, layer.stride, layer.pad,
                layer.dilation, layer.bias_term, transposed=layer.reverse, plain=_plain(layer))
            share = min(p.channel_efficiency(), p.channel_efficiency(CHANNEL_BLOCK))
            plans[key] = p if share >= MIN_CHANNEL_EFFICIENCY else None
        except onednn.OneDNNError:
            plans[key] = None
    return plans[key]


def forward(layer, bottom, top):
    """Runs the forward through oneDNN; False where the GEMM path must do it: in a net that runs
    no weight gradient for the layer (``keep_columns`` false: inference, TEST nets). There every
    forward would reorder the weights into oneDNN's format again (Caffe's weights may change
    between forwards), which at batch 1 cost more than the direct kernels save (ResNet-50,
    GoogLeNet, MobileNet v1, SqueezeNet at 2 threads: 1.0-1.5x the GEMM path's time). Inference
    mode's GEMM / Winograd steps were not beaten by oneDNN's inference primitive either, even
    with the weights reordered once per plan (ResNet-50 b1 / b8 on one thread: 94-97 / 827 ms
    against 94 / 779 ms)."""
    if not layer.keep_columns:
        return False
    p = plan(layer)
    w = layer.blobs[0].data
    b = layer.blobs[1].data if layer.bias_term else None
    if p is None or not kernels.contiguous(w, *(x.data for x in bottom), *(t.data for t in top)):
        return False
    scratch = _scratch_fn(layer)
    for x, y in zip(bottom, top):
        p.forward(x.data, w, b, y.data, scratch)
    return True


def backward(layer, top, propagate_down, bottom):
    """Runs the backward through oneDNN; False where the GEMM path must do it."""
    p = plan(layer)
    arrays = [layer.blobs[0].data, layer.blobs[0].diff] + [t.diff for t in top] + \
        [x.data for x in bottom]
    if p is None or not kernels.contiguous(*arrays, *(x.diff for x in bottom)):
        return False
    want_w = layer.param_propagate_down[0]
    want_b = layer.bias_term and layer.param_propagate_down[1]
    scratch = _scratch_fn(layer)
    w = layer.blobs[0].data
    for x, y, down in zip(bottom, top, propagate_down):
        # The bias gradient is summed by caffepy in float64, as on every path (_bias_grad), never
        # by oneDNN: its diff_bias adds a large map in float32 one value after another and
        # drifts from the exact sum (1.5e-3 relative on a 112 x 112 face-net map), and a
        # float32 sum of any order is far from it where the map's values cancel.
        if want_b:
            layer._bias_grad(y.diff.reshape(layer.outer, layer.num_output, -1))
        p.backward(x.data, w, y.diff, layer.blobs[0].diff if want_w else None,
                   x.diff if down else None, scratch)
    return True
