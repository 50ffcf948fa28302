"""N-d convolution and pooling of the 3-D video forks, over N x C x S1 x ... x Sn blobs (video:
N x C x L x H x W).

Two families spell them:

* ``Pooling`` with a list or repeated ``kernel_size`` / ``stride`` / ``pad`` -- the caffe_3d of
  mzolfaghari/ECO-efficient-video-understanding and the caffe3d of VisionLearningGroup/R-C3D,
  whose PoolingParameter declares those fields ``repeated`` (one value for every spatial axis, or
  one per axis) and pools over every axis after the channels (cuDNN's N-d pooling). BVLC keeps the
  fields singular: the reader turns ``kernel_size: [4, 7, 7]`` or ``kernel_size: 1 kernel_size: 2
  kernel_size: 2`` in a ``pooling_param`` into ``kernel_size_nd`` / ``stride_nd`` / ``pad_nd``
  (caffepy.proto.fork_text.ND_SPELLINGS; schema: proto/additions.d/video_nd_pooling.json), and a
  Pooling layer with any of those is :class:`PoolingNdLayer`. Convolution needs nothing: BVLC's
  ConvolutionParameter already has them repeated and caffepy's Convolution is N-d.
* ``NdConvolution`` / ``NdPooling`` of chuckcho/video-caffe (also in R-C3D's caffe3d), cuDNN layers
  whose kernel, stride and pad are BlobShapes: ``kernel_shape { dim: 3 dim: 3 dim: 3 }``,
  ``stride_shape``, ``pad_shape`` in ``convolution_param`` / ``pooling_param`` (numbers 7777-7779).

Pooling math (all of them; Caffe's PoolingLayer::Reshape and the N-d cuDNN layers): per spatial
axis, O = ceil((S + 2 pad - k) / stride) + 1, minus 1 when pad > 0 and (O - 1) stride >= S + pad
(the last window must start inside the input or its leading pad); window w of an axis spans
[w stride - pad, w stride - pad + k). MAX: the maximum over the window's input elements (padding
never wins; first maximum in row-major window order takes the gradient); an optional second top
holds its flat index in the input's spatial volume. AVE: the sum over the input elements divided
by the window clipped to the padded input, prod_axes (min(start + k, S + pad) - start) (Caffe's
divisor: padding counts as zeros). The forks run these through cuDNN (MAX /
AVERAGE_COUNT_INCLUDE_PADDING), which agrees wherever the windows stay inside the padded input.
``global_pooling`` takes the whole spatial volume (pad 0, stride 1).

A third: the OpenCL branch of Caffe (BVLC/caffe branch opencl), whose PoolingLayer is N-d with
BVLC's fields (src/caffe/layers/pooling_layer.cpp there: one kernel_size for every spatial axis,
the same ceil rule). A plain ``Pooling`` whose bottom has more than 4 axes, which BVLC refuses, is
computed by :class:`PoolingNdLayer` (caffepy.layers.pooling.ND_POOLING).
"""
import itertools

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from ...layers.conv import ConvolutionLayer
from ...layers.pooling import ND_POOLING, pooled_size, rounds_up
from ...math.cpu import pad_spatial
from ...math.sizes import overhangs


