"""Convolution (n-d, grouped, dilated) via batched im2col + GEMM, and the depthwise forms forks
register; the base shared with Deconvolution is conv_base.py."""
import numpy as np

from ..math import cpu, kernels
from . import conv_onednn, conv_winograd
from .base import register_layer
from .conv_base import _ConvolutionBase


@register_layer("Convolution")
class ConvolutionLayer(_ConvolutionBase):
    """Convolution: y[n, m] = sum_c W[m, c] * x[n, c] (cross-correlation) + b[m], per group.

    Output size per spatial axis: O = (S + 2 pad - (dilation (kernel - 1) + 1)) / stride + 1,
    divided as C++ does (toward zero: a kernel overhanging the padded input by less than the
    stride gives one output, its outside taps read zeros; caffepy.math.sizes).
    Computed as im2col of the whole batch into one (C * prod(K), prod(O) * N) buffer, then one
    GEMM per group for all images (large GEMMs thread well). Backward: dW += dY col^T,
    db += sum dY, dx = col2im(W^T dY) (stride 1: the equivalent correlation of dY with the
    flipped kernel, see _data_grad_by_conv). The column buffer of the last forward is kept for
    backward when the net runs one (``keep_columns``); the temporaries live in the net's shared
    workspace.

    In a training net, float32 3x3 / stride 1 convolutions run by Winograd F(2x2, 3x3)
    (conv_winograd.py), and where oneDNN is installed (``caffepy[onednn]``) the other float32
    convolutions through its direct kernels (conv_onednn.py); neither keeps a column buffer.

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
        if conv_winograd.forward(self, bottom, top) or conv_onednn.forward(self, bottom, top):
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
        if (conv_winograd.backward(self, top, propagate_down, bottom)
                or conv_onednn.backward(self, top, propagate_down, bottom)):
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
