"""Normalisation, affine and combining layers: BatchNorm, BN (PSPNet), Scale, Bias, MVN,
Normalize (SSD), Softmax, Eltwise, Axpy.

    BatchNorm  global stats: mu = sum_mu / s, var = sum_var / s (0 when s == 0; s the
               moving-average scale factor) -> BatchNormalization(scale 1, B 0, eps);
               batch stats (use_global_stats false): ReduceMean over every axis but 1.
               NVCaffe's scale_bias: its scale and bias blobs instead of 1 and 0.
    BN         slope (x - mean) / sqrt(var + eps) + bias -> BatchNormalization (TEST / frozen);
               ChenglongChen's BN with moving_average false: the batch statistics, as BatchNorm's;
               SegNet's: scale x + shift (INFERENCE), or its batch statistics (LEARN) -> Mul, Add.
    Scale/Bias the operand (parameter or bottom[1]) reshaped to s.shape + (1,) * (trailing axes)
               so it broadcasts from ``axis`` -> Mul (+ Add) / Add.
    MVN        y = x - mean; / (sqrt(mean(y^2)) + eps) when normalize_variance (over the spatial
               axes, or C and spatial when across_channels).
    Normalize  y = s x / sqrt(sum x^2 + eps) over C (and H, W when across_spatial); happynear's
               (no norm_param): x / sqrt(sum_C x^2 + 1e-6) or x / (sum_C |x| + 1e-6), [norm].
    Eltwise    SUM: sum c_i x_i; PROD; MAX.   Axpy: a x + b, a (N, C) broadcast.
"""
import numpy as np

from .builder import converter, param_blob, variant_converter


@converter("Softmax")
def softmax(ctx):
    axis = ctx.lp.softmax_param.axis
    ctx.node("Softmax", [ctx.bottoms[0]], ctx.tops[0], axis=int(axis))


def _batch_stats(ctx, x, nd):
    axes = [0] + list(range(2, nd))
    mu = ctx.reduce("ReduceMean", x, axes, True)
    d = ctx.node("Sub", [x, mu])
    var = ctx.reduce("ReduceMean", ctx.node("Mul", [d, d]), axes, True)
    return d, var


@converter("BatchNorm", variants=("ScaleBiasBatchNormLayer",))
def batch_norm(ctx):
    L = ctx.layer
    nd = len(ctx.bshapes[0])
    if nd < 2:
        raise ctx.refuse("a 1-axis bottom has no channel axis for ONNX's BatchNormalization")
    scale_bias = getattr(L, "scale_bias", False)       # NVCaffe: scale * x_hat + bias
    if not L.use_global_stats:
        d, var = _batch_stats(ctx, ctx.bottoms[0], nd)
        std = ctx.node("Sqrt", [ctx.node("Add", [var, ctx.const("eps", L.eps)])])
        if not scale_bias:
            return ctx.node("Div", [d, std], ctx.tops[0])
        shape = (1, -1) + (1,) * (nd - 2)
        y = ctx.node("Mul", [ctx.node("Div", [d, std]),
                             ctx.const("scale", param_blob(L, 3).reshape(shape))])
        return ctx.node("Add", [y, ctx.const("bias", param_blob(L, 4).reshape(shape))],
                        ctx.tops[0])
    sum_mu, sum_var, s = (param_blob(L, i).reshape(-1) for i in range(3))
    factor = 0.0 if s[0] == 0 else 1.0 / s[0]
    c = sum_mu.shape[0]
    scale, bias = ((param_blob(L, 3).reshape(-1), param_blob(L, 4).reshape(-1)) if scale_bias
                   else (np.ones(c), np.zeros(c)))
    ctx.node("BatchNormalization",
             [ctx.bottoms[0], ctx.const("scale", scale), ctx.const("bias", bias),
              ctx.const("mean", sum_mu * np.float32(factor)),
              ctx.const("var", sum_var * np.float32(factor))],
             ctx.tops[0], epsilon=float(L.eps))