class NdPoolGeometry(object):
    """Kernel, stride, pad and output shape of N-d pooling over ``in_shape`` (spatial axes)."""

    def __init__(self, in_shape, kernel, stride, pad, ceil=True):
        self.in_shape = tuple(int(s) for s in in_shape)
        self.kernel, self.stride, self.pad = tuple(kernel), tuple(stride), tuple(pad)
        self.out = tuple(pooled_size(s, k, st, p, ceil) for s, k, st, p in
                         zip(self.in_shape, self.kernel, self.stride, self.pad))
        # extra trailing padding so that every (ceil-rounded) window lies inside the buffer
        self.extra = overhangs(self.in_shape, self.kernel, self.pad, self.stride,
                               (1,) * len(self.kernel), self.out)

    @property
    def in_hw(self):
        """The input's spatial shape, under :class:`caffepy.layers.pooling.PoolGeometry`'s name
        (the ONNX export reads either)."""
        return self.in_shape

    @property
    def out_hw(self):
        return self.out

    def padded(self, x, value):
        return pad_spatial(x, self.pad, value=value, extra=self.extra)

    def padded_shape(self, lead):
        return tuple(lead) + tuple(s + 2 * p + e for s, p, e in
                                   zip(self.in_shape, self.pad, self.extra))

    def offsets(self):
        """Every offset of a window, row-major (the order Caffe's loops scan a window in)."""
        return list(itertools.product(*[range(k) for k in self.kernel]))

    def slab(self, offset):
        """Index of the padded input holding element ``offset`` of every window."""
        return (Ellipsis,) + tuple(slice(i, i + s * (o - 1) + 1, s) for i, s, o in
                                   zip(offset, self.stride, self.out))

    def crop(self, xp):
        return xp[(Ellipsis,) + tuple(slice(p, p + s) for p, s in zip(self.pad, self.in_shape))]

    def pool_size(self):
        """AVE divisor per output: the window clipped to the padded input (Caffe's rule)."""
        size = np.ones(self.out)
        for axis, (s, k, st, p, o) in enumerate(zip(self.in_shape, self.kernel, self.stride,
                                                    self.pad, self.out)):
            start = np.arange(o) * st - p
            shape = [1] * len(self.out)
            shape[axis] = o
            size = size * (np.minimum(start + k, s + p) - start).reshape(shape)
        return size


def nd_max_pool(x, g):
    """(y, arg): the maximum of each window over the trailing spatial axes and the row-major
    index of the window offset where it is first reached (padding never wins)."""
    xp = g.padded(x, -np.inf)
    y = arg = None
    for idx, off in enumerate(g.offsets()):
        v = xp[g.slab(off)]
        if y is None:
            y, arg = v.copy(), np.zeros(v.shape, np.int32)
            continue
        better = v > y
        np.copyto(y, v, where=better)
        arg[better] = idx
    return y, arg


def nd_max_pool_mask(arg, g):
    """Flat index, in the input's spatial volume, of each window's maximum."""
    offs = np.array(g.offsets()).reshape((-1, len(g.kernel)))
    index = np.zeros(arg.shape, np.int64)
    n = len(g.kernel)
    for axis in range(n):
        shape = [1] * n
        shape[axis] = g.out[axis]
        start = (np.arange(g.out[axis]) * g.stride[axis] - g.pad[axis]).reshape(shape)
        index = index * g.in_shape[axis] + (start + offs[arg, axis])
    return index


def nd_max_pool_backward(dy, arg, g):
    dxp = np.zeros(g.padded_shape(dy.shape[:dy.ndim - len(g.kernel)]), dtype=dy.dtype)
    for idx, off in enumerate(g.offsets()):
        dxp[g.slab(off)] += np.where(arg == idx, dy, 0)
    return g.crop(dxp)


def nd_ave_pool(x, g):
    xp = g.padded(x, 0)
    y = None
    for off in g.offsets():
        v = xp[g.slab(off)]
        y = v.copy() if y is None else y + v
    return y / g.pool_size().astype(x.dtype)


def nd_ave_pool_backward(dy, g):
    dyn = dy / g.pool_size().astype(dy.dtype)
    dxp = np.zeros(g.padded_shape(dy.shape[:dy.ndim - len(g.kernel)]), dtype=dy.dtype)
    for off in g.offsets():
        dxp[g.slab(off)] += dyn
    return g.crop(dxp)


