"""Windowed layers: Convolution, Deconvolution, depthwise convolution, Pooling, SPP,
InnerProduct, LRN, ROIPooling.

Pooling keeps Caffe's geometry exactly (``caffepy.layers.pooling.PoolGeometry``, or the video
forks' N-d ``caffepy.forks.video.nd.NdPoolGeometry`` over every spatial axis): the output
size comes from Caffe's ceil rounding and its clipping of the last window; ONNX gets it through
explicit pads (begin = pad, end = (out - 1) stride + kernel - size - pad, the input sliced when
that is negative) with ``ceil_mode`` 0, so no ONNX rounding rule is involved.
    MAX   MaxPool over those pads (padding never wins; ties: the first maximum, as Caffe).
          The mask top is ONNX's flat index modulo H W (Caffe's h W + w; N-d: the spatial volume).
    AVE   Caffe divides each window's sum by pool_size, the window clipped to the padded image
          (H + pad) but not to the image: y = AveragePool(zero-Pad(x)) * (K / pool_size),
          K = kh kw, the correction a constant (out_h, out_w) tensor, left out when all ones.
    STOCHASTIC (TEST) y = sum x^2 / (FLT_MIN + sum x) per window, the sums as K AveragePool.
SPP pools each level with the level geometry of the layer (BVLC's, or dillerch/caffe's
pyramid_type levels: kernel ceil(H / b), stride floor(H / b)), Flatten, Concat; dillerch/caffe's
pyramid_shape bins are Slice + ReduceMax over rows, then columns, floored at -FLT_MAX (a NaN
in a bin is the layer's to skip, not ReduceMax's).
LRN ACROSS_CHANNELS is ONNX's LRN (same window and formula, bias = k). WITHIN_CHANNEL
(Caffe's composition): y = x (1 + alpha AVE-pool(x^2, size, pad (size - 1) / 2))^-beta, where
every window's pool_size is size^2.
"""
import numpy as np

from ..layers.pooling import FLT_MIN
from ..math.sizes import overhangs
from .builder import converter, param_blob

FLT_MAX = float(np.finfo(np.float32).max)


def _conv_attrs(L, transposed=False):
    """Conv / ConvTranspose attributes. A Convolution whose last window overhangs the padded
    input (Caffe's truncating division, caffepy.math.sizes) gets that overhang as extra end
    padding, so ONNX's floor division gives Caffe's output size over the same zeros."""
    if not L.num_spatial:
        return {}
    end = list(L.pad)
    if not transposed:
        end = [p + e for p, e in zip(L.pad, overhangs(L.in_spatial, L.kernel, L.pad, L.stride,
                                                      L.dilation, L.out_spatial))]
    attrs = dict(kernel_shape=list(L.kernel), strides=list(L.stride), pads=list(L.pad) + end,
                 dilations=list(L.dilation), group=int(L.group))
    if transposed and getattr(L, "shape_offset", None):
        attrs["output_padding"] = list(L.shape_offset)     # happynear's Deconvolution
    return attrs


@converter("Convolution", "Deconvolution", "DepthwiseConvolution", "ConvolutionDepthwise")
def convolution(ctx):
    L = ctx.layer
    if L.axis != 1:
        raise ctx.refuse("convolution over axis %d: ONNX convolves axis 1 only" % L.axis)
    if L.num_spatial < 1:
        raise ctx.refuse("needs at least one spatial axis")
    op = "ConvTranspose" if ctx.type == "Deconvolution" else "Conv"
    w = ctx.const("weight", param_blob(L, 0))
    inputs = [w] + ([ctx.const("bias", param_blob(L, 1).reshape(-1))] if L.bias_term else [])
    for x, top in zip(ctx.bottoms, ctx.tops):
        ctx.node(op, [x] + inputs, top, **_conv_attrs(L, op == "ConvTranspose"))