@variant_converter("BN", "SegNetBNLayer")
def segnet_bn(ctx):
    """SegNet's BN (caffepy.forks.segmentation.segnet): INFERENCE y = scale x + shift; LEARN
    y = scale (x - mu) / sqrt(var + 1e-9) + shift with the batch's mu and var = E[x^2] - mu^2
    (in every phase, as SegNet computes it), the optional tops mu and var."""
    L = ctx.layer
    scale, shift = (param_blob(L, i).reshape(1, -1, 1, 1) for i in range(2))
    x = ctx.bottoms[0]
    if L.learn:
        axes = [0, 2, 3]
        mu = ctx.reduce("ReduceMean", x, axes, True, ctx.tops[1] if len(ctx.tops) > 1 else None)
        var = ctx.node("Sub", [ctx.reduce("ReduceMean", ctx.node("Mul", [x, x]), axes, True),
                               ctx.node("Mul", [mu, mu])],
                       ctx.tops[2] if len(ctx.tops) > 2 else None)
        std = ctx.node("Sqrt", [ctx.node("Add", [var, ctx.const("eps", L.eps)])])
        x = ctx.node("Div", [ctx.node("Sub", [x, mu]), std])
    y = ctx.node("Mul", [x, ctx.const("scale", scale)])
    ctx.node("Add", [y, ctx.const("shift", shift)], ctx.tops[0])


@converter("BN", variants=("EwmaBNLayer",))
def bn(ctx):
    from ..proto import caffe_pb2
    L = ctx.layer
    if ctx.layer.phase == caffe_pb2.TRAIN and not L.frozen:
        raise ctx.refuse("TRAIN-phase BN uses batch statistics and updates them; export TEST")
    slope, bias, mean, var = (param_blob(L, i).reshape(-1) for i in range(4))
    if getattr(L, "batch_stats_in_test", False):     # ChenglongChen's BN, moving_average false
        nd = len(ctx.bshapes[0])
        d, v = _batch_stats(ctx, ctx.bottoms[0], nd)
        std = ctx.node("Sqrt", [ctx.node("Add", [v, ctx.const("eps", L.eps)])])
        shape = (1, -1) + (1,) * (nd - 2)
        y = ctx.node("Mul", [ctx.node("Div", [d, std]), ctx.const("slope", slope.reshape(shape))])
        ctx.node("Add", [y, ctx.const("bias", bias.reshape(shape))], ctx.tops[0])
        return
    ctx.node("BatchNormalization",
             [ctx.bottoms[0], ctx.const("slope", slope), ctx.const("bias", bias),
              ctx.const("mean", mean), ctx.const("var", var)],
             ctx.tops[0], epsilon=float(L.eps))


def _operand(ctx, array_or_name, op_shape, axis):
    """The operand (a constant array or bottom 1) shaped to broadcast from ``axis``."""
    nd = len(ctx.bshapes[0])
    target = tuple(op_shape) + (1,) * (nd - axis - len(op_shape))
    if not isinstance(array_or_name, str):
        return ctx.const("operand", np.asarray(array_or_name).reshape(target))
    if tuple(target) == tuple(op_shape) and (axis > 0 or not ctx.dynamic or not op_shape):
        return array_or_name
    return ctx.reshape(array_or_name, target, op_shape)


def _axis(ctx, field_axis, op_ndim):
    nd = len(ctx.bshapes[0])
    return 0 if op_ndim == 0 else (field_axis + nd if field_axis < 0 else field_axis)


@converter("Scale")
def scale(ctx):
    L, p = ctx.layer, ctx.lp.scale_param
    x = ctx.bottoms[0]
    if len(ctx.bottoms) > 1:
        shp = ctx.bshapes[1]
        axis = _axis(ctx, p.axis, len(shp))
        s = _operand(ctx, ctx.bottoms[1], shp, axis)
    else:
        w = param_blob(L, 0)
        axis = _axis(ctx, p.axis, w.ndim)
        s = _operand(ctx, w, w.shape, axis)
    if L.bias_index is None:
        return ctx.node("Mul", [x, s], ctx.tops[0])
    b = param_blob(L, L.bias_index)
    y = ctx.node("Mul", [x, s])
    ctx.node("Add", [y, _operand(ctx, b, b.shape, _axis(ctx, p.axis, b.ndim))], ctx.tops[0])


