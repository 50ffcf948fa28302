"""yulequan/3D-Caffe's ``PoolingND`` (branch 3D-Caffe, src/caffe/layers/pooling_nd_layer.cpp):
MAX or AVE pooling over the 2 or 3 axes after ``axis``, with its own ``pooling_nd_param``. The
window arithmetic is the N-d pooling of :mod:`caffepy.forks.video.nd`, reused here.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer
from ...math.sizes import overhangs, pooled_shape
from .nd import (NdPoolGeometry, nd_ave_pool, nd_ave_pool_backward, nd_max_pool,
                 nd_max_pool_backward, nd_max_pool_mask)


def output_size(in_shape, kernel, stride, pad):
    """The fork's output shape: per axis ``O = ceil((S + 2 pad - k) / stride) + 1``; when any
    axis is padded, every axis whose last window would start at or past ``S + pad`` loses it."""
    return pooled_shape(in_shape, kernel, stride, pad)


@register_layer("PoolingND")
class PoolingNDLayer(Layer):
    """3D-Caffe's N-d pooling (module doc), over bottom ``(*B, C, *S)`` with ``C`` at ``axis``
    and 2 or 3 spatial axes S (the fork implements no other count).

    prototxt: ``pooling_nd_param { pool: MAX|AVE kernel_size (repeated: once, or once per
    spatial axis) stride (1) pad (0) kernel_h kernel_w stride_h stride_w pad_h pad_w (2 spatial
    axes only) global_pooling: false axis: 1 engine }``. ``engine`` is never read by the fork's
    layer (pooling_nd_layer.cpp registers one class, REGISTER_LAYER_CLASS(PoolingND)), nor here.
    Output per axis: :func:`output_size`; window ``w`` spans ``[w stride - pad,
    w stride - pad + k)``. MAX: the maximum over the window's input elements (padding never
    wins; the first maximum in row-major order takes the gradient); a second top holds its flat
    index in the spatial volume. AVE: the sum over the input elements divided by the window
    clipped to the padded input. ``global_pooling``: the kernel is the whole spatial shape (pad 0,
    stride 1). STOCHASTIC is NOT_IMPLEMENTED in the fork, and refused here.
    Backward: the gradient of this forward. (The fork's 3-axis CPU AVE backward divides by the
    window clipped to the unpadded input, its GPU kernel by yet another size, where windows reach
    into the padding; both disagree with the forward there and are not reproduced.)
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def _values(self, p, name, n, default):
        values = [int(v) for v in getattr(p, name)]
        hname, wname = {"kernel_size": ("kernel_h", "kernel_w"), "stride": ("stride_h", "stride_w"),
                        "pad": ("pad_h", "pad_w")}[name]
        if p.HasField(hname) or p.HasField(wname):
            if n != 2:
                raise self.error("%s & %s can only be used for 2 spatial axes" % (hname, wname))
            if values:
                raise self.error("either %s or %s / %s should be specified; not both"
                                 % (name, hname, wname))
            return int(getattr(p, hname)), int(getattr(p, wname))
        if not values:
            if default is None:
                raise self.error("kernel_size (or kernel_h / kernel_w) is required")
            return (default,) * n
        if len(values) not in (1, n):
            raise self.error("%s must be specified once, or once per spatial dimension (%s "
                             "specified %d times; %d spatial dims)" % (name, name, len(values), n))
        return tuple(values) * (n if len(values) == 1 else 1)

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "pooling_nd_param")
        if p is None:
            raise self.error("this schema has no pooling_nd_param")
        P = type(p)
        self.method = p.pool
        if self.method not in (P.MAX, P.AVE):
            raise self.error("pool: STOCHASTIC is not implemented by the fork's PoolingND")
        if len(top) > 1 and self.method != P.MAX:
            raise self.error("a second (mask) top is only produced by MAX pooling")
        self.axis = bottom[0].canonical_axis_index(p.axis)
        n = bottom[0].num_axes - self.axis - 1
        if n not in (2, 3):
            raise self.error("pools 2 or 3 spatial axes after axis %d, got bottom shape %s"
                             % (self.axis, bottom[0].shape), ShapeError)
        self.num_spatial = n
        self.global_pooling = p.global_pooling
        if self.global_pooling:
            if len(p.kernel_size) or p.HasField("kernel_h") or p.HasField("kernel_w"):
                raise self.error("with global_pooling: true the filter size cannot be specified")
            self.kernel = None
        else:
            self.kernel = self._values(p, "kernel_size", n, None)
            if min(self.kernel) <= 0:
                raise self.error("filter dimensions must be nonzero, got %s" % (self.kernel,))
        self.pad = self._values(p, "pad", n, 0)
        self.stride = self._values(p, "stride", n, 1)
        if min(self.stride) <= 0:
            raise self.error("stride dimensions must be nonzero, got %s" % (self.stride,))
        if self.global_pooling and (any(self.pad) or any(s != 1 for s in self.stride)):
            raise self.error("with global_pooling: true, pad must be 0 and stride 1")
        if self.kernel is not None and any(pd >= k for pd, k in zip(self.pad, self.kernel)):
            raise self.error("pad %s must be smaller than the kernel %s" % (self.pad, self.kernel))

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes - self.axis - 1 != self.num_spatial:
            raise self.error("bottom num_axes may not change (got shape %s)" % (b.shape,),
                             ShapeError)
        spatial = tuple(b.shape[self.axis + 1:])
        kernel = spatial if self.global_pooling else self.kernel
        g = NdPoolGeometry(spatial, kernel, self.stride, self.pad)
        g.out = output_size(spatial, kernel, self.stride, self.pad)
        if min(g.out) <= 0 or any((o - 1) * st >= s + p for o, s, st, p in
                                  zip(g.out, spatial, self.stride, self.pad)):
            raise self.error("pooled output %s does not fit the input %s (kernel %s, stride %s, "
                             "pad %s)" % (g.out, spatial, kernel, self.stride, self.pad),
                             ShapeError)
        g.extra = overhangs(spatial, kernel, self.pad, self.stride, (1,) * len(spatial), g.out)
        self.geom = g
        shape = tuple(b.shape[:self.axis + 1]) + g.out
        for t in top:
            t.reshape(shape)

    def _lead(self, blob):
        shape = blob.shape
        return (int(np.prod(shape[:self.axis], dtype=np.int64)), shape[self.axis])

    def forward_cpu(self, bottom, top):
        g = self.geom
        x = bottom[0].data.reshape(self._lead(bottom[0]) + g.in_shape)
        P = type(fork_param(self.layer_param, "pooling_nd_param"))
        if self.method == P.MAX:
            y, self.arg = nd_max_pool(x, g)
            if len(top) > 1:
                top[1].data[...] = nd_max_pool_mask(self.arg, g).reshape(top[1].shape)
        else:
            y = nd_ave_pool(x, g)
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        g = self.geom
        dy = top[0].diff.reshape(self._lead(bottom[0]) + g.out)
        P = type(fork_param(self.layer_param, "pooling_nd_param"))
        if self.method == P.MAX:
            dx = nd_max_pool_backward(dy, self.arg, g)
        else:
            dx = nd_ave_pool_backward(dy, g)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)
