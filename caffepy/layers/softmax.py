"""Softmax over one axis, and the numerically stable helpers the softmax-based losses share."""
import numpy as np

from ..math import kernels
from .base import Layer, register_layer


def softmax(x, axis):
    """exp(x - max) / sum(exp(x - max)) along ``axis`` (computed in x's dtype)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def as_outer_channel_inner(shape, axis):
    """The 3-d view (outer, channels, inner) of ``shape`` around ``axis`` (Caffe's count(0, axis) ...)."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def prediction_label_view(layer, bottom, axis):
    """(axis, outer, channels, inner) of the predictions ``bottom[0]`` around ``axis`` (canonical),
    checking that ``bottom[1]`` holds one label per outer x inner position (ShapeError otherwise)."""
    axis = bottom[0].canonical_axis_index(axis)
    outer, channels, inner = as_outer_channel_inner(bottom[0].shape, axis)
    if outer * inner != bottom[1].count:
        shape = tuple(bottom[0].shape)
        label = shape[:axis] + ((1,) + shape[axis + 1:] if inner > 1 else ())
        raise layer.needs("number of labels must match number of predictions: prediction shape "
                          "%s with axis %d needs %d labels, got %d (label shape %s)"
                          % (bottom[0].shape, axis, outer * inner, bottom[1].count,
                             bottom[1].shape), [(1, label, None)])
    return axis, outer, channels, inner


@register_layer("Softmax")
class SoftmaxLayer(Layer):
    """Softmax along ``axis``: y_k = exp(x_k) / sum_j exp(x_j), computed as exp(x_k - max_j x_j) / ...

    dL/dx_k = y_k * (dL/dy_k - sum_j dL/dy_j * y_j)

    prototxt: ``softmax_param { axis: 1 }`` (negative counts from the end; engine ignored).
    Blobs: bottom x of any shape; top y of the same shape (in place allowed).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        self.axis = bottom[0].canonical_axis_index(self.layer_param.softmax_param.axis)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def _view(self, arr):
        return arr.reshape(as_outer_channel_inner(arr.shape, self.axis))

    def forward_cpu(self, bottom, top):
        x, y = self._view(bottom[0].data), self._view(top[0].data)
        k = kernels.get()
        if k is not None and x.flags.c_contiguous and y.flags.c_contiguous:
            k.softmax(x, y)
        else:
            y[...] = softmax(x, axis=1)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        y = self._view(top[0].data)
        dy = self._view(top[0].diff)
        dot = np.sum(dy * y, axis=1, keepdims=True)
        self._view(bottom[0].diff)[...] = (dy - dot) * y
