"""py-faster-rcnn's RPN proposal layer (the ``Python`` layer ``rpn.proposal_layer.ProposalLayer``
that caffepy runs with its built-in ``caffepy.forks.detection.frcnn.proposal``, and the fork type
``Proposal``), as ONNX operators, for one image (batch 1):

    anchors   the A anchors shifted over the H x W cells: a constant (H W A, 4) tensor
    fg        scores[0, A:2A] as (H, W, A) flattened; deltas (H, W, 4A) as (H W A, 4)
    boxes     bbox_transform_inv: centre + d_x w, exp(d_w) w (float32; caffepy uses float64)
    clip      to [0, width - 1] x [0, height - 1] from im_info
    filter    Compress the boxes whose sides (x2 - x1 + 1, y2 - y1 + 1) are >= RPN_MIN_SIZE *
              im_info[2]
    pre-NMS   TopK(min(count, RPN_PRE_NMS_TOP_N)), largest first
    NMS       NonMaxSuppression on (x1, y1, x2 + 1, y2 + 1): the same IoU as py-faster-rcnn's
              +1 box areas; a box is suppressed when IoU > RPN_NMS_THRESH (as ``ovr <= thresh``
              keeps); at most RPN_POST_NMS_TOP_N kept, in score order
    tops      rois (R, 5) = [0, x1, y1, x2, y2]; scores (R, 1)
R is known only at run time, so every later shape that caffepy computed for R is written with a
symbolic axis 0 (see ``Graph.symbolic_axis0``). The settings are read from the layer as built
(``caffepy.forks.detection.frcnn.config.cfg`` of its phase, or the fork's ``proposal_param``).
"""
import numpy as np

from .builder import converter

_BIG = 1 << 30


def proposal_impl(layer, lp):
    """The caffepy ProposalLayer behind a ``Python`` or ``Proposal`` layer, else None."""
    from ..forks.detection.frcnn.proposal import ProposalLayer
    impl = getattr(layer, "impl", None) if lp.type == "Proposal" else getattr(layer, "py_layer",
                                                                                None)
    return impl if isinstance(impl, ProposalLayer) else None


def _col(ctx, x, i):
    return ctx.node("Slice", [x, ctx.ints("starts", [i]), ctx.ints("ends", [i + 1]),
                              ctx.ints("axes", [1])])


