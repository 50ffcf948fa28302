"""Fork layers: Interp (bilinear, aligned corners), Upsample (nearest), PriorBox (a constant),
and the layers refused with their reason.

    Interp    crop by -pad_beg / -pad_end (Slice), then Resize(linear, align_corners) to the
              output size caffepy computed: output y samples input y (Hi - 1) / (Ho - 1).
    Upsample  Resize(nearest, asymmetric, floor) by the integer scale: y[h] = x[h // s];
              SegNet's (values and a pooling mask): MaxUnpool at mask + (n C + c) Ho Wo;
              the YOLOv5 ports' (to a size or by factors): MatMuls by its resampling matrices.
    PriorBox  depends only on the bottoms' shapes, so its top is computed once by caffepy and
              stored as an initializer (shape (1, 2, 4 K), any batch).
Refused (no faithful ONNX form): DetectionOutput (SSD's per-class NMS with confidence
threshold, top_k, adaptive eta and keep_top_k across classes, and a data-dependent output
(1, 1, K, 7): ONNX's NonMaxSuppression has no eta, no keep_top_k across classes and a
different output layout, so any mapping changes which boxes survive), PSROIPooling (no ONNX
op), Python layers (arbitrary Python code; py-faster-rcnn's proposal layer excepted, see
``ops_proposal``), recurrent layers (LSTM / RNN: Caffe's sequence
continuation input has no ONNX equivalent), the loss and accuracy layers (need labels).
"""
import numpy as np

from .builder import ALL, converter, variant_converter


def _sizes(ctx, x, hw):
    if not ctx.dynamic:
        return ctx.ints("sizes", list(ctx.bshapes[0][:2]) + list(hw))
    nc = ctx.node("Slice", [ctx.node("Shape", [x]), ctx.ints("starts", [0]), ctx.ints("ends", [2])])
    return ctx.node("Concat", [nc, ctx.ints("hw", list(hw))], axis=0)


@converter("Interp")
def interp(ctx):
    L = ctx.layer
    x = ctx.bottoms[0]
    if L.pad_beg or L.pad_end:
        b = -L.pad_beg
        x = ctx.node("Slice", [x, ctx.ints("starts", [b, b]), ctx.ints("ends", [b + L.hi, b + L.wi]),
                               ctx.ints("axes", [2, 3])])
    ho, wo = ctx.tshapes[0][2:]
    if (ho, wo) == (L.hi, L.wi):
        return ctx.node("Identity", [x], ctx.tops[0])
    ctx.node("Resize", [x, "", "", _sizes(ctx, x, (ho, wo))], ctx.tops[0], mode="linear",
             coordinate_transformation_mode="align_corners")


@variant_converter("Upsample", "SegNetUpsampleLayer")
def segnet_upsample(ctx):
    """SegNet's Upsample (caffepy.forks.segmentation.segnet): each value goes to its plane's
    position in the mask (a Pooling layer's mask top, h Wo + w) -> MaxUnpool, whose indices run
    over the whole output: the mask plus (n C + c) Ho Wo."""
    if ctx.dynamic:
        raise ctx.refuse("the mask's offsets depend on the batch size: export without "
                         "--dynamic-batch")
    n, c = ctx.bshapes[0][:2]
    ho, wo = ctx.tshapes[0][2:]
    offsets = (np.arange(n * c, dtype=np.int64) * (ho * wo)).reshape(n, c, 1, 1)
    idx = ctx.node("Add", [ctx.node("Cast", [ctx.bottoms[1]], to=7),
                           ctx.const("offsets", offsets, np.int64)])
    # kernel = stride = the scale, the end padding what pad_out removes: the size MaxUnpool
    # infers is then at most the output's (onnxruntime refuses a smaller output_shape)
    scales = [-(-o // i) for o, i in zip((ho, wo), ctx.bshapes[0][2:])]
    ends = [max(0, s * i - o) for s, i, o in zip(scales, ctx.bshapes[0][2:], (ho, wo))]
    ctx.node("MaxUnpool", [ctx.bottoms[0], idx, ctx.ints("shape", [n, c, ho, wo])],
             ctx.tops[0], kernel_shape=scales, strides=scales, pads=[0, 0] + ends)


@variant_converter("Upsample", "SizeScaleUpsampleLayer")
def size_scale_upsample(ctx):
    """The YOLOv5 ports' Upsample (caffepy.forks.misc.upsample_size): its two resampling
    matrices, y = A_h x A_w^T, as two MatMuls (nearest and the fork's bilinear alike)."""
    L = ctx.layer
    rows = ctx.node("MatMul", [ctx.const("rows", np.asarray(L.Ah, np.float32)), ctx.bottoms[0]])
    ctx.node("MatMul", [rows, ctx.const("cols", np.asarray(L.Aw.T, np.float32))], ctx.tops[0])


@converter("Upsample")
def upsample(ctx):
    s = float(ctx.layer.s)
    scales = ctx.const("scales", np.array([1.0, 1.0, s, s]))
    ctx.node("Resize", [ctx.bottoms[0], "", scales], ctx.tops[0], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@converter("PriorBox", variants=ALL)     # the layer's own forward, stored
def prior_box(ctx):
    i = ctx.net.layers.index(ctx.layer)
    ctx.layer.forward(ctx.net.bottom_vecs[i], ctx.net.top_vecs[i])
    value = np.array(ctx.net.top_vecs[i][0].data, dtype=np.float32)
    ctx.node("Identity", [ctx.const("priors", value)], ctx.tops[0])


def _refuse(why):
    def convert(ctx):
        raise ctx.refuse(why)
    convert.variants = ALL              # every class of the type, for the same reason
    return convert


converter("DetectionOutput")(_refuse(
    "SSD's per-class NMS (confidence threshold, top_k, adaptive eta, keep_top_k across classes, "
    "(1, 1, K, 7) output) has no faithful ONNX form; export the net up to its mbox_loc / "
    "mbox_conf / mbox_priorbox blobs and decode outside"))
converter("PSROIPooling")(_refuse("position-sensitive RoI pooling has no ONNX operator"))
converter("LSTM", "RNN", "LSTMUnit")(_refuse(
    "Caffe's recurrent layers take a sequence-continuation input that ONNX's LSTM / RNN lack"))
converter("Im2col")(_refuse("im2col has no ONNX operator"))
converter("HDF5Output")(_refuse("writes files as a side effect"))
for _t in ("Accuracy", "SegAccuracy", "SoftmaxWithLoss", "SigmoidCrossEntropyLoss",
           "EuclideanLoss", "HingeLoss", "InfogainLoss", "MultinomialLogisticLoss",
           "ContrastiveLoss", "SmoothL1Loss", "SoftmaxWithLossOHEM", "SmoothL1LossOHEM",
           "BoxAnnotatorOHEM"):
    converter(_t)(_refuse("a loss / accuracy layer needs labels: export the deploy net"))
for _t in ("Data", "ImageData", "HDF5Data", "WindowData", "MemoryData", "AnnotatedData",
           "VideoData", "ImageSegData", "ImageLabelmapData", "DenseImageData"):
    converter(_t)(_refuse("reads its data from files; export a deploy net with Input layers"))


@converter("Python")
def python(ctx):
    from . import ops_proposal
    impl = ops_proposal.proposal_impl(ctx.layer, ctx.lp)
    if impl is not None:
        return ops_proposal.convert(ctx, impl)
    p = ctx.lp.python_param
    raise ctx.refuse("Python layer %s.%s: arbitrary Python code has no ONNX form"
                     % (p.module, p.layer))
