"""Element-wise layers: ReLU (leaky), ReLU6, PReLU, ELU, SeLu, Sigmoid, TanH, AbsVal, BNLL,
Threshold, Clip, Swish, Dropout / SeLuDropout (TEST), Power, Exp, Log.

Each keeps Caffe's formula (see the layer classes in ``caffepy/layers/neuron.py`` / ``power.py``):
    ReLU      y = x > 0 ? x : slope x            -> Relu | LeakyRelu(alpha = slope)
    PReLU     y = x > 0 ? x : a_c x              -> PRelu, a reshaped (C, 1, ...) or scalar
    BNLL      y = log(1 + e^x)                   -> Softplus
    Threshold y = x > t                          -> Cast(Greater(x, t))
    Swish     y = x sigmoid(beta x)              -> Mul(x, Sigmoid(beta x))
    Power     y = (shift + scale x)^power        -> Mul / Add / Pow (trivial parts skipped)
    Exp       y = base^(shift + scale x)         -> e^(ln(base) scale x) * base^shift
    Log       y = log_base(shift + scale x)      -> Log(shift + scale x) / ln(base)
    Dropout   TEST: y = x (scale_train) or x (1 - ratio)
"""
from .builder import converter, param_blob


def _simple(op, **attrs):
    def convert(ctx):
        ctx.node(op, [ctx.bottoms[0]], ctx.tops[0], **attrs)
    return convert


for _type, _op in (("Sigmoid", "Sigmoid"), ("TanH", "Tanh"), ("AbsVal", "Abs"),
                   ("BNLL", "Softplus")):
    converter(_type)(_simple(_op))


def _train(ctx):
    from ..proto import caffe_pb2
    return ctx.layer.phase == caffe_pb2.TRAIN


@converter("ReLU")
def relu(ctx):
    slope = ctx.lp.relu_param.negative_slope
    if slope:
        ctx.node("LeakyRelu", [ctx.bottoms[0]], ctx.tops[0], alpha=float(slope))
    else:
        ctx.node("Relu", [ctx.bottoms[0]], ctx.tops[0])


@converter("ReLU6")
def relu6(ctx):
    ctx.node("Clip", [ctx.bottoms[0], ctx.const("min", 0.0), ctx.const("max", 6.0)], ctx.tops[0])


@converter("Clip")
def clip(ctx):
    lo, hi = ctx.layer.lo, ctx.layer.hi
    ctx.node("Clip", [ctx.bottoms[0], ctx.const("min", lo), ctx.const("max", hi)], ctx.tops[0])


@converter("PReLU")
def prelu(ctx):
    a = param_blob(ctx.layer, 0)
    nd = len(ctx.bshapes[0])
    a = a.reshape((1,)) if ctx.layer.channel_shared else a.reshape((-1,) + (1,) * (nd - 2))
    ctx.node("PRelu", [ctx.bottoms[0], ctx.const("slope", a)], ctx.tops[0])


@converter("ELU")
def elu(ctx):
    ctx.node("Elu", [ctx.bottoms[0]], ctx.tops[0], alpha=float(ctx.lp.elu_param.alpha))


@converter("SeLu")
def selu(ctx):
    ctx.node("Selu", [ctx.bottoms[0]], ctx.tops[0], alpha=float(ctx.layer.alpha),
             gamma=float(ctx.layer.lam))


@converter("Threshold")
def threshold(ctx):
    t = ctx.layer.threshold
    gt = ctx.node("Greater", [ctx.bottoms[0], ctx.const("threshold", t)])
    ctx.node("Cast", [gt], ctx.tops[0], to=1)


@converter("Swish")
def swish(ctx):
    x, beta = ctx.bottoms[0], float(ctx.layer.beta)
    bx = x if beta == 1.0 else ctx.mul_const(x, beta, "beta")
    s = ctx.node("Sigmoid", [bx])
    ctx.node("Mul", [x, s], ctx.tops[0])


@converter("Dropout")
def dropout(ctx):
    if _train(ctx):
        raise ctx.refuse("a TRAIN-phase dropout draws random masks; export the TEST net")
    scale = ctx.layer._scale()
    if scale == 1.0:
        ctx.node("Identity", [ctx.bottoms[0]], ctx.tops[0])
    else:
        ctx.mul_const(ctx.bottoms[0], scale, output=ctx.tops[0])


@converter("SeLuDropout")
def selu_dropout(ctx):
    if _train(ctx):
        raise ctx.refuse("a TRAIN-phase dropout draws random masks; export the TEST net")
    ctx.node("Identity", [ctx.bottoms[0]], ctx.tops[0])


def _affine(ctx, x, scale, shift):
    if scale != 1.0:
        x = ctx.mul_const(x, scale, "scale")
    if shift != 0.0:
        x = ctx.node("Add", [x, ctx.const("shift", shift)])
    return x


def _fill(ctx, value):
    """A tensor shaped like bottom 0 filled with ``value``."""
    shape = ctx.node("Shape", [ctx.bottoms[0]])
    ctx.node("Expand", [ctx.const("value", value), shape], ctx.tops[0])


@converter("Power")
def power(ctx):
    L = ctx.layer
    if L.scale == 0 or L.power == 0:
        return _fill(ctx, 1.0 if L.power == 0 else float(L.shift) ** L.power)
    y = _affine(ctx, ctx.bottoms[0], float(L.scale), float(L.shift))
    if L.power != 1.0:
        y = ctx.node("Pow", [y, ctx.const("power", L.power)])
    elif y == ctx.bottoms[0]:
        y = ctx.node("Identity", [y])
    ctx.finish(y)


@converter("Exp")
def exp(ctx):
    L = ctx.layer
    x = ctx.bottoms[0]
    if L.inner_scale != 1.0:
        x = ctx.mul_const(x, L.inner_scale, "inner_scale")
    y = ctx.node("Exp", [x])
    if L.outer_scale != 1.0:
        y = ctx.mul_const(y, L.outer_scale, "outer_scale")
    ctx.finish(y)


@converter("Log")
def log(ctx):
    L = ctx.layer
    y = ctx.node("Log", [_affine(ctx, ctx.bottoms[0], float(L.scale), float(L.shift))])
    if L.base_scale != 1.0:
        y = ctx.mul_const(y, L.base_scale, "base_scale")
    ctx.finish(y)
