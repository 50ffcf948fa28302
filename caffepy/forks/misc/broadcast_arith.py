"""Add and Sub of the inference forks Cambricon/caffe and synopsys-caffe: element-wise with
numpy's broadcasting, forward only."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


def _broadcast_shape(layer, a, b):
    """numpy's broadcast shape of ``a`` and ``b``; two bottoms of one count whose shapes do not
    broadcast give ``a`` (Cambricon's Add / Sub add the counts element by element)."""
    try:
        return tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape))), True
    except ValueError:
        if a.count == b.count:
            return tuple(a.shape), False
        raise layer.needs("the bottoms %s and %s neither broadcast (each axis, counted from "
                          "the last, equal or 1) nor have one count" % (a.shape, b.shape),
                          [(1, a.shape, 0)]) from None


class _BroadcastBinary(Layer):
    exact_num_top_blobs = 1
    sign = 1.0

    def _operands(self, bottom):
        return bottom[0], bottom[1]

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("in-place computation is not allowed")
        a, b = self._operands(bottom)
        shape, self.broadcast = _broadcast_shape(self, a, b)
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        a, b = self._operands(bottom)
        bd = b.data if self.broadcast else b.data.reshape(a.shape)
        top[0].data[...] = a.data + self.sign * bd


@register_layer("Add")
class AddLayer(_BroadcastBinary):
    """y = a + b with numpy broadcasting (synopsys-caffe, src/caffe/layers/add_layer.cpp: shapes
    aligned from the last axis, each pair equal or 1, a 0-axis blob a scalar; Cambricon/caffe's
    add_layer.cpp: two blobs of one shape). Two bottoms of one count whose shapes do not
    broadcast are added element by element into a's shape (Cambricon's form). No prototxt
    fields. No backward (NOT_IMPLEMENTED in both forks). Not in place.
    """
    exact_num_bottom_blobs = 2


@register_layer("Sub")
class SubLayer(_BroadcastBinary):
    """y = a - b with numpy broadcasting (synopsys-caffe, src/caffe/layers/sub_layer.cpp;
    Cambricon/caffe's sub_layer.cpp: two blobs of one shape). Shapes as ``Add``. With one bottom
    (synopsys-caffe) b is the layer's parameter blob, which must come with the layer (the fork
    has no filler for it, and reads it when the net is set up). No prototxt fields. No
    backward (NOT_IMPLEMENTED in synopsys-caffe; Cambricon's is empty). Not in place.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    sign = -1.0

    def layer_setup(self, bottom, top):
        if len(bottom) == 1 and len(self.blobs) != 1:
            raise self.error("with one bottom, Sub subtracts its parameter blob, which must be "
                             "given with the layer (blobs), got %d blobs" % len(self.blobs),
                             ShapeError)
        self.param_propagate_down = [False] * len(self.blobs)

    def _operands(self, bottom):
        return bottom[0], bottom[1] if len(bottom) == 2 else self.blobs[0]
