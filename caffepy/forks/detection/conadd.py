"""Conadd, the zero-padding sum of busyboxs/roi_roi and dengshuo/D-M-F-ConvNets (their V1 type
CONADD)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("Conadd")
class ConaddLayer(Layer):
    """Sum of the bottoms, each zero-padded to the first bottom's shape in flat (row-major)
    order (busyboxs/roi_roi, caffe/src/caffe/layers/conadd_layer.cpp):

        top = sum_i pad(b_i),  pad(b)[k] = b.flat[k] for k < count(b), else 0
        dL/db_i = the first count(b_i) values of dL/dtop, in b_i's shape

    The fork reshapes a smaller bottom to the first one's shape in place (its memory beyond the
    old count reads as zeros) and gives every bottom the top's diff; caffepy leaves the bottoms'
    shapes alone. (The fork's forward adds onto the top's previous contents; caffepy writes the
    sum.) No parameters (``conadd_param`` is empty). Bottoms: one or more, none larger than the
    first. Top: the first bottom's shape.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        first = bottom[0]
        for i, b in enumerate(bottom[1:], 1):
            if b.num_axes != first.num_axes:
                raise self.error("bottom[%d] has %d axes, bottom[0] %d"
                                 % (i, b.num_axes, first.num_axes), ShapeError)
            if b.count > first.count:
                raise self.error("bottom[%d] %s is larger than bottom[0] %s"
                                 % (i, b.shape, first.shape), ShapeError)
        top[0].reshape(first.shape)

    def forward_cpu(self, bottom, top):
        out = np.zeros(top[0].count, dtype=top[0].data.dtype)
        for b in bottom:
            out[:b.count] += b.data.reshape(-1)
        top[0].data[...] = out.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(-1)
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = dy[:b.count].reshape(b.shape)