class _NdPoolingBase(Layer):
    """Set-up and math shared by the Pooling N-d variant and NdPooling; subclasses give
    ``_geometry_fields(p, n)`` -> (kernel or None for global, stride, pad) tuples of n values."""
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def _values(self, values, name, n, default):
        values = [int(v) for v in values]
        if not values:
            if default is None:
                raise self.error("%s is required" % name)
            return (default,) * n
        if len(values) == 1:
            return (values[0],) * n
        if len(values) != n:
            raise self.error("%s must be given once or once per spatial axis (%d), got %d values"
                             % (name, n, len(values)), ShapeError)
        return tuple(values)

    def layer_setup(self, bottom, top):
        p = self.layer_param.pooling_param
        P = type(p)
        self.method = p.pool
        if self.method not in (P.MAX, P.AVE):
            raise self.error("N-d pooling implements MAX and AVE only (as the forks)")
        if len(top) > 1 and self.method != P.MAX:
            raise self.error("a second (mask) top is only produced by MAX pooling")
        self.global_pooling = p.global_pooling
        self.ceil = rounds_up(p)
        self.num_spatial = bottom[0].num_axes - 2
        if self.num_spatial < 1:
            raise self.error("bottom must be N x C x spatial..., got %s" % (bottom[0].shape,),
                             ShapeError)
        self.kernel, self.stride, self.pad = self._geometry_fields(p, self.num_spatial)
        if min(self.stride) <= 0:
            raise self.error("stride must be positive, got %s" % (self.stride,))
        if self.global_pooling:
            if any(self.pad) or any(s != 1 for s in self.stride):
                raise self.error("with global_pooling: true only pad = 0 and stride = 1 are "
                                 "allowed")
            return
        if min(self.kernel) <= 0:
            raise self.error("kernel size must be positive, got %s" % (self.kernel,))
        if any(pd >= k for pd, k in zip(self.pad, self.kernel)):
            raise self.error("pad %s must be smaller than the kernel %s" % (self.pad, self.kernel))

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes - 2 != self.num_spatial:
            raise self.error("bottom num_axes may not change (got shape %s)" % (b.shape,),
                             ShapeError)
        spatial = b.shape[2:]
        kernel = spatial if self.global_pooling else self.kernel
        self.geom = NdPoolGeometry(spatial, kernel, self.stride, self.pad, self.ceil)
        if min(self.geom.out) <= 0:
            raise self.error("pooled output %s is empty for input %s" % (self.geom.out, spatial),
                             ShapeError)
        for t in top:
            t.reshape(tuple(b.shape[:2]) + self.geom.out)

    def forward_cpu(self, bottom, top):
        P = type(self.layer_param.pooling_param)
        x = bottom[0].data
        if self.method == P.MAX:
            y, self.arg = nd_max_pool(x, self.geom)
            if len(top) > 1:
                top[1].data[...] = nd_max_pool_mask(self.arg, self.geom)
        else:
            y = nd_ave_pool(x, self.geom)
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        P = type(self.layer_param.pooling_param)
        dy = top[0].diff
        if self.method == P.MAX:
            dx = nd_max_pool_backward(dy, self.arg, self.geom)
        else:
            dx = nd_ave_pool_backward(dy, self.geom)
        bottom[0].diff[...] = dx


def _has_nd_fields(lp):
    p = lp.pooling_param
    return bool(len(p.kernel_size_nd) or len(p.stride_nd) or len(p.pad_nd))


@register_variant("Pooling", _has_nd_fields)
class PoolingNdLayer(_NdPoolingBase):
    """Pooling over every axis after the channels, as the caffe_3d of
    mzolfaghari/ECO-efficient-video-understanding and the caffe3d of VisionLearningGroup/R-C3D
    (their repeated PoolingParameter fields; math in the module doc).

    prototxt: ``pooling_param { pool: MAX kernel_size: [4, 7, 7] stride: [1, 2, 2] pad: [0, 1, 1]
    global_pooling: false }``, each field a list or repeated (read into ``kernel_size_nd`` /
    ``stride_nd`` / ``pad_nd``): one value for every spatial axis or one per axis; a field given
    once stays BVLC's and applies to every axis. ``kernel_h`` / ``kernel_w`` (and the stride / pad
    ones) only for 2 spatial axes. Defaults: stride 1, pad 0. ``round_mode: FLOOR`` (or
    ``ceil_mode: false``) floors the output size instead.
    Blobs: bottom (N, C, *S) -> top (N, C, *O) [, mask (N, C, *O) for MAX].
    """

    def _field(self, p, nd_name, name, h_name, w_name, n, default):
        given = [f for f in (nd_name, name, h_name, w_name)
                 if (len(getattr(p, f)) if f == nd_name else p.HasField(f))]
        if len(given) > 1 and not (set(given) == {h_name, w_name}):
            raise self.error("%s may be given in one way only (got %s)"
                             % (name, ", ".join(given)))
        if p.HasField(h_name) or p.HasField(w_name):
            if n != 2:
                raise self.error("%s / %s can only be used for 2 spatial axes" % (h_name, w_name))
            if not (p.HasField(h_name) and p.HasField(w_name)):
                raise self.error("both %s and %s are required" % (h_name, w_name))
            return int(getattr(p, h_name)), int(getattr(p, w_name))
        values = list(getattr(p, nd_name)) or ([getattr(p, name)] if p.HasField(name) else [])
        return self._values(values, name, n, default)

    def _geometry_fields(self, p, n):
        if self.global_pooling:
            if len(p.kernel_size_nd) or p.HasField("kernel_size") or p.HasField("kernel_h") \
                    or p.HasField("kernel_w"):
                raise self.error("with global_pooling: true the kernel size cannot be specified")
            kernel = None
        else:
            kernel = self._field(p, "kernel_size_nd", "kernel_size", "kernel_h", "kernel_w", n,
                                 None)
        return (kernel, self._field(p, "stride_nd", "stride", "stride_h", "stride_w", n, 1),
                self._field(p, "pad_nd", "pad", "pad_h", "pad_w", n, 0))


