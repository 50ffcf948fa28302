"""Convolution (n-d, grouped, dilated) via batched im2col + GEMM, and the base it shares with
Deconvolution (deconv.py)."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu, kernels
from ..math.workspace import Workspace
from . import conv_onednn
from .base import Layer, register_layer


def _hole(p, n):
    """DeepLab v1's ``hole`` / ``hole_h`` / ``hole_w`` (its name for the dilation; 2-d), as a
    dilation list; [] when the fork fields are absent or 1."""
    fields = p.DESCRIPTOR.fields_by_name
    if "hole" not in fields or not any(p.HasField(f) for f in ("hole", "hole_h", "hole_w")):
        return []
    if p.HasField("hole_h") or p.HasField("hole_w"):
        return [int(p.hole_h), int(p.hole_w)] if n == 2 else [int(p.hole_h)] * n
    return [int(p.hole)]


class _ConvolutionBase(Layer):
    """Shared geometry, parameters and GEMMs of Convolution and Deconvolution.

    ``convolution_param`` fields (defaults): ``num_output`` (required, > 0), ``bias_term`` (true),
    ``kernel_size`` (repeated: once for every spatial axis, or once per axis) or ``kernel_h`` /
    ``kernel_w`` (2-d only); ``pad`` (0) / ``pad_h`` ``pad_w``; ``stride`` (1) / ``stride_h``
    ``stride_w``; ``dilation`` (1, repeated only); ``group`` (1: channels and num_output must be
    divisible by it); ``weight_filler`` / ``bias_filler`` (constant 0); ``axis`` (1: the channel
    axis; earlier axes are batch axes, later ones spatial). ``engine`` and ``force_nd_im2col`` are
    accepted and ignored; so is ``partial_conv_lower`` (andrewwasielewski/caffe-modified: the same
    convolution computed one input channel at a time) with group 1, and refused with groups.
    Several bottoms of one shape may be given: each gets its own top, all share the weights.

    Parameter blobs: weight (conv_out, conv_in / group, *kernel), bias (num_output,); for
    Convolution conv_out = num_output, conv_in = channels, for Deconvolution the reverse.
    """
    min_bottom_blobs = 1
    min_top_blobs = 1
    equal_num_bottom_top_blobs = True
    reverse = False
    # ``keep_columns``: keep each forward column buffer for the weight gradient of the next
    # backward; False (set by the Net for a layer that runs no backward) puts it in the shared
    # workspace, and a backward then recomputes it (as BVLC Caffe always does).
    keep_columns = True
    # ``plain_weights``: the forward convolves with blobs[0] as it is (the compiled inference
    # steps of caffepy.infer read it directly); False for a subclass that transforms it first.
    plain_weights = True
    # ``workspace``: the net's shared scratch arrays (caffepy.math.workspace); a private one when
    # the layer is used on its own.
    workspace = None

    def _scratch(self, slot, shape):
        if self.workspace is None:
            self.workspace = Workspace()
        return self.workspace.get(slot, shape, self.dtype)

    # -- setup ---------------------------------------------------------------------------------
    def _spatial_field(self, p, name, n, default):
        values = list(getattr(p, name)) if name != "kernel_size" else list(p.kernel_size)
        h_name, w_name = {"kernel_size": ("kernel_h", "kernel_w"), "pad": ("pad_h", "pad_w"),
                          "stride": ("stride_h", "stride_w")}[name]
        if p.HasField(h_name) or p.HasField(w_name):
            if n != 2:
                raise self.error("%s/%s can only be used for 2-d convolution (%d spatial axes)"
                                 % (h_name, w_name, n))
            if values:
                raise self.error("either %s or %s/%s may be given, not both"
                                 % (name, h_name, w_name))
            if not (p.HasField(h_name) and p.HasField(w_name)) and name == "kernel_size":
                raise self.error("kernel_h and kernel_w must both be given")
            return (int(getattr(p, h_name)), int(getattr(p, w_name)))
        if not values:
            if default is None:
                raise self.error("kernel_size (or kernel_h and kernel_w) must be specified")
            return (default,) * n
        if len(values) == 1:
            return (int(values[0]),) * n
        if len(values) != n:
            raise self.error("%s must be given once or %d times (once per spatial axis), got %d"
                             % (name, n, len(values)))
        return tuple(int(v) for v in values)

    def default_group(self, channels, p):
        return p.group

    def requested_outputs(self, channels, p):
        """The output channels (before the check that they are positive)."""
        return p.num_output

    def layer_setup(self, bottom, top):
        p = self.layer_param.convolution_param
        self.axis = bottom[0].canonical_axis_index(p.axis)
        n = bottom[0].num_axes - self.axis - 1
        if n < 1:
            raise self.error("needs at least one spatial axis after axis %d (bottom shape %s)"
                             % (self.axis, bottom[0].shape))
        self.num_spatial = n
        self.kernel = self._spatial_field(p, "kernel_size", n, None)
        self.stride = self._spatial_field(p, "stride", n, 1)
        self.pad = self._spatial_field(p, "pad", n, 0)
        dil = list(p.dilation) or _hole(p, n)
        if len(dil) not in (0, 1, n):
            raise self.error("dilation must be given once or %d times, got %d" % (n, len(dil)))
        self.dilation = tuple(int(d) for d in dil) * (n if len(dil) == 1 else 1) if dil else (1,) * n
        for name in ("kernel", "stride"):
            if any(v <= 0 for v in getattr(self, name)):
                raise self.error("%s must be positive, got %s" % (name, getattr(self, name)))
        if any(v < 0 for v in self.dilation):     # BVLC takes 0: every tap reads one position
            raise self.error("dilation must not be negative, got %s" % (self.dilation,))
        self.channels = bottom[0].shape[self.axis]
        self.num_output = self.requested_outputs(self.channels, p)
        if self.num_output <= 0:
            raise self.error("num_output must be positive")
        self.group = self.default_group(self.channels, p)
        if self.group <= 0 or self.channels % self.group or self.num_output % self.group:
            raise self.error("channels (%d) and num_output (%d) must be multiples of group (%d)"
                             % (self.channels, self.num_output, self.group))
        if getattr(p, "partial_conv_lower", False) and self.group != 1:
            # andrewwasielewski/caffe-modified: partial_conv_lower runs the GEMMs one input
            # channel at a time (src/caffe/layers/base_conv_layer.cpp, partial_*_cpu_gemm) and
            # sums them -- the same convolution for group 1; with groups its offsets index a
            # one-channel column buffer past its end
            raise self.error("convolution_param.partial_conv_lower is defined for group 1 only "
                             "(group %d)" % self.group)
        self.bias_term = p.bias_term
        conv_out, conv_in = ((self.channels, self.num_output) if self.reverse
                             else (self.num_output, self.channels))
        shapes = [(conv_out, conv_in // self.group) + self.kernel]
        if self.bias_term:
            shapes.append((self.num_output,))
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)
        self._cols = {}     # bottom index -> the column buffer kept from the last forward

    def reshape(self, bottom, top):
        b0 = bottom[0]
        if b0.num_axes != self.axis + 1 + self.num_spatial:
            raise self.error("bottom num_axes may not change (got shape %s)" % (b0.shape,),
                             ShapeError)
        if b0.shape[self.axis] != self.channels:
            raise self.error("bottom has %d channels, the layer was set up for %d"
                             % (b0.shape[self.axis], self.channels), ShapeError)
        for i, b in enumerate(bottom[1:], 1):
            self.check_shape("bottom[%d]" % i, b0.shape, b.shape)
        self.outer = b0.count_range(0, self.axis)
        self.in_spatial = b0.shape[self.axis + 1:]
        self.out_spatial = self.compute_output_shape(self.in_spatial)
        if any(s <= 0 for s in self.out_spatial):
            raise self.error("output spatial shape %s is empty for input %s"
                             % (self.out_spatial, self.in_spatial), ShapeError)
        shape = b0.shape[:self.axis] + (self.num_output,) + tuple(self.out_spatial)
        for t in top:
            t.reshape(shape)

    # -- GEMM pieces (group-batched) -----------------------------------------------------------
    def _weight(self):
        """Weight viewed as (G, conv_out / G, conv_in / G * prod(kernel))."""
        w = self.blobs[0].data
        return w.reshape(self.group, w.shape[0] // self.group, -1)

    def _is_1x1(self):
        return (all(k == 1 for k in self.kernel) and all(s == 1 for s in self.stride)
                and not any(self.pad))

    def _geometry(self):
        return self.kernel, self.pad, self.stride, self.dilation

    def _im2col(self, x):
        """Column buffer (N, C * prod(K), prod(O)) of x (N, C, *S) (a view for 1x1), in the
        workspace: valid until the next use of its 'col' slot."""
        if self._is_1x1():
            return x.reshape(x.shape[0], x.shape[1], -1)
        shape = (x.shape[0], x.shape[1] * int(np.prod(self.kernel)),
                 int(np.prod(cpu.conv_out_shape(x.shape[2:], *self._geometry()))))
        return cpu.im2col(x, *self._geometry(), out=self._scratch("col", shape))

    def _col2im(self, col, x_shape, out):
        """Adjoint of _im2col written into ``out`` (N, C, *S)."""
        if self._is_1x1():
            out.reshape(col.shape)[...] = col
            return
        cpu.col2im(col, x_shape, *self._geometry(), out=out)

    def _add_bias(self, y):
        if self.bias_term:
            y += self.blobs[1].data.reshape((1, -1) + (1,) * (y.ndim - 2))

    def _bias_grad(self, dy):
        """db += the sum of dy (N, M, ...) over images and positions, where the bias is trained
        (``param_propagate_down[1]``: Caffe's Net sets it for lr_mult > 0 or force_backward).

        Every path (GEMM, oneDNN, depthwise, Deconvolution) sums here, in float64 (numba's
        bias_sum, or numpy's), rounded once when added to the diff.
        A float32 sum drifts from the exact one by about eps * sum |dy|, which is the whole
        result where dy's terms cancel (a convolution feeding a BatchNorm on batch statistics,
        whose bias is then conventionally frozen with lr_mult 0 but still summed under
        force_backward); the float64 sum is at most half a float32 ulp from exact, never
        farther than Caffe's float32 GEMV against a ones vector."""
        if not (self.bias_term and self.param_propagate_down[1]):
            return
        dy = dy.reshape(dy.shape[0], dy.shape[1], -1)
        k = kernels.get()
        if k is not None and dy.flags.c_contiguous:
            bsum = np.zeros(dy.shape[1])
            k.bias_sum(dy, bsum)
        else:
            bsum = dy.sum(axis=(0, 2), dtype=np.float64)
        self.blobs[1].diff += bsum


@register_layer("Convolution")
class ConvolutionLayer(_ConvolutionBase):
    """Convolution: y[n, m] = sum_c W[m, c] * x[n, c] (cross-correlation) + b[m], per group.

    Output size per spatial axis: O = (S + 2 pad - (dilation (kernel - 1) + 1)) / stride + 1,
    divided as C++ does (toward zero: a kernel overhanging the padded input by less than the
    stride gives one output, its outside taps read zeros; caffepy.math.sizes).
    Computed as im2col of the whole batch into one (C * prod(K), prod(O) * N) buffer, then one
    GEMM per group for all images (large GEMMs thread well). Backward: dW += dY col^T, db += sum dY,
    dx = col2im(W^T dY) (stride 1: the equivalent correlation of dY with the flipped kernel, see
    _data_grad_by_conv). The column buffer of the last forward is kept for backward when the net runs one
    (``keep_columns``); the temporaries live in the net's shared workspace.

    Where oneDNN is installed (``caffepy[onednn]``), float32 convolutions run through its direct
    kernels instead (conv_onednn.py; no column buffer).

    Blobs: bottom (*B, C, *S) -> top (*B, num_output, *O), B = axes before ``axis``.
    """

    def compute_output_shape(self, spatial):
        return cpu.conv_out_shape(spatial, self.kernel, self.pad, self.stride, self.dilation)

    def _batch_cols(self, x, key, geometry=None):
        """im2col of x (N, C, *S) in the 'last' layout (C * prod(K), prod(O) * N): columns ordered
        (output position, image), so the copies and col2im's adds run over long contiguous spans.

        ``key``: the bottom index for a forward column buffer (kept in ``self._cols`` for the
        backward when ``keep_columns``, else in the workspace), "dy" for the data gradient's (in
        the workspace). A 1x1 convolution of one image reads x itself (no copy)."""
        geometry = geometry or self._geometry()
        kernel, pad, stride = geometry[:3]
        n, c = x.shape[:2]
        one = all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(pad)
        out_shape = cpu.conv_out_shape(x.shape[2:], *geometry)
        shape = (c * int(np.prod(kernel)), int(np.prod(out_shape)) * n)
        if key != "dy" and self.keep_columns and not (one and n == 1):
            buf = self._cols.get(key)
            if buf is None or buf.shape != shape or buf.dtype != x.dtype:
                buf = np.empty(shape, dtype=x.dtype)
            self._cols[key] = buf
        else:
            self._cols.pop(key, None)
            if one and n == 1:
                return x.reshape(c, -1)
            buf = self._scratch("col", shape)
        if one:
            np.copyto(buf.reshape(c, -1, n), x.reshape(n, c, -1).transpose(1, 2, 0))
            return buf
        padded = cpu.padded_shape(x.shape[2:], *geometry)
        return cpu.im2col(x, *geometry, layout="last", out=buf,
                          pad_buffer=(self._scratch("pad", (c,) + padded + (n,))
                                      if padded != tuple(x.shape[2:]) else None))

    dy_columns_max_bytes = 64 << 20     # see _data_grad_by_conv
    dy_columns_min_outputs = 64

    # ``fused_relu``: None, or the negative slope of a ReLU applied in the same pass (set by
    # caffepy.infer.plan when it fuses a following ReLU layer into this one).
    fused_relu = None

    def _to_image(self, a, out, bias=False):
        """(G, A, P * N) GEMM result -> out (N, G * A, P) [+ bias, then the fused ReLU]."""
        k = kernels.get()
        if k is not None and out.flags.c_contiguous:
            b = self.blobs[1].data if bias and self.bias_term else np.empty(0, out.dtype)
            slope = self.fused_relu if bias and self.fused_relu is not None else 0.0
            k.rows_to_image(a.reshape(out.shape[1], -1), b, slope,
                            bias and self.fused_relu is not None, out)
            return
        cpu.transpose_into(a.reshape(-1, self.outer), out.reshape(self.outer, -1))
        if bias:
            self._add_bias(out)
            cpu.relu_inplace(out, self.fused_relu)

    def _depthwise(self):
        """The direct depthwise kernel applies: 2-d, one input channel per group (at most 4 outputs
        each; a larger multiplier is better served by the GEMM), numba on."""
        return (self.num_spatial == 2 and self.channels == self.group > 1
                and self.num_output <= 4 * self.channels and kernels.get() is not None)

    def _dw_geometry(self):
        (kh, kw), (ph, pw), (sh, sw), (dh, dw) = self._geometry()
        return kh, kw, ph, pw, sh, sw, dh, dw

    def forward_cpu(self, bottom, top):
        if self._depthwise():
            k = kernels.get()
            bias = self.blobs[1].data if self.bias_term else np.empty(0, self.dtype)
            slope = 0.0 if self.fused_relu is None else self.fused_relu
            for b, t in zip(bottom, top):
                x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
                y = t.data.reshape((self.outer, self.num_output) + tuple(self.out_spatial))
                k.dw_forward(x, self.blobs[0].data, bias, *self._dw_geometry(), slope,
                             self.fused_relu is not None, y)
            return
        if conv_onednn.forward(self, bottom, top):
            return
        w = self._weight()
        g = self.group
        for i, (b, t) in enumerate(zip(bottom, top)):
            x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
            col = self._batch_cols(x, i)
            yt = t.data.reshape(self.outer, self.num_output, -1)
            # one image: the GEMM's (G, A, P) order is the top's, so it writes there and the
            # bias (and fused ReLU) pass runs in place
            direct = self.outer == 1 and not np.may_share_memory(yt, col)
            y = np.matmul(w, col.reshape(g, w.shape[2], -1),
                          out=(yt.reshape(g, w.shape[1], -1) if direct else
                               self._scratch("gemm", (g, w.shape[1], col.shape[-1]))))
            self._to_image(y, yt, bias=True)

    def _backward_depthwise(self, top, propagate_down, bottom):
        k = kernels.get()
        for b, t in zip(bottom, top):
            dy = t.diff.reshape((self.outer, self.num_output) + tuple(self.out_spatial))
            self._bias_grad(dy)
            x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
            if self.param_propagate_down[0]:
                k.dw_backward_weight(dy, x, *self._dw_geometry(), self.blobs[0].diff)
        for b, t, down in zip(bottom, top, propagate_down):
            if down:
                dy = t.diff.reshape((self.outer, self.num_output) + tuple(self.out_spatial))
                k.dw_backward_data(dy, self.blobs[0].data, *self._dw_geometry(),
                                   b.diff.reshape((self.outer, self.channels)
                                                  + tuple(self.in_spatial)))

    def _dy_rows(self, dy):
        """dy (N, M, P) -> (M, P * N), the column order of the forward GEMM; adds the bias
        gradient (_bias_grad, the same sum as every path). The copy: with numba and more than one
        thread its parallel pass, on one thread numpy's cache-blocked copy (numba's loop took
        0.9-1.7x its time there)."""
        out = self._scratch("rows", (dy.shape[1], dy.shape[2] * self.outer))
        self._bias_grad(dy)
        k = kernels.get()
        if k is not None and kernels.threads() > 1 and dy.flags.c_contiguous:
            k.image_to_rows(dy, np.empty(0), out)
            return out
        cpu.transpose_into(dy.reshape(self.outer, -1), out.reshape(-1, self.outer))
        return out

    def backward_cpu(self, top, propagate_down, bottom):
        if self._depthwise():
            return self._backward_depthwise(top, propagate_down, bottom)
        if conv_onednn.backward(self, top, propagate_down, bottom):
            return
        w = self._weight()
        g = self.group
        for i, (b, t) in enumerate(zip(bottom, top)):
            dy = t.diff.reshape(self.outer, self.num_output, -1)
            dyt = self._dy_rows(dy).reshape(g, w.shape[1], -1)
            if self.param_propagate_down[0]:
                col = self._cols.get(i)
                if col is None:
                    x = b.data.reshape((self.outer, self.channels) + tuple(self.in_spatial))
                    col = self._batch_cols(x, i)
                col = col.reshape(g, w.shape[2], -1)
                # (col dy^T)^T: the faster operand order for these long-K, small-M/N products
                self.blobs[0].diff += np.matmul(col, dyt.transpose(0, 2, 1)).transpose(
                    0, 2, 1).reshape(self.blobs[0].shape)
            if not propagate_down[i]:
                continue
            xshape = (self.outer, self.channels) + tuple(self.in_spatial)
            dx = b.diff.reshape(self.outer, self.channels, -1)
            dcol_shape = (g, w.shape[2], dyt.shape[-1])
            if self._is_1x1():
                self._to_image(np.matmul(w.transpose(0, 2, 1), dyt,
                                         out=self._scratch("gemm", dcol_shape)), dx)
            elif self._data_grad_by_conv():
                self._data_grad_conv(dy, dx)
            else:
                dcol = np.matmul(w.transpose(0, 2, 1), dyt, out=self._scratch("gemm", dcol_shape))
                cpu.col2im(dcol.reshape(-1, dcol.shape[-1]), xshape, *self._geometry(),
                           layout="last", out=dx.reshape(xshape))

    def _data_grad_by_conv(self):
        """Stride 1 and pad <= dilation (kernel - 1): dx is a 'full' correlation of dy with the
        flipped kernel (im2col of dy + one GEMM). Its GEMM scales with the input size, that of
        W^T dy + col2im with the output size, so it is used for ('same'-like) convolutions whose
        output is nearly as large as the input, where it avoids numpy's slow col2im; not when dy
        has more channels than x and its column buffer would exceed 64 MB (it is num_output /
        channels times the size of W^T dy's: CaffeNet's conv2 would take 298 MB, not 112 MB).
        With numba's (vectorised) 2-d col2im, W^T dy + col2im is taken unless num_output / group
        is below ``dy_columns_min_outputs``: that is the inner dimension of W^T dy's GEMM, which
        OpenBLAS runs at 49 GF/s for 32 and 77 GF/s for 64 (one thread; CIFAR10-quick's conv2 /
        conv3), while the data gradients of CIFAR10-quick's conv3 and CaffeNet's conv3-conv5
        took 1.2-2x longer by the correlation (measured one thread, load 8-10)."""
        if (kernels.get() is not None and self.num_spatial == 2
                and self.num_output // self.group >= self.dy_columns_min_outputs):
            return False
        dy_col_bytes = (self.num_output * np.prod(self.kernel) * np.prod(self.in_spatial)
                        * self.outer * self.dtype.itemsize)
        return (all(s == 1 for s in self.stride)
                and all(p <= d * (k - 1) for p, d, k in zip(self.pad, self.dilation, self.kernel))
                and np.prod(self.in_spatial) <= 1.25 * np.prod(self.out_spatial)
                and (self.num_output <= self.channels
                     or dy_col_bytes <= self.dy_columns_max_bytes))

    def _data_grad_conv(self, dy, out):
        """out (N, C, prod(S)) = correlation of dy with W flipped and transposed per group."""
        g, mg, cg = self.group, self.num_output // self.group, self.channels // self.group
        nd = self.num_spatial
        w = self.blobs[0].data.reshape((g, mg, cg) + self.kernel)
        w = w[(Ellipsis,) + (slice(None, None, -1),) * nd].swapaxes(1, 2).reshape(g, cg, -1)
        pad = tuple(d * (k - 1) - p for p, d, k in zip(self.pad, self.dilation, self.kernel))
        dy = dy.reshape((self.outer, self.num_output) + tuple(self.out_spatial))
        col = self._batch_cols(dy, "dy", (self.kernel, pad, self.stride, self.dilation))
        self._to_image(np.matmul(w, col.reshape(g, w.shape[2], -1),
                                 out=self._scratch("gemm", (g, cg, col.shape[-1]))), out)


@register_layer("DepthwiseConvolution")
class DepthwiseConvolutionLayer(ConvolutionLayer):
    """Depthwise convolution (fork layer type): Convolution with group = channels.

    ``convolution_param.group`` is ignored; num_output must be a multiple of the channels.
    """

    def default_group(self, channels, p):
        return channels


@register_layer("ConvolutionDepthwise")
class ConvolutionDepthwiseLayer(DepthwiseConvolutionLayer):
    """ConvolutionDepthwise (yonghenglh6/DepthwiseConvolution's conv_dw_layer.cpp, copied into
    many MobileNet forks): one kh x kw filter per input channel, y[n, c] = w[c] * x[n, c] (+ b[c]).

    The fork reads only the window fields (kernel, stride, pad, dilation), bias_term and the
    fillers: ``num_output`` and ``group`` are ignored, the top has the bottom's channels, the
    weight is (C, 1, kh, kw) and the bias (C,). Output size as Convolution's.
    """

    def requested_outputs(self, channels, p):
        return channels
