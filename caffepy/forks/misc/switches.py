"""Zeiler-Fergus deconvnet visualisation with pooling switches, as quanweikikai/deconv-net's nets
use it: ``PoolingSwitches`` (max pooling that also outputs where each maximum was),
``SliceHalf`` (splits that output in two) and ``InvPooling`` (puts pooled values back at their
switches). No repository of quanweikikai holds the layers; the Caffe of BUPTLdy/Caffe_Code_Analysis
(the tree the harvested schema names for these types) does: caffe/src/caffe/layers/
pooling_switches_layer.cpp, slice_half_layer.cpp, inv_pooling_layer.cpp.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...layers.pooling import PoolingLayer, max_pool, max_pool_backward, max_pool_mask


def _max_only(layer):
    p = layer.layer_param.pooling_param
    if p.pool != p.MAX:
        raise layer.error("only MAX pooling is implemented (the fork's AVE loops cover half the "
                          "channels; STOCHASTIC is NOT_IMPLEMENTED there)")


@register_layer("PoolingSwitches")
class PoolingSwitchesLayer(PoolingLayer):
    """MAX pooling (Caffe's windows, ceil rounding, padding) whose one top stacks the pooled
    values and their switches along the batch axis:

        top[:N] = max over each window;  top[N:] = h W + w of its (first) maximum in the plane

    dL/dx: top[:N]'s gradient at each maximum, as Pooling's; the switches get none. prototxt:
    ``pooling_param { pool: MAX kernel_size stride pad }``. Bottom: N x C x H x W; top:
    2N x C x PH x PW.
    """
    type = "PoolingSwitches"
    min_top_blobs = max_top_blobs = None
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        _max_only(self)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        top[0].reshape((2 * bottom[0].shape[0],) + top[0].shape[1:])

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        y, self.arg = max_pool(bottom[0].data, self.geom)
        top[0].data[:n] = y
        top[0].data[n:] = max_pool_mask(self.arg, self.geom)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n = bottom[0].shape[0]
            bottom[0].diff[...] = max_pool_backward(top[0].diff[:n], self.arg, self.geom)


@register_layer("SliceHalf")
class SliceHalfLayer(Layer):
    """Slice with its one slice point fixed at half the bottom's batch, num / 2 (taken at set-up),
    along ``slice_param.axis`` (default 1) or ``slice_dim``: top 0 holds indices [0, num / 2) of
    that axis, top 1 the rest; backward copies the gradients back. Bottom: any blob; 2 tops.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.slice_param
        if p.HasField("axis") and p.HasField("slice_dim"):
            raise self.error("either axis or slice_dim may be given, not both")
        self.point = bottom[0].shape[0] // 2 if bottom[0].num_axes else 0

    def reshape(self, bottom, top):
        p = self.layer_param.slice_param
        b = bottom[0]
        self.axis = int(p.slice_dim) if p.HasField("slice_dim") else b.canonical_axis_index(p.axis)
        if not 0 <= self.axis < b.num_axes or not 0 < self.point < b.shape[self.axis]:
            raise self.error("slice point %d (half the batch) must lie inside axis %d of %s"
                             % (self.point, self.axis, b.shape), ShapeError)
        for t, size in zip(top, (self.point, b.shape[self.axis] - self.point)):
            t.reshape(b.shape[:self.axis] + (size,) + b.shape[self.axis + 1:])

    def _halves(self, a):
        return np.split(a, [self.point], axis=self.axis)

    def forward_cpu(self, bottom, top):
        for t, part in zip(top, self._halves(bottom[0].data)):
            t.data[...] = part

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            for t, part in zip(top, self._halves(bottom[0].diff)):
                part[...] = t.diff


@register_layer("InvPooling")
class InvPoolingLayer(Layer):
    """Unpooling by switches: the bottom stacks switches (first half of the batch) and pooled
    values (second half), as Concat along axis 0 builds it from PoolingSwitches' halves. Each
    value goes to position s = switch (h W + w, truncated to an integer) of its channel's
    zero-filled output plane; where several values share a switch the last in raster order stays:

        top[n, c].flat[int(S[n, c, p])] = V[n, c, p],   everything else 0

    Output size: OH = (H - 1) stride + kernel - 2 pad (likewise OW). A switch outside the plane
    is dropped (the fork writes it past the plane). dL/dV[n, c, p] = dL/dtop at its position
    where it was kept, else 0; the switches get no gradient. prototxt: ``pooling_param
    { pool: MAX kernel_size stride pad }``. Bottom: 2N x C x H x W; top: N x C x OH x OW.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        _max_only(self)
        p = self.layer_param.pooling_param
        self.k = ((int(p.kernel_h), int(p.kernel_w)) if p.HasField("kernel_h")
                  else (int(p.kernel_size),) * 2)
        self.s = ((int(p.stride_h), int(p.stride_w)) if p.HasField("stride_h")
                  else (int(p.stride),) * 2)
        self.p = (int(p.pad_h), int(p.pad_w)) if p.HasField("pad_h") else (int(p.pad),) * 2
        if p.global_pooling or min(self.k) <= 0:
            raise self.error("a kernel size is required (global pooling has no inverse here)")

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes != 4 or b.shape[0] % 2:
            raise self.error("bottom must be 2N x C x H x W (switches, then values), got %s"
                             % (b.shape,), ShapeError)
        n, c, h, w = b.shape
        out = tuple((i - 1) * s + k - 2 * p for i, s, k, p in zip((h, w), self.s, self.k, self.p))
        if min(out) <= 0:
            raise self.error("output %s is empty" % (out,), ShapeError)
        top[0].reshape(n // 2, c, out[0], out[1])

    def _targets(self, bottom, top):
        """Flat positions in top (index per value, -1 where the value is not kept)."""
        n, c = top[0].shape[:2]
        plane = top[0].shape[2] * top[0].shape[3]
        sw = np.trunc(bottom[0].data[:n]).reshape(n, c, -1).astype(np.int64)
        flat = sw + plane * np.arange(n * c).reshape(n, c, 1)
        flat = np.where((sw >= 0) & (sw < plane), flat, -1).reshape(-1)
        keep = np.full(n * c * plane, -1, dtype=np.int64)
        order = np.arange(flat.size)
        ok = flat >= 0
        keep[flat[ok]] = order[ok]          # the last writer of each position stays
        kept = np.zeros(flat.size, dtype=bool)
        kept[keep[keep >= 0]] = True
        return np.where(kept, flat, -1)

    def forward_cpu(self, bottom, top):
        n = top[0].shape[0]
        self.target = self._targets(bottom, top)
        values = bottom[0].data[n:].reshape(-1)
        out = top[0].data.reshape(-1)
        out[...] = 0
        ok = self.target >= 0
        out[self.target[ok]] = values[ok]

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        n = top[0].shape[0]
        bottom[0].diff[...] = 0
        dv = bottom[0].diff[n:].reshape(-1)
        ok = self.target >= 0
        dv[ok] = top[0].diff.reshape(-1)[self.target[ok]]
