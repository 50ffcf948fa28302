"""Shape and indexing layers: Concat, Slice, Split, Flatten, Reshape, Crop, Tile, Permute,
ShuffleChannel, Reorg, Filter, BatchReindex, ArgMax, Reduction, Embed, Silence, Parameter,
DummyData (constant fillers).

Reshape-like layers (Flatten, Reshape, the rearrangements) use the top shape caffepy computed
(Caffe's 0 and -1 already resolved); with a dynamic batch axis 0 is written as 0 (copied).
    Crop        Slice from ``offset`` on every axis >= ``axis``, sizes of bottom[1].
    Filter      Compress(x, selector != 0, axis 0) (output size known only at run time).
    ArgMax      TopK: no axis: over each item's flattened values -> (N, 1 | 2, k [, 1..]) (indices,
                then values with out_max_val); with axis: indices, or values (out_max_val).
    Reduction   c * ReduceSum / ReduceL1 / ReduceSumSquare / ReduceMean over the axes >= axis.
    Embed       Gather(W, ids) + b.
"""
import numpy as np

from .builder import converter, param_blob


@converter("Split")
def split(ctx):
    for t in ctx.tops:
        ctx.node("Identity", [ctx.bottoms[0]], t)


@converter("Silence")
def silence(ctx):
    pass


@converter("Concat")
def concat(ctx):
    ctx.node("Concat", ctx.bottoms, ctx.tops[0], axis=int(ctx.layer.axis))


@converter("Slice")
def slice_(ctx):
    axis = int(ctx.layer.axis)
    sizes = [s[axis] for s in ctx.tshapes]
    if len(ctx.tops) == 1:
        return _crop_axis(ctx, ctx.bottoms[0], axis, 0, sizes[0], ctx.tops[0])
    ctx.node("Split", [ctx.bottoms[0], ctx.ints("split", sizes)], ctx.tops, axis=axis)


def _crop_axis(ctx, x, axis, start, size, out):
    if ctx.bshapes[0][axis] == size and start == 0:
        return ctx.node("Identity", [x], out)
    return ctx.node("Slice", [x, ctx.ints("starts", [start]), ctx.ints("ends", [start + size]),
                              ctx.ints("axes", [axis])], out)


@converter("Flatten", "Reshape")
def reshape(ctx):
    ctx.reshape(ctx.bottoms[0], ctx.tshapes[0], ctx.bshapes[0], ctx.tops[0])


@converter("Crop")
def crop(ctx):
    spans = [s.indices(d)[:2] for s, d in zip(ctx.layer.index, ctx.bshapes[0])]
    starts, ends = [b for b, _ in spans], [e for _, e in spans]
    axes = [a for a, (b, e) in enumerate(zip(starts, ends)) if (b, e) != (0, ctx.bshapes[0][a])]
    if not axes:
        return ctx.node("Identity", [ctx.bottoms[0]], ctx.tops[0])
    if 0 in axes and ctx.dynamic:
        raise ctx.refuse("crops the batch axis; export without --dynamic-batch")
    ctx.node("Slice", [ctx.bottoms[0], ctx.ints("starts", [starts[a] for a in axes]),
                       ctx.ints("ends", [ends[a] for a in axes]), ctx.ints("axes", axes)],
             ctx.tops[0])


@converter("Tile")
def tile(ctx):
    reps = [1] * len(ctx.bshapes[0])
    reps[ctx.layer.axis] = int(ctx.layer.tiles)
    ctx.node("Tile", [ctx.bottoms[0], ctx.ints("repeats", reps)], ctx.tops[0])


@converter("Permute")
def permute(ctx):
    ctx.node("Transpose", [ctx.bottoms[0]], ctx.tops[0], perm=[int(a) for a in ctx.layer.order])


