"""oneDNN's convolution primitives for one geometry (:class:`ConvPlan`), on the ctypes layer of
:mod:`caffepy.math.onednn` (memory descriptors, primitives, reorders between Caffe's plain
layouts and the blocked formats the primitives choose)."""
import numpy as np

from .onednn import (ARG_BIAS, ARG_DIFF_DST, ARG_DIFF_SRC, ARG_DIFF_WEIGHTS,
                     ARG_DST, ARG_SRC, ARG_WEIGHTS, CONV_DIRECT, DECONV_DIRECT, FORWARD_TRAINING,
                     Q_DIFF_DST, Q_DIFF_SRC, Q_DIFF_WEIGHTS, Q_DST, Q_SRC, Q_WEIGHTS, _attr, _dims,
                     _Layout, _Md, _Memory, _primitive, _state, get)


class ConvPlan:
    """The primitives of one convolution: x (N, C, *S) -> y (N, M, *O) with weights
    (M, C / G, *K) (Caffe's layout), bias (M,), ``pad`` on both sides of each spatial axis.
    ``transposed``: Caffe's Deconvolution instead (oneDNN's deconvolution primitives), weights
    (C, M / G, *K), O = stride (S - 1) + dilation (K - 1) + 1 - 2 pad. ``plain``: the primitives
    read and write x, y and their gradients in Caffe's NCHW layout themselves (no reorders; for
    1x1 kernels oneDNN then runs them as GEMMs over each image's C x HW matrix) instead of in the
    channel-blocked formats they would choose.

    Raises OneDNNError where oneDNN has no implementation (the caller falls back to im2col +
    GEMM)."""

    def __init__(self, n, c, spatial, m, out_spatial, group, kernel, stride, pad, dilation,
                 bias, transposed=False, plain=False):
        lib, engine = get(), _state["engine"]
        kind = "deconvolution" if transposed else "convolution"
        x_shape = (n, c) + tuple(spatial)
        y_shape = (n, m) + tuple(out_spatial)
        kk = int(np.prod(kernel))
        k_strides = [int(np.prod(kernel[i + 1:])) for i in range(len(kernel))]
        w_dims = (group, m // group, c // group) + tuple(kernel)
        # the weights as (G, M/G, C/G, *K) over Caffe's memory: element (g, m, c) at
        # ((g C/G + c) M/G + m) K in Deconvolution's (C, M/G, *K), at ((g M/G + m) C/G + c) K in
        # Convolution's (M, C/G, *K)
        if transposed:
            w_strides = [(c // group) * (m // group) * kk, kk, (m // group) * kk] + k_strides
        else:
            w_strides = [(m // group) * (c // group) * kk, (c // group) * kk, kk] + k_strides
        if group == 1:
            w_dims, w_strides = w_dims[1:], w_strides[1:]
        small, big = (spatial, out_spatial) if transposed else (out_spatial, spatial)
        pad_r = [(o - 1) * s + d * (k - 1) + 1 - i - p for o, s, d, k, i, p in
                 zip(small, stride, dilation, kernel, big, pad)]
        geo = (_dims(stride), _dims([d - 1 for d in dilation]), _dims(pad), _dims(pad_r))
        self.bias = bias
        self.channels = (c, m)
        x_plain, y_plain = _Md.plain(x_shape), _Md.plain(y_shape)
        x_any, y_any = (x_plain, y_plain) if plain else (_Md(x_shape), _Md(y_shape))
        w_any = _Md(w_dims)
        w_plain, b_plain = _Md(w_dims, w_strides), _Md.plain((m,))
        self._keep = [x_any, y_any, w_any, x_plain, y_plain, w_plain, b_plain]
        alg = DECONV_DIRECT if transposed else CONV_DIRECT

        def make(step, *args):
            return _primitive(getattr(lib, "dnnl_%s_%s_primitive_desc_create" % (kind, step)),
                              "%s %s" % (kind, step.replace("_", " ")), engine, *args)
        self.fwd = make("forward", FORWARD_TRAINING, alg, x_any.handle, w_any.handle,
                        b_plain.handle if bias else None, y_any.handle, *geo, _attr())
        self.fx = _Layout(x_plain.handle, self.fwd.md(Q_SRC))
        self.fw = _Layout(w_plain.handle, self.fwd.md(Q_WEIGHTS))
        self.fy = _Layout(y_plain.handle, self.fwd.md(Q_DST))
        self.b = _Memory(b_plain.handle)
        self.bwd_data = make("backward_data", alg, x_any.handle, w_any.handle, y_any.handle,
                             *geo, self.fwd.pd, _attr())
        self.dx = _Layout(x_plain.handle, self.bwd_data.md(Q_DIFF_SRC))
        self.dw_w = _Layout(w_plain.handle, self.bwd_data.md(Q_WEIGHTS))
        self.dy_d = _Layout(y_plain.handle, self.bwd_data.md(Q_DIFF_DST))
        # no diff_bias: the layer sums the bias gradient itself (conv.py _bias_grad); oneDNN's
        # adds each map in float32 and drifts from the exact sum on large or cancelling maps
        self.bwd_weights = make("backward_weights", alg, x_any.handle, w_any.handle, None,
                                y_any.handle, *geo, self.fwd.pd, _attr())
        self.bx = _Layout(x_plain.handle, self.bwd_weights.md(Q_SRC))
        self.dw = _Layout(w_plain.handle, self.bwd_weights.md(Q_DIFF_WEIGHTS))
        self.dy_w = _Layout(y_plain.handle, self.bwd_weights.md(Q_DIFF_DST))
        # both gradients read dY in one blocked format: reorder it once per backward
        self.dy_shared = (not self.dy_d.same and lib.dnnl_memory_desc_equal(
            self.bwd_data.md(Q_DIFF_DST), self.bwd_weights.md(Q_DIFF_DST)) == 1)

    def channel_efficiency(self, block=None):
        """The share of the forward's work on real channels: oneDNN's blocked formats pad the
        input and output channels to the block (16 floats with AVX-512, 8 with AVX2), and a
        convolution computes every padded channel (LeNet's conv2, 20 -> 50 channels: 20/32 x
        50/64 = 0.49 with AVX-512, 20/24 x 50/56 = 0.74 with AVX2). ``block``: the share as it
        would be with channel blocks of that many floats, for each of x and y that oneDNN keeps
        in a blocked format (a plain one, as the 3-channel image of a first layer, pads
        nothing)."""
        def share(layout, channels):
            if layout.same:
                return 1.0
            if block:
                return channels / float(-(-channels // block) * block)
            return layout.plain.nbytes / float(layout.inner.nbytes)
        return share(self.fx, self.channels[0]) * share(self.fy, self.channels[1])

    def forward(self, x, w, b, y, scratch):
        """y = conv(x, w) + b; ``scratch(slot, floats)`` gives float32 work arrays."""
        sx = scratch("dnnl_x", self.fx.scratch_floats())
        args = [(ARG_SRC, self.fx.to_inner(x, sx)),
                (ARG_WEIGHTS, self.fw.to_inner(w, scratch("dnnl_w", self.fw.scratch_floats())))]
        if self.bias:
            args.append((ARG_BIAS, self.b.bind(b)))
        sy = scratch("dnnl_y", self.fy.scratch_floats())
        args.append((ARG_DST, self.fy.inner_handle(y, sy)))
        self.fwd.run(args)
        self.fy.to_plain(sy, y)

    def backward(self, x, w, dy, dw_sum, dx, scratch):
        """Adds the weight gradient of ``dy`` to ``dw_sum`` (Caffe's parameter diffs
        accumulate; from oneDNN's format in one reorder that adds) when it is not None, and
        writes the data gradient into ``dx`` when it is not None (overwritten). The bias
        gradient is the caller's (no diff_bias)."""
        if dw_sum is not None:
            dyh = self.dy_w.to_inner(dy, scratch("dnnl_y", self.dy_w.scratch_floats()))
            args = [(ARG_SRC, self.bx.to_inner(x, scratch("dnnl_x", self.bx.scratch_floats()))),
                    (ARG_DIFF_DST, dyh)]
            plain_floats = self.dw.plain.nbytes // 4
            sdw = scratch("dnnl_dw", self.dw.scratch_floats() or plain_floats)
            args.append((ARG_DIFF_WEIGHTS, self.dw.inner.bind(sdw)))
            self.bwd_weights.run(args)
            self.dw.add_to_plain(sdw, dw_sum)
        if dx is not None:
            sy = scratch("dnnl_y", self.dy_d.scratch_floats())
            if dw_sum is not None and self.dy_shared:      # dY is in that format already
                dyh = self.dy_d.inner.bind(sy)
            else:
                dyh = self.dy_d.to_inner(dy, sy)
            args = [(ARG_DIFF_DST, dyh),
                    (ARG_WEIGHTS, self.dw_w.to_inner(
                        w, scratch("dnnl_w", self.dw_w.scratch_floats())))]
            sdx = scratch("dnnl_x", self.dx.scratch_floats())
            args.append((ARG_DIFF_SRC, self.dx.inner_handle(dx, sdx)))
            self.bwd_data.run(args)
            self.dx.to_plain(sdx, dx)
