"""Layers that move data without arithmetic: Concat, Slice, Split, Flatten, Reshape, Crop, Tile."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu
from .base import Layer, register_layer


def _axis(layer, blob, axis):
    n = blob.num_axes
    if not -n <= axis < n:
        e = layer.error("axis %d out of range for a %d-axis bottom of shape %s"
                        % (axis, n, blob.shape), ShapeError)
        e.axes_needed = axis + 1 if axis >= 0 else -axis
        raise e
    return axis + n if axis < 0 else axis


def _along(shape, own, axis):
    """``shape`` with ``own``'s size on ``axis`` (when ``own`` has that axis): what a blob of
    shape ``own`` must be to be concatenated with one of ``shape`` there."""
    out = list(shape)
    if len(own) == len(shape) and axis < len(own):
        out[axis] = own[axis]
    return out


def _no_in_place(layer, bottom, top):
    if any(t is b for t in top for b in bottom):
        raise layer.error("does not allow in-place computation (top and bottom are the same blob)")


@register_layer("Concat")
class ConcatLayer(Layer):
    """Joins bottoms along one axis: y = [x_0, x_1, ...] on ``axis``; dL/dx_i is its slice of dL/dy.

    prototxt: ``concat_param { axis: 1 }`` (legacy ``concat_dim``, used when given; not both).
    Bottoms: the same number of axes and the same shape except on ``axis``. Top: one blob.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.concat_param
        if p.HasField("axis") and p.HasField("concat_dim"):
            raise self.error("either axis or concat_dim should be given, not both")

    def reshape(self, bottom, top):
        p = self.layer_param.concat_param
        self.axis = _axis(self, bottom[0], p.concat_dim if p.HasField("concat_dim") else p.axis)
        shape = list(bottom[0].shape)
        for i, b in enumerate(bottom[1:], 1):
            other = list(b.shape)
            if len(other) != len(shape) or other[:self.axis] + other[self.axis + 1:] != \
                    shape[:self.axis] + shape[self.axis + 1:]:
                raise self.needs("bottom[%d] shape %s does not match bottom[0] shape %s outside "
                                 "axis %d" % (i, b.shape, bottom[0].shape, self.axis),
                                 [(i, _along(shape, other, self.axis), None),
                                  (0, _along(other, shape, self.axis), None)])
        shape[self.axis] = sum(b.shape[self.axis] for b in bottom)
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        np.concatenate([b.data for b in bottom], axis=self.axis, out=top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        start = 0
        for b, down in zip(bottom, propagate_down):
            n = b.shape[self.axis]
            if down:
                index = (slice(None),) * self.axis + (slice(start, start + n),)
                b.diff[...] = top[0].diff[index]
            start += n


@register_layer("Slice")
class SliceLayer(Layer):
    """Cuts the bottom along one axis into the tops (the inverse of Concat).

    prototxt: ``slice_param { axis: 1 slice_point: ... }`` (legacy ``slice_dim``). With k tops,
    k - 1 increasing slice points; without them the axis is split into k equal parts.
    Bottom: any shape; tops: the bottom's shape with the axis cut.
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.slice_param
        if p.HasField("axis") and p.HasField("slice_dim"):
            raise self.error("either axis or slice_dim should be given, not both")

    def reshape(self, bottom, top):
        p = self.layer_param.slice_param
        self.axis = _axis(self, bottom[0], p.slice_dim if p.HasField("slice_dim") else p.axis)
        dim = bottom[0].shape[self.axis]
        points = [int(s) for s in p.slice_point]
        if points:
            if len(points) != len(top) - 1:
                raise self.error("%d slice_point values for %d tops (need %d)"
                                 % (len(points), len(top), len(top) - 1))
            bounds = [0] + points + [dim]
            if any(b <= a for a, b in zip(bounds, bounds[1:])):
                raise self.error("slice_point %s must increase strictly within (0, %d) on axis %d"
                                 % (points, dim, self.axis), ShapeError)
        else:
            if dim % len(top):
                raise self.error("axis %d of size %d cannot be split equally into %d tops"
                                 % (self.axis, dim, len(top)), ShapeError)
            bounds = list(range(0, dim + 1, dim // len(top)))
        self.bounds = bounds
        for t, a, b in zip(top, bounds, bounds[1:]):
            shape = list(bottom[0].shape)
            shape[self.axis] = b - a
            t.reshape(shape)

    def _index(self, i):
        return (slice(None),) * self.axis + (slice(self.bounds[i], self.bounds[i + 1]),)

    def forward_cpu(self, bottom, top):
        for i, t in enumerate(top):
            t.data[...] = bottom[0].data[self._index(i)]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            for i, t in enumerate(top):
                bottom[0].diff[self._index(i)] = t.diff


@register_layer("Split")
class SplitLayer(Layer):
    """Fans one blob out to several consumers: every top shares the bottom's data;
    dL/dx = sum of the tops' diffs. Inserted automatically by the net; no parameters.
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1

    def reshape(self, bottom, top):
        _no_in_place(self, bottom, top)
        shape_only = not getattr(bottom[0], "allocated", True)
        for t in top:
            t.reshape(bottom[0].shape)
            if not shape_only:    # a net built for its shapes shares at the first forward
                t.share_data(bottom[0])

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            diff = bottom[0].diff
            if len(top) == 1:
                cpu.copy_into(top[0].diff, diff)
                return
            cpu.add_into(top[0].diff, top[1].diff, diff)    # one pass, as Caffe's caffe_add
            for t in top[2:]:
                cpu.add_into(diff, t.diff, diff)


class _ViewLayer(Layer):
    """A layer whose top is a reshaped view of its bottom: forward is free (data is shared in
    ``reshape``), backward copies the diff back in the bottom's shape."""

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.reshape(bottom[0].shape)


@register_layer("Flatten")
class FlattenLayer(_ViewLayer):
    """Merges axes [axis, end_axis] into one; the top shares the bottom's data.

    prototxt: ``flatten_param { axis: 1 end_axis: -1 }``. (N, C, H, W) -> (N, C*H*W) by default.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        _no_in_place(self, bottom, top)
        p = self.layer_param.flatten_param
        shape = bottom[0].shape
        start, end = _axis(self, bottom[0], p.axis), _axis(self, bottom[0], p.end_axis)
        if end < start:
            raise self.error("end_axis %d comes before axis %d" % (end, start), ShapeError)
        top[0].reshape(shape[:start] + (bottom[0].count_range(start, end + 1),) + shape[end + 1:])
        top[0].share_data(bottom[0])


@register_layer("Reshape")
class ReshapeLayer(_ViewLayer):
    """Changes the shape without touching the data (the top shares the bottom's data).

    prototxt: ``reshape_param { shape { dim: ... } axis: 0 num_axes: -1 }``: the dims replace
    bottom axes [axis, axis + num_axes) (num_axes -1: to the end; negative axis counts from the
    end, -1 meaning after the last axis). A dim of 0 copies the bottom's dim at that position,
    one dim of -1 is inferred so that the count is unchanged.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        dims = [int(d) for d in self.layer_param.reshape_param.shape.dim]
        if dims.count(-1) > 1:
            raise self.error("at most one dim may be -1 (inferred), got shape %s" % dims)
        if any(d < -1 for d in dims):
            raise self.error("dims must be >= -1, got shape %s" % dims)
        self.dims = dims

    def reshape(self, bottom, top):
        _no_in_place(self, bottom, top)
        p = self.layer_param.reshape_param
        shape, n = bottom[0].shape, bottom[0].num_axes
        start = p.axis if p.axis >= 0 else n + p.axis + 1
        if not 0 <= start <= n:
            raise self.error("axis %d out of range for a %d-axis bottom" % (p.axis, n), ShapeError)
        if p.num_axes < -1:
            raise self.error("num_axes must be >= -1, got %d" % p.num_axes)
        end = n if p.num_axes == -1 else start + p.num_axes
        if end > n:
            raise self.error("axis %d + num_axes %d exceed the bottom's %d axes"
                             % (start, p.num_axes, n), ShapeError)
        new = list(self.dims)
        for i, d in enumerate(new):
            if d == 0:
                if start + i >= n:
                    raise self.error("dim %d is 0 (copy) but the bottom %s has no axis %d"
                                     % (i, shape, start + i), ShapeError)
                new[i] = shape[start + i]
        out = list(shape[:start]) + new + list(shape[end:])
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
            if known == 0 or bottom[0].count % known:
                raise self.error("cannot infer the -1 dim: bottom count %d is not a multiple of %d"
                                 % (bottom[0].count, known), ShapeError)
            out[out.index(-1)] = bottom[0].count // known
        if int(np.prod(out, dtype=np.int64)) != bottom[0].count:
            raise self.needs("output shape %s has count %d, bottom %s has count %d"
                             % (tuple(out), int(np.prod(out)), shape, bottom[0].count),
                             [(0, out, None)] if p.num_axes == -1 and p.axis >= 0 else [])
        top[0].reshape(out)
        top[0].share_data(bottom[0])


@register_layer("Crop")
class CropLayer(Layer):
    """Crops bottom[0] to the shape of bottom[1] on axes >= ``axis``, starting at ``offset``.

    y = x[..., o_a : o_a + s_a, ...] for each axis a >= axis (s_a = bottom[1].shape[a]).
    dL/dx is dL/dy in the cropped window and 0 elsewhere; bottom[1] gives only its shape.
    prototxt: ``crop_param { axis: 2 offset: ... }``: no offset (0), one (for every cropped
    axis) or one per cropped axis. Bottoms must have the same number of axes.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def crop_shape(self, bottom, start):
        """The sizes the cropped axes take (axes before ``start`` are kept): bottom[1]'s."""
        x, ref = bottom[0].shape, bottom[1].shape
        if len(x) != len(ref):      # a reference of bottom[0]'s own shape would pass
            raise self.needs("bottoms have %d and %d axes (shapes %s, %s); they must match"
                             % (len(x), len(ref), x, ref), [(1, x, 0)])
        return ref

    def reshape(self, bottom, top):
        p = self.layer_param.crop_param
        x = bottom[0].shape
        start = _axis(self, bottom[0], p.axis)
        ref = self.crop_shape(bottom, start)
        offsets = [int(o) for o in p.offset]
        if len(offsets) > 1 and start + len(offsets) != len(x):
            raise self.error("%d offsets for %d cropped axes (axis %d of %d)"
                             % (len(offsets), len(x) - start, start, len(x)))
        index, shape = [], []
        for a in range(len(x)):
            if a < start:
                index.append(slice(None))
                shape.append(x[a])
                continue
            o = 0 if not offsets else offsets[0] if len(offsets) == 1 else offsets[a - start]
            if o + ref[a] > x[a]:
                raise self.error("axis %d: offset %d + crop size %d exceeds the bottom size %d"
                                 % (a, o, ref[a], x[a]), ShapeError)
            index.append(slice(o, o + ref[a]))
            shape.append(ref[a])
        self.index = tuple(index)
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data[self.index]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            bottom[0].diff[self.index] = top[0].diff


@register_layer("Tile")
class TileLayer(Layer):
    """Repeats the block of axes [axis, end) ``tiles`` times along ``axis``.

    Viewing x as (outer, inner) with outer = prod(shape[:axis]), y is (outer, tiles * inner) with
    each row x[o] repeated; dL/dx[o] = sum over the tiles of dL/dy. Top: shape[axis] * tiles.
    prototxt: ``tile_param { axis: 1 tiles: <required, > 0> }``.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.tiles = self.layer_param.tile_param.tiles
        if self.tiles <= 0:
            raise self.error("tiles must be positive, got %d" % self.tiles)

    def reshape(self, bottom, top):
        self.axis = _axis(self, bottom[0], self.layer_param.tile_param.axis)
        shape = list(bottom[0].shape)
        self.outer, self.inner = bottom[0].count_range(0, self.axis), bottom[0].count_range(self.axis)
        shape[self.axis] *= self.tiles
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.outer, 1, self.inner)
        top[0].data.reshape(self.outer, self.tiles, self.inner)[...] = x

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff.reshape(self.outer, self.tiles, self.inner)
            bottom[0].diff[...] = dy.sum(axis=1).reshape(bottom[0].shape)