@converter("Bias")
def bias(ctx):
    p = ctx.lp.bias_param
    if len(ctx.bottoms) > 1:
        shp = ctx.bshapes[1]
        b = _operand(ctx, ctx.bottoms[1], shp, _axis(ctx, p.axis, len(shp)))
    else:
        w = param_blob(ctx.layer, 0)
        b = _operand(ctx, w, w.shape, _axis(ctx, p.axis, w.ndim))
    ctx.node("Add", [ctx.bottoms[0], b], ctx.tops[0])


@converter("MVN")
def mvn(ctx):
    p = ctx.lp.mvn_param
    nd = len(ctx.bshapes[0])
    start = 1 if p.across_channels or nd < 2 else 2
    axes = list(range(start, nd))
    x = ctx.bottoms[0]
    if not axes:          # one value per row: y = 0 (and 0 / eps)
        return ctx.node("Sub", [x, x], ctx.tops[0])
    y = ctx.node("Sub", [x, ctx.reduce("ReduceMean", x, axes, True)],
                 None if p.normalize_variance else ctx.tops[0])
    if p.normalize_variance:
        var = ctx.reduce("ReduceMean", ctx.node("Mul", [y, y]), axes, True)
        std = ctx.node("Add", [ctx.node("Sqrt", [var]), ctx.const("eps", p.eps)])
        ctx.node("Div", [y, std], ctx.tops[0])


@variant_converter("Normalize", "FeatureNormalizeLayer")
def feature_normalize(ctx):
    """happynear's Normalize (caffepy.forks.face.amsoftmax): y = x / n over the channels with
    n = sqrt(sum x^2 + 1e-6) (L2) or sum |x| + 1e-6 (L1); the optional second top n."""
    x = ctx.bottoms[0]
    if ctx.layer.kind == "L2":
        s = ctx.node("Add", [ctx.reduce("ReduceSum", ctx.node("Mul", [x, x]), [1], True),
                             ctx.const("eps", 1e-6)])
        n = ctx.node("Sqrt", [s], ctx.tops[1] if len(ctx.tops) > 1 else None)
    else:
        n = ctx.node("Add", [ctx.reduce("ReduceSum", ctx.node("Abs", [x]), [1], True),
                             ctx.const("eps", 1e-6)], ctx.tops[1] if len(ctx.tops) > 1 else None)
    ctx.node("Div", [x, n], ctx.tops[0])


@converter("Normalize")
def normalize(ctx):
    L = ctx.layer
    nd = len(ctx.bshapes[0])
    axes = list(range(1, nd)) if L.across_spatial else [1]
    x = ctx.bottoms[0]
    sq = ctx.reduce("ReduceSum", ctx.node("Mul", [x, x]), axes, True)
    norm = ctx.node("Sqrt", [ctx.node("Add", [sq, ctx.const("eps", L.eps)])])
    y = ctx.node("Div", [x, norm])
    s = param_blob(L, 0).reshape(-1)
    s = s.reshape(()) if L.channel_shared else s.reshape((-1,) + (1,) * (nd - 2))
    ctx.node("Mul", [y, ctx.const("scale", s)], ctx.tops[0])


@converter("Eltwise")
def eltwise(ctx):
    p = ctx.lp.eltwise_param
    P = type(p)
    xs = list(ctx.bottoms)
    if p.operation == P.PROD:
        op = "Mul"
    elif p.operation == P.MAX:
        op = "Max"
    else:
        op = "Sum"
        coeffs = list(p.coeff) or [1.0] * len(xs)
        xs = [x if c == 1.0 else ctx.mul_const(x, c, "coeff%d" % i)
              for i, (x, c) in enumerate(zip(xs, coeffs))]
    if len(xs) == 1:
        return ctx.node("Identity", xs, ctx.tops[0])
    if op == "Max" or op == "Sum":
        return ctx.node(op, xs, ctx.tops[0])
    y = xs[0]
    for i, x in enumerate(xs[1:]):
        y = ctx.node("Mul", [y, x], ctx.tops[0] if i == len(xs) - 2 else None)


@converter("Axpy")
def axpy(ctx):
    a, x, b = ctx.bottoms
    nd = len(ctx.bshapes[1])
    shp = tuple(ctx.bshapes[1][:2]) + (1,) * (nd - 2)
    if tuple(ctx.bshapes[0]) != shp:
        a = ctx.reshape(a, shp, ctx.bshapes[0])
    ctx.node("Add", [ctx.node("Mul", [a, x]), b], ctx.tops[0])