@converter("ShuffleChannel")
def shuffle_channel(ctx):
    n, c, h, w = ctx.bshapes[0]
    g = ctx.layer.g
    x = ctx.reshape(ctx.bottoms[0], (n, g, c // g, h, w), ctx.bshapes[0])
    x = ctx.node("Transpose", [x], perm=[0, 2, 1, 3, 4])
    ctx.reshape(x, ctx.tshapes[0], (n,), ctx.tops[0])


@converter("Reorg")
def reorg(ctx):
    n, c, h, w = ctx.bshapes[0]
    s = ctx.layer.s
    if ctx.layer.focus:             # the YOLOv5 ports' channel-major space-to-depth
        x = ctx.reshape(ctx.bottoms[0], (n, c, h // s, s, w // s, s), ctx.bshapes[0])
        x = ctx.node("Transpose", [x], perm=[0, 1, 3, 5, 2, 4])
    elif ctx.layer.reverse:
        x = ctx.reshape(ctx.bottoms[0], (n, s, s, c // (s * s), h, w), ctx.bshapes[0])
        x = ctx.node("Transpose", [x], perm=[0, 3, 4, 1, 5, 2])
    else:
        x = ctx.reshape(ctx.bottoms[0], (n, c // (s * s), h, s, w, s), ctx.bshapes[0])
        x = ctx.node("Transpose", [x], perm=[0, 3, 5, 1, 2, 4])
    ctx.reshape(x, ctx.tshapes[0], (n,), ctx.tops[0])


@converter("Filter")
def filter_(ctx):
    sel = ctx.node("Flatten", [ctx.bottoms[-1]], axis=1)
    sel = ctx.node("Reshape", [sel, ctx.ints("shape", [-1])])
    keep = ctx.node("Not", [ctx.node("Equal", [sel, ctx.const("zero", 0.0)])])
    for x, t in zip(ctx.bottoms[:-1], ctx.tops):
        ctx.node("Compress", [x, keep], t, axis=0)


@converter("BatchReindex")
def batch_reindex(ctx):
    idx = ctx.node("Cast", [ctx.bottoms[1]], to=7)
    ctx.node("Gather", [ctx.bottoms[0], idx], ctx.tops[0], axis=0)


@converter("ArgMax")
def argmax(ctx):
    L = ctx.layer
    k = ctx.ints("k", [L.top_k])
    if L.has_axis:
        vals, idx = ctx.node("TopK", [ctx.bottoms[0], k], n_out=2, axis=int(L.axis))
        if L.out_max_val:
            return ctx.node("Identity", [vals], ctx.tops[0])
        return ctx.node("Cast", [idx], ctx.tops[0], to=1)
    flat = ctx.node("Flatten", [ctx.bottoms[0]], axis=1)
    vals, idx = ctx.node("TopK", [flat, k], n_out=2, axis=1)
    idx = ctx.node("Cast", [idx], to=1)
    y = ctx.unsqueeze(idx, [1]) if not L.out_max_val else \
        ctx.node("Concat", [ctx.unsqueeze(idx, [1]), ctx.unsqueeze(vals, [1])], axis=1)
    ctx.reshape(y, ctx.tshapes[0], ctx.bshapes[0], ctx.tops[0])   # (N, 1 | 2, k, 1...)


@converter("Reduction")
def reduction(ctx):
    L = ctx.layer
    P = type(ctx.lp.reduction_param)
    shape = ctx.bshapes[0]
    axis = L.axis
    x = ctx.bottoms[0]
    if len(shape) > axis + 1:
        x = ctx.reshape(x, tuple(shape[:axis]) + (int(np.prod(shape[axis:])),), shape)
    op = {P.SUM: "ReduceSum", P.ASUM: "ReduceL1", P.SUMSQ: "ReduceSumSquare",
          P.MEAN: "ReduceMean"}[L.op]
    if len(shape) == axis:    # nothing to reduce: each value is its own sum
        y = ctx.node("Abs", [x]) if op == "ReduceL1" else \
            ctx.node("Mul", [x, x]) if op == "ReduceSumSquare" else x
    else:
        y = ctx.reduce(op, x, [axis], False)
    if L.coeff != 1.0:
        y = ctx.mul_const(y, L.coeff, "coeff")
    ctx.finish(y if y != ctx.bottoms[0] else ctx.node("Identity", [y]))


@converter("Embed")
def embed(ctx):
    L = ctx.layer
    ids = ctx.node("Cast", [ctx.bottoms[0]], to=7)
    w = ctx.const("weight", param_blob(L, 0))
    if not ctx.lp.embed_param.bias_term:
        return ctx.node("Gather", [w, ids], ctx.tops[0], axis=0)
    y = ctx.node("Gather", [w, ids], axis=0)
    ctx.node("Add", [y, ctx.const("bias", param_blob(L, 1).reshape(-1))], ctx.tops[0])


@converter("Parameter")
def parameter(ctx):
    ctx.node("Identity", [ctx.const("blob", param_blob(ctx.layer, 0))], ctx.tops[0])


@converter("DummyData")
def dummy_data(ctx):
    if any(ctx.layer.refill):
        raise ctx.refuse("a random filler draws new values every forward; only constant "
                         "fillers have an ONNX form")
    if ctx.dynamic:
        raise ctx.refuse("its tops have a fixed batch; export without --dynamic-batch")
    for t, shape in zip(ctx.tops, ctx.tshapes):
        value = np.asarray(ctx.net.blobs[ctx.lp.top[ctx.tops.index(t)]].data, np.float32)
        ctx.node("Identity", [ctx.const("value", np.broadcast_to(value, shape))], t)
