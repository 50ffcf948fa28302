"""TensorTranspose: the axis permutation of the point-cloud Caffe forks (KCNet / FoldingNet's
caffe, 1095560081/caffe and video-caffe: src/caffe/layers/tensor_transpose_layer.cpp;
``tensor_transpose_param { order }``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("TensorTranspose")
class TensorTransposeLayer(Layer):
    """Y = X with its axes permuted: Y.shape[n] = X.shape[order[n]], Y[i_0, ..., i_k] =
    X[j] with j[order[n]] = i_n (``numpy.transpose(X, order)``). Backward writes the top
    gradient permuted back, dX = transpose(dY, argsort(order)), as the fork's Backward_cpu does.

    prototxt: ``tensor_transpose_param { order: ... }``, one entry per axis of the bottom (at
    least 2), a permutation of 0 .. axes - 1. Bottom X; top Y (not in place: the fork refuses
    it).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        if bottom[0] is top[0]:
            raise self.error("TensorTranspose does not work in place (the fork refuses it too)")
        self.order = tuple(int(o) for o in self.layer_param.tensor_transpose_param.order)

    def reshape(self, bottom, top):
        n = bottom[0].num_axes
        if n < 2:
            raise self.error("the bottom needs at least 2 axes, got shape %s"
                             % (tuple(bottom[0].shape),), ShapeError)
        if len(self.order) != n:
            raise self.error("tensor_transpose_param gives %d orders for a bottom of %d axes %s"
                             % (len(self.order), n, tuple(bottom[0].shape)), ShapeError)
        if sorted(self.order) != list(range(n)):
            raise self.error("tensor_transpose_param.order %s is not a permutation of 0..%d"
                             % (list(self.order), n - 1))
        top[0].reshape(tuple(bottom[0].shape[o] for o in self.order))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.transpose(bottom[0].data, self.order)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.transpose(top[0].diff, np.argsort(self.order))
