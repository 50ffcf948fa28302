"""Scale and Bias: broadcast multiply / add of a learned parameter or of a second bottom.

The operand (shape S) is matched against bottom[0]'s axes [axis, axis + len(S)); bottom[0] is
viewed as (outer, count(S), inner) and the operand broadcast over outer and inner. A scalar
operand (no axes) applies everywhere (axis is then ignored).
"""
import numpy as np

from .. import fillers
from ..errors import CaffeError, ShapeError
from ..math import kernels
from .base import Layer, register_layer


def _canonical_axis(layer, blob, axis):
    try:
        return blob.canonical_axis_index(axis)
    except CaffeError as e:
        wrapped = layer.error(str(e), ShapeError)
        wrapped.__dict__.update(e.__dict__)       # axes_needed (caffepy.zoo.label_shapes)
        raise wrapped


def _param_shape(layer, bottom, axis, num_axes):
    """Shape of a learned operand: bottom.shape[axis : axis + num_axes] (-1: to the end)."""
    axis = _canonical_axis(layer, bottom, axis)
    if num_axes < -1:
        raise layer.error("num_axes must be non-negative, or -1 to extend to the end of bottom[0]; "
                          "got %d" % num_axes)
    if num_axes >= 0 and bottom.num_axes < axis + num_axes:
        raise layer.error("the parameter's shape extends past bottom[0]'s shape %s when applied "
                          "from axis %d with num_axes %d" % (bottom.shape, axis, num_axes), ShapeError)
    end = bottom.num_axes if num_axes == -1 else axis + num_axes
    return bottom.shape[axis:end]


def _broadcast_dims(layer, bottom, operand, axis, what):
    """(outer, dim, inner) of bottom around ``operand``, checking that the shapes line up."""
    axis = 0 if operand.num_axes == 0 else _canonical_axis(layer, bottom, axis)
    span = bottom.shape[axis:axis + operand.num_axes]
    if tuple(span) != tuple(operand.shape):
        raise layer.error("%s of shape %s does not match bottom[0] shape %s from axis %d"
                          % (what, operand.shape, bottom.shape, axis), ShapeError)
    return (bottom.count_range(0, axis), operand.count,
            bottom.count_range(axis + operand.num_axes))