ND_POOLING.append(PoolingNdLayer)     # a plain Pooling over a 5-d bottom: the OpenCL branch's


def _shape(layer, param, name, n, default):
    """The dims of BlobShape field ``name`` of ``param`` (n of them), or ``default`` n times."""
    if not param.HasField(name):
        if default is None:
            raise layer.error("%s is required" % name)
        return (default,) * n
    dims = tuple(int(d) for d in getattr(param, name).dim)
    if len(dims) != n:
        raise layer.error("%s has %d dims, the bottom has %d spatial axes"
                          % (name, len(dims), n), ShapeError)
    return dims


@register_layer("NdPooling")
class NdPoolingLayer(_NdPoolingBase):
    """chuckcho/video-caffe's cuDNN N-d pooling (CudnnNdPoolingLayer, also in the caffe3d of
    VisionLearningGroup/R-C3D), math in the module doc.

    prototxt: ``pooling_param { pool: MAX kernel_shape { dim: 2 dim: 2 dim: 2 } stride_shape {
    dim: 2 dim: 2 dim: 2 } pad_shape { dim: 0 dim: 0 dim: 0 } global_pooling: false }``, one dim
    per spatial axis; stride 1 and pad 0 when absent. The fork reads no kernel_size / stride /
    pad, no mask top (a second top here is the MAX mask, flat index in the spatial volume).
    Blobs: bottom (N, C, *S) -> top (N, C, *O).
    """
    max_top_blobs = 2

    def _geometry_fields(self, p, n):
        kernel = None if self.global_pooling else _shape(self, p, "kernel_shape", n, None)
        return kernel, _shape(self, p, "stride_shape", n, 1), _shape(self, p, "pad_shape", n, 0)


@register_layer("NdConvolution")
class NdConvolutionLayer(ConvolutionLayer):
    """chuckcho/video-caffe's cuDNN N-d convolution (CudnnNdConvolutionLayer, also in the caffe3d
    of VisionLearningGroup/R-C3D): BVLC's convolution over every axis after the channels,

        y[n, o, p] = b[o] + sum_{c in group(o), k} W[o, c, k] x_pad[n, c, p * stride + k]

    (p, k: N-d positions), x zero-padded by pad_shape; output per axis
    O = (S + 2 pad - k) / stride + 1 (C++ division, caffepy.math.sizes). Grouped; no dilation
    (the fork's cuDNN descriptor has none; ``dilation`` is not read, as in the fork).

    prototxt: ``convolution_param { num_output kernel_shape { dim: 3 dim: 3 dim: 3 } stride_shape
    { dim: 1 dim: 1 dim: 1 } pad_shape { dim: 1 dim: 1 dim: 1 } group: 1 bias_term: true
    weight_filler bias_filler }``, one dim per spatial axis; stride 1 and pad 0 when absent.
    Params: weight (num_output, C / group, *kernel), bias (num_output,). Blobs: bottom (N, C, *S)
    -> top (N, num_output, *O). The fork drops output axes of size 1 from the top's shape, which
    its own cuDNN call cannot run; they are kept here.
    """

    def _spatial_field(self, p, name, n, default):
        shape_name = {"kernel_size": "kernel_shape", "stride": "stride_shape",
                      "pad": "pad_shape"}[name]
        return _shape(self, p, shape_name, n, default)

    def layer_setup(self, bottom, top):
        if self.layer_param.convolution_param.axis != 1:
            raise self.error("NdConvolution convolves every axis after axis 1 (it has no axis)")
        ConvolutionLayer.layer_setup(self, bottom, top)
        self.dilation = (1,) * self.num_spatial