def convert(ctx, impl):
    if ctx.g.dynamic_batch or ctx.bshapes[0][0] != 1:
        raise ctx.refuse("the proposal layer is exported for batch 1 only (it treats each "
                         "image of a batch in turn); export without --dynamic-batch at batch 1")
    s = impl.settings
    pre_n, post_n = int(s["RPN_PRE_NMS_TOP_N"]), int(s["RPN_POST_NMS_TOP_N"])
    a = impl.anchors.shape[0]
    _, _, height, width = ctx.bshapes[0]
    from ..forks.detection.frcnn.boxes import shifted_anchors
    anchors = shifted_anchors(impl.anchors, height, width, impl.feat_stride)
    wa = anchors[:, 2:3] - anchors[:, 0:1] + 1.0
    ha = anchors[:, 3:4] - anchors[:, 1:2] + 1.0
    cxa, cya = anchors[:, 0:1] + 0.5 * wa, anchors[:, 1:2] + 0.5 * ha
    scores, deltas, im_info = ctx.bottoms[:3]
    fg = ctx.node("Slice", [scores, ctx.ints("starts", [a]), ctx.ints("ends", [2 * a]),
                            ctx.ints("axes", [1])])
    fg = ctx.node("Reshape", [ctx.node("Transpose", [fg], perm=[0, 2, 3, 1]), ctx.ints("flat", [-1])])
    d = ctx.node("Reshape", [ctx.node("Transpose", [deltas], perm=[0, 2, 3, 1]),
                             ctx.ints("rows", [-1, 4])])
    px = ctx.node("Add", [ctx.node("Mul", [_col(ctx, d, 0), ctx.const("wa", wa)]), ctx.const("cxa", cxa)])
    py = ctx.node("Add", [ctx.node("Mul", [_col(ctx, d, 1), ctx.const("ha", ha)]), ctx.const("cya", cya)])
    hw = ctx.mul_const(ctx.node("Mul", [ctx.node("Exp", [_col(ctx, d, 2)]), ctx.const("wa2", wa)]), 0.5)
    hh = ctx.mul_const(ctx.node("Mul", [ctx.node("Exp", [_col(ctx, d, 3)]), ctx.const("ha2", ha)]), 0.5)
    boxes = ctx.node("Concat", [ctx.node("Sub", [px, hw]), ctx.node("Sub", [py, hh]),
                                ctx.node("Add", [px, hw]), ctx.node("Add", [py, hh])], axis=1)
    info = ctx.node("Reshape", [im_info, ctx.ints("info_shape", [-1])])
    one = ctx.const("one", np.ones(1))
    h1 = ctx.node("Sub", [ctx.node("Slice", [info, ctx.ints("h0", [0]), ctx.ints("h1", [1])]), one])
    w1 = ctx.node("Sub", [ctx.node("Slice", [info, ctx.ints("w0", [1]), ctx.ints("w1", [2])]), one])
    scale = ctx.node("Slice", [info, ctx.ints("s0", [2]), ctx.ints("s1", [3])])
    lim = ctx.node("Concat", [w1, h1, w1, h1], axis=0)
    boxes = ctx.node("Max", [ctx.node("Min", [boxes, lim]), ctx.const("zero", np.zeros(1))])
    min_side = ctx.mul_const(scale, float(s["RPN_MIN_SIZE"]), "min_size")
    ws = ctx.node("Add", [ctx.node("Sub", [_col(ctx, boxes, 2), _col(ctx, boxes, 0)]), one])
    hs = ctx.node("Add", [ctx.node("Sub", [_col(ctx, boxes, 3), _col(ctx, boxes, 1)]), one])
    keep = ctx.node("And", [ctx.node("GreaterOrEqual", [ws, min_side]),
                            ctx.node("GreaterOrEqual", [hs, min_side])])
    keep = ctx.node("Reshape", [keep, ctx.ints("keep_shape", [-1])])
    boxes = ctx.node("Compress", [boxes, keep], axis=0)
    fg = ctx.node("Compress", [fg, keep], axis=0)
    count = ctx.node("Shape", [fg])
    k = count if pre_n <= 0 else ctx.node("Min", [count, ctx.ints("pre_nms_top_n", [pre_n])])
    vals, order = ctx.node("TopK", [fg, k], n_out=2, axis=0, largest=1, sorted=1)
    boxes = ctx.node("Gather", [boxes, order], axis=0)
    nms_boxes = ctx.unsqueeze(ctx.node("Add", [boxes, ctx.const("plus1", [0, 0, 1, 1])]), [0])
    nms_scores = ctx.unsqueeze(vals, [0, 1])
    selected = ctx.node("NonMaxSuppression", [
        nms_boxes, nms_scores, ctx.ints("post_nms_top_n", [post_n if post_n > 0 else _BIG]),
        ctx.const("nms_thresh", [s["RPN_NMS_THRESH"]])])
    sel = ctx.node("Reshape", [_col(ctx, selected, 2), ctx.ints("sel_shape", [-1])])
    rois = ctx.node("Gather", [boxes, sel], axis=0)
    zeros = ctx.node("ConstantOfShape", [ctx.node("Concat", [
        ctx.node("Shape", [sel]), ctx.ints("one_col", [1])], axis=0)])
    ctx.node("Concat", [zeros, rois], ctx.tops[0], axis=1)
    if len(ctx.tops) > 1:
        ctx.unsqueeze(ctx.node("Gather", [vals, sel], axis=0), [1], ctx.tops[1])


@converter("Proposal")
def proposal(ctx):
    impl = proposal_impl(ctx.layer, ctx.lp)
    if impl is None:
        raise ctx.refuse("not caffepy's RPN proposal layer")
    convert(ctx, impl)