@register_layer("Scale")
class ScaleLayer(Layer):
    """y = x * s (+ b): s a learned parameter (one bottom) or bottom[1]; optional learned bias b.

    dL/dx = dL/dy * s;  dL/ds = sum over outer and inner of dL/dy * x;  dL/db = sum dL/dy.
    Learned-parameter diffs accumulate (also when the scale has x's full shape, where Caffe
    overwrites); a scale taken from bottom[1] gets its diff overwritten. As in Caffe, when bottom[0]
    gets no gradient its diff is left holding the scratch product dL/dy * x.

    prototxt: ``scale_param { axis: 1 num_axes: 1 (-1: to the end) filler (default constant 1)
    bias_term: false bias_filler (default constant 0) }``; with a second bottom, num_axes is
    that bottom's and the scale blob is not created.
    Blobs: bottom x, optional bottom s (shape = x.shape[axis : axis + s.ndim]); top y (shape of
    x; in place allowed). Params: [scale (x.shape[axis : axis + num_axes])] (one bottom) then
    [bias (same shape as the scale)] when bias_term.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.scale_param
        if len(bottom) == 1 and not self.blobs:
            blob = self.new_blob(_param_shape(self, bottom[0], p.axis, p.num_axes))
            if p.HasField("filler"):
                fillers.fill(blob, p.filler)
            else:
                blob.data[...] = 1.0
            self.blobs = [blob]
        self.bias_index = None
        if p.bias_term:
            if len(self.blobs) + len(bottom) < 3:
                num_axes = bottom[1].num_axes if len(bottom) > 1 else p.num_axes
                bias = self.new_blob(_param_shape(self, bottom[0], p.axis, num_axes))
                fillers.fill(bias, p.bias_filler)
                self.blobs.append(bias)
            self.bias_index = len(self.blobs) - 1
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        axis = self.layer_param.scale_param.axis
        scale = bottom[1] if len(bottom) > 1 else self.blobs[0]
        self.dims = _broadcast_dims(self, bottom[0], scale, axis, "scale")
        if self.bias_index is not None:
            bias = self.blobs[self.bias_index]
            if _broadcast_dims(self, bottom[0], bias, axis, "bias") != self.dims:
                raise self.error("bias shape %s does not match scale shape %s"
                                 % (bias.shape, scale.shape), ShapeError)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def _scale(self, bottom):
        return (bottom[1] if len(bottom) > 1 else self.blobs[0]).data.reshape(1, -1, 1)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.dims)
        self.saved_x = None
        if top[0] is bottom[0]:             # in place: x is kept for the scale's gradient
            buf = getattr(self, "_saved_buf", None)
            if buf is None or buf.shape != x.shape or buf.dtype != x.dtype:
                buf = self._saved_buf = np.empty_like(x)
            self.saved_x = buf
        y = top[0].data.reshape(self.dims)
        s = self._scale(bottom)
        k = kernels.get()
        if k is not None and x.flags.c_contiguous and y.flags.c_contiguous:
            b = (self.blobs[self.bias_index].data.reshape(-1) if self.bias_index is not None
                 else np.zeros(s.size, s.dtype))
            s = np.ascontiguousarray(s.reshape(-1))
            if self.saved_x is not None:
                k.channel_affine_keep(x, s, b, self.saved_x, y)
            else:
                k.channel_affine(x, s, b, y)
            return
        if self.saved_x is not None:
            np.copyto(self.saved_x, x)
        np.multiply(x, s, out=y)
        if self.bias_index is not None:
            y += self.blobs[self.bias_index].data.reshape(1, -1, 1)

    def _backward_fused(self, top, propagate_down, bottom):
        """The learned per-channel scale's gradients and dx in one kernel (numba), where the bottom
        gets its gradient (else Caffe's scratch use of its diff must show): True when it ran."""
        k = kernels.get()
        if k is None or len(bottom) != 1 or not propagate_down[0] or self.dims[1] != \
                self.blobs[0].count:
            return False
        dy, dx = top[0].diff.reshape(self.dims), bottom[0].diff.reshape(self.dims)
        x = self.saved_x if self.saved_x is not None else bottom[0].data.reshape(self.dims)
        scale = self.blobs[0].data.reshape(-1)
        if not all(a.flags.c_contiguous for a in (dy, dx, x, scale)):
            return False
        want_bias = self.bias_index is not None and self.param_propagate_down[self.bias_index]
        dbias = self.blobs[self.bias_index].diff.reshape(-1) if want_bias else scale[:0]
        k.scale_backward(dy, x, scale, self.blobs[0].diff.reshape(-1), dbias,
                         bool(self.param_propagate_down[0]), want_bias, dx)
        return True

    def backward_cpu(self, top, propagate_down, bottom):
        if self._backward_fused(top, propagate_down, bottom):
            return
        dy = top[0].diff.reshape(self.dims)
        if self.bias_index is not None and self.param_propagate_down[self.bias_index]:
            self.blobs[self.bias_index].diff.reshape(-1)[...] += dy.sum(axis=(0, 2))
        from_param = len(bottom) == 1
        if (self.param_propagate_down[0] if from_param else propagate_down[1]):
            x = self.saved_x if self.saved_x is not None else bottom[0].data.reshape(self.dims)
            product = dy * x
            if self.saved_x is None and self.dims[1] != bottom[0].count:
                # Caffe uses bottom[0]'s diff as scratch for this product, so a bottom that gets
                # no gradient is left holding dy * x there; reproduce it.
                bottom[0].diff.reshape(self.dims)[...] = product
            grad = product.sum(axis=(0, 2))
            if from_param:
                self.blobs[0].diff.reshape(-1)[...] += grad
            else:
                bottom[1].diff.reshape(-1)[...] = grad
        if propagate_down[0]:
            bottom[0].diff.reshape(self.dims)[...] = dy * self._scale(bottom)


@register_layer("Bias")
class BiasLayer(Layer):
    """y = x + b: b a learned parameter (one bottom) or bottom[1], broadcast as in Scale.

    dL/dx = dL/dy;  dL/db = sum over outer and inner of dL/dy (accumulated for the parameter,
    overwritten for bottom[1]).

    prototxt: ``bias_param { axis: 1 num_axes: 1 (-1: to the end) filler (default constant 0) }``.
    Blobs: bottom x, optional bottom b (shape = x.shape[axis : axis + b.ndim]); top y (shape of
    x; in place allowed). Param: [bias (x.shape[axis : axis + num_axes])] with one bottom.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.bias_param
        if len(bottom) == 1 and not self.blobs:
            blob = self.new_blob(_param_shape(self, bottom[0], p.axis, p.num_axes))
            fillers.fill(blob, p.filler)
            self.blobs = [blob]
        self.param_propagate_down = [True] * len(self.blobs)

    def _operand(self, bottom):
        return bottom[1] if len(bottom) > 1 else self.blobs[0]

    def reshape(self, bottom, top):
        self.dims = _broadcast_dims(self, bottom[0], self._operand(bottom),
                                    self.layer_param.bias_param.axis, "bias")
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        b = self._operand(bottom).data.reshape(1, -1, 1)
        top[0].data.reshape(self.dims)[...] = bottom[0].data.reshape(self.dims) + b

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.dims)
        from_param = len(bottom) == 1
        if (self.param_propagate_down[0] if from_param else propagate_down[1]):
            grad = dy.sum(axis=(0, 2))
            if from_param:
                self.blobs[0].diff.reshape(-1)[...] += grad
            else:
                bottom[1].diff.reshape(-1)[...] = grad
        if propagate_down[0] and top[0] is not bottom[0]:
            np.copyto(bottom[0].diff, top[0].diff)
