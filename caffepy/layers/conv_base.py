"""The base Convolution and Deconvolution share (conv.py, deconv.py, and the forks' convolutions):
the geometry and fields of ``convolution_param``, the parameter blobs and the bias pass."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu, kernels
from ..math.workspace import Workspace
from .base import Layer


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
    ``stride_w``; ``dilation`` (1) / ``dilation_h`` ``dilation_w`` (2-d only, both given, not
    with ``dilation``: the per-axis dilation that yjxiong/caffe@9831a2b's base_conv_layer.cpp and
    im2col.cpp read like kernel_h / kernel_w, which BannyStone/Caffe, XiaohangZhan/mix-and-match
    and ECO's caffe_3d declare too; Deconvolution sizes its top with the dilated kernel, as BVLC,
    where 9831a2b's deconv_layer.cpp leaves the dilation out); ``group`` (1: channels and num_output must be
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
                          "stride": ("stride_h", "stride_w"),
                          "dilation": ("dilation_h", "dilation_w")}[name]
        if p.HasField(h_name) or p.HasField(w_name):
            if n != 2:
                raise self.error("%s/%s can only be used for 2-d convolution (%d spatial axes)"
                                 % (h_name, w_name, n))
            if values:
                raise self.error("either %s or %s/%s may be given, not both"
                                 % (name, h_name, w_name))
            if not (p.HasField(h_name) and p.HasField(w_name)) and name in ("kernel_size",
                                                                             "dilation"):
                raise self.error("%s and %s must both be given" % (h_name, w_name))
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
        if p.HasField("dilation_h") or p.HasField("dilation_w"):
            self.dilation = self._spatial_field(p, "dilation", n, 1)
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
