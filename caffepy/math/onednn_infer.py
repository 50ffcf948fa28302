"""oneDNN convolutions for inference mode (caffepy.optimize): forward only, weights reordered once.

:class:`InferConvPlan` is one 2-d convolution of an inference plan, x (N, C, H, W) ->
y (N, M, OH, OW), with oneDNN's ``forward_inference`` primitive: the bias and a fused ReLU
(``negative_slope`` = the eltwise post-op's alpha) are applied by the primitive itself, and the
weights are reordered into the primitive's blocked format once, when the plan is made (inference
mode copies a net's weights at that point anyway: caffepy.optimize). Only the input and the output
are reordered per forward (NCHW <-> oneDNN's blocked format); the output may be a strided view
(a channel slice of a Concat's top). Training convolutions are :class:`caffepy.math.onednn.ConvPlan`.
"""
import numpy as np

from . import onednn as D

FORWARD_INFERENCE = 96          # dnnl_forward_inference


class InferConvPlan(object):
    """y = relu?(conv(x, w) + b) for fixed weights ``w`` (M, C / G, KH, KW) and bias ``b`` (M,)
    or None; ``y_strides``: the output's element strides (a view), None for a plain array.
    ``relu``: None, or the ReLU's negative slope. ``weights``: a list shared by the plans of one
    layer (other batch sizes, parts of the batch): reordered weights of an equal format are
    reused from it, new ones added. Raises OneDNNError where oneDNN has no implementation (the
    caller keeps its GEMM step)."""

    def __init__(self, x_shape, w, b, out_spatial, group, stride, pad, dilation, relu=None,
                 y_strides=None, weights=None):
        lib, engine = D.get(), D._state["engine"]
        n, c = x_shape[:2]
        m, kernel = w.shape[0], w.shape[2:]
        y_shape = (n, m) + tuple(out_spatial)
        w_dims = (m, c // group) + tuple(kernel)
        if group > 1:
            w_dims = (group, m // group) + w_dims[1:]
        pad_r = [(o - 1) * s + d * (k - 1) + 1 - i - p for o, s, d, k, i, p in
                 zip(out_spatial, stride, dilation, kernel, x_shape[2:], pad)]
        geo = (D._dims(stride), D._dims([d - 1 for d in dilation]), D._dims(pad), D._dims(pad_r))
        x_any, y_any, w_any = D._Md(x_shape), D._Md(y_shape), D._Md(w_dims)
        x_plain, w_plain = D._Md.plain(x_shape), D._Md.plain(w_dims)
        y_plain = D._Md(y_shape, y_strides) if y_strides is not None else D._Md.plain(y_shape)
        b_plain = D._Md.plain((m,))
        self.attr = D.Attr(relu)
        self._keep = [x_any, y_any, w_any, x_plain, y_plain, w_plain, b_plain]
        self.fwd = D._primitive(lib.dnnl_convolution_forward_primitive_desc_create,
                                "convolution forward (inference)", engine, FORWARD_INFERENCE,
                                D.CONV_DIRECT, x_any.handle, w_any.handle,
                                b_plain.handle if b is not None else None, y_any.handle, *geo,
                                self.attr.handle)
        self.fx = D._Layout(x_plain.handle, self.fwd.md(D.Q_SRC))
        self.fy = D._Layout(y_plain.handle, self.fwd.md(D.Q_DST))
        w_md = self.fwd.md(D.Q_WEIGHTS)
        fw = D._Layout(w_plain.handle, w_md)
        self.wmem = fw.inner
        weights = [] if weights is None else weights
        for owner, arr in weights:          # the weights in the primitive's format, once
            if lib.dnnl_memory_desc_equal(owner.fwd.md(D.Q_WEIGHTS), w_md) == 1:
                self.w = arr
                break
        else:
            if fw.same:
                self.w = np.ascontiguousarray(w, dtype=np.float32).reshape(-1).copy()
            else:
                self.w = np.empty(fw.scratch_floats(), np.float32)
                fw.to_inner(np.ascontiguousarray(w, dtype=np.float32), self.w)
            weights.append((self, self.w))
        self.b = None
        if b is not None:
            self.b = np.ascontiguousarray(b, dtype=np.float32).reshape(-1).copy()
            self.bmem = D._Memory(b_plain.handle)
        self.scratch = (self.fx.scratch_floats(), self.fy.scratch_floats())

    def forward(self, x, y, sx, sy):
        """Writes relu?(conv(x) + b) into ``y`` (plain, or the strided view the plan was made
        for); ``sx`` / ``sy``: float32 work arrays of at least ``scratch`` elements."""
        args = [(D.ARG_SRC, self.fx.to_inner(x, sx)),
                (D.ARG_WEIGHTS, self.wmem.bind(self.w))]
        if self.b is not None:
            args.append((D.ARG_BIAS, self.bmem.bind(self.b)))
        args.append((D.ARG_DST, self.fy.inner_handle(y, sy)))
        self.fwd.run(args)
        self.fy.to_plain(sy, y)


def scratch_bound(n, c, spatial):
    """Elements of a blocked copy of an (n, c, *spatial) tensor: channels padded to 16, the
    largest block oneDNN's CPU formats use."""
    return n * (-(-c // 16) * 16) * int(np.prod(spatial))