def _slice_end(ctx, x, cut, in_hw):
    """Drop ``cut[i]`` trailing pixels of spatial axis i (windows never reach them)."""
    if not any(cut):
        return x
    axes = [2 + i for i, c in enumerate(cut) if c]
    ends = [in_hw[i] - c for i, c in enumerate(cut) if c]
    return ctx.node("Slice", [x, ctx.ints("starts", [0] * len(axes)), ctx.ints("ends", ends),
                              ctx.ints("axes", axes)])


def _window_pads(ctx, x, g, begin):
    """(input, begin pads, end pads) giving exactly ``g.out_hw`` windows with ceil_mode 0."""
    end = [(o - 1) * s + k - n - p for o, s, k, n, p in
           zip(g.out_hw, g.stride, g.kernel, g.in_hw, begin)]
    x = _slice_end(ctx, x, [max(0, -e) for e in end], g.in_hw)
    return x, list(begin), [max(0, e) for e in end]


def _zero_pad(ctx, x, begin, end):
    if not any(begin) and not any(end):
        return x
    pads = [0, 0] + list(begin) + [0, 0] + list(end)
    return ctx.node("Pad", [x, ctx.ints("pads", pads)], mode="constant")


def pool(ctx, x, method, g, outputs):
    """Caffe pooling of ``x`` with geometry ``g`` (see module doc); ``outputs``: top names."""
    P = type(ctx.lp.pooling_param)
    K = float(np.prod(g.kernel))
    if method == P.MAX:
        x, begin, end = _window_pads(ctx, x, g, g.pad)
        attrs = dict(kernel_shape=list(g.kernel), strides=list(g.stride), pads=begin + end)
        if len(outputs) == 1:
            return ctx.node("MaxPool", [x], outputs[0], **attrs)
        if x != ctx.bottoms[0]:
            raise ctx.refuse("the mask top of a pooling that never reads the last pixels")
        idx = ctx.tmp("indices")
        ctx.node("MaxPool", [x], [outputs[0], idx], **attrs)
        plane = ctx.const("plane", np.int64(np.prod(g.in_hw)), np.int64)
        ctx.node("Cast", [ctx.node("Mod", [idx, plane])], outputs[1], to=1)
        return
    if method == P.AVE:
        x, begin, end = _window_pads(ctx, x, g, g.pad)
        x = _zero_pad(ctx, x, begin, end)
        attrs = dict(kernel_shape=list(g.kernel), strides=list(g.stride))
        correction = (K / g.pool_size()).astype(np.float32)
        if np.all(correction == 1):
            return ctx.node("AveragePool", [x], outputs[0], **attrs)
        y = ctx.node("AveragePool", [x], **attrs)
        return ctx.node("Mul", [y, ctx.const("pool_size", correction)], outputs[0])
    if method == P.STOCHASTIC:
        from ..proto import caffe_pb2
        if ctx.layer.phase == caffe_pb2.TRAIN:
            raise ctx.refuse("TRAIN-phase stochastic pooling samples at random; export TEST")
        x, begin, end = _window_pads(ctx, x, g, (0, 0))
        x = _zero_pad(ctx, x, begin, end)
        attrs = dict(kernel_shape=list(g.kernel), strides=list(g.stride))
        s1 = ctx.node("AveragePool", [x], **attrs)
        s2 = ctx.node("AveragePool", [ctx.node("Mul", [x, x])], **attrs)
        den = ctx.node("Add", [ctx.mul_const(s1, K, "kernel_area"), ctx.const("flt_min", FLT_MIN)])
        return ctx.node("Div", [ctx.mul_const(s2, K, "kernel_area"), den], outputs[0])
    raise ctx.refuse("unknown pooling method %d" % method)


@converter("Pooling", variants=("PoolingNdLayer", "Darknet2CaffePoolingLayer"))
def pooling(ctx):
    L = ctx.layer
    P = type(ctx.lp.pooling_param)
    if L.global_pooling and L.method in (P.MAX, P.AVE) and len(ctx.tops) == 1:
        op = "GlobalMaxPool" if L.method == P.MAX else "GlobalAveragePool"
        return ctx.node(op, [ctx.bottoms[0]], ctx.tops[0])
    pool(ctx, ctx.bottoms[0], L.method, L.geom, ctx.tops)


@converter("SPP", variants=("PyramidTypeSPPLayer", "PyramidShapeSPPLayer"))
def spp(ctx):
    L = ctx.layer
    if getattr(L, "edges", None) is not None:
        return _spp_bins(ctx, L.edges)
    if len(ctx.tshapes[0]) == 4:        # pyramid_height 1: the pooled (N, C, 1, 1)
        return pool(ctx, ctx.bottoms[0], L.method, L.levels[0], ctx.tops)
    parts = []
    for level, g in enumerate(L.levels):
        y = pool(ctx, ctx.bottoms[0], L.method, g, [ctx.tmp("level%d" % level)])
        parts.append(ctx.node("Flatten", [y], axis=1))
    ctx.node("Concat", parts, ctx.tops[0], axis=1)


def _bin_max(ctx, x, edges, axis):
    """The maximum of each [start, end) range of ``axis``, concatenated along it."""
    parts = [ctx.reduce("ReduceMax", ctx.node("Slice", [x, ctx.ints("starts", [s]),
                                                        ctx.ints("ends", [e]),
                                                        ctx.ints("axes", [axis])]),
                        [axis], True) for s, e in edges]
    return parts[0] if len(parts) == 1 else ctx.node("Concat", parts, axis=axis)


def _spp_bins(ctx, edges):
    """dillerch/caffe's pyramid_shape SPP: per level the row bins' maxima, then the column
    bins', reshaped to (N, C, b^2); the levels concatenated on axis 2; Max with -FLT_MAX."""
    parts = []
    for rows, cols in edges:
        y = _bin_max(ctx, _bin_max(ctx, ctx.bottoms[0], rows, 2), cols, 3)
        parts.append(ctx.node("Reshape", [y, ctx.ints("shape", [0, 0, -1])]))
    y = parts[0] if len(parts) == 1 else ctx.node("Concat", parts, axis=2)
    ctx.node("Max", [y, ctx.const("lowest", np.float32(-FLT_MAX))], ctx.tops[0])


@converter("InnerProduct")
def inner_product(ctx):
    L = ctx.layer
    x, shape = ctx.bottoms[0], ctx.bshapes[0]
    flat = len(shape) == 2 and L.axis == 1
    if not flat:
        x = ctx.node("Flatten", [x], axis=int(L.axis))
    inputs = [x, ctx.const("weight", param_blob(L, 0))]
    if L.bias_term:
        inputs.append(ctx.const("bias", param_blob(L, 1).reshape(-1)))
    direct = flat or (L.axis == 1 and len(ctx.tshapes[0]) == 2)
    y = ctx.node("Gemm", inputs, ctx.tops[0] if direct else None, transB=0 if L.transpose else 1)
    if not direct:
        ctx.reshape(y, ctx.tshapes[0], shape, ctx.tops[0])


@converter("LRN")
def lrn(ctx):
    L = ctx.layer
    x = ctx.bottoms[0]
    if L.across:
        return ctx.node("LRN", [x], ctx.tops[0], size=int(L.size), alpha=float(L.alpha),
                        beta=float(L.beta), bias=float(L.k))
    pad = (L.size - 1) // 2
    sq = _zero_pad(ctx, ctx.node("Mul", [x, x]), [pad, pad], [pad, pad])
    avg = ctx.node("AveragePool", [sq], kernel_shape=[L.size, L.size], strides=[1, 1])
    scale = ctx.node("Add", [ctx.mul_const(avg, L.alpha, "alpha"), ctx.const("one", 1.0)])
    ctx.node("Mul", [x, ctx.node("Pow", [scale, ctx.const("neg_beta", -L.beta)])], ctx.tops[0])


@converter("ROIPooling")
def roi_pooling(ctx):
    p = ctx.lp.roi_pooling_param
    ctx.node("MaxRoiPool", ctx.bottoms[:2], ctx.tops[0],
             pooled_shape=[int(p.pooled_h), int(p.pooled_w)], spatial_scale=float(p.spatial_scale))
