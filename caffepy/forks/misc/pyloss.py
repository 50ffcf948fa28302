"""BVLC Caffe's example Python layer ``pyloss.EuclideanLossLayer`` (``examples/pycaffe/layers``),
used by ``examples/pycaffe/linreg.prototxt``.

Bottoms: two blobs of equal count; top: ``loss = sum((x0 - x1)^2) / (2 N)`` (N = the batch).
Backward: ``d x0 = (x0 - x1) / N``, ``d x1 = -(x0 - x1) / N``.
"""
import numpy as np

from ...layers.python_layer import Layer


class EuclideanLossLayer(Layer):
    """See module doc."""

    def setup(self, bottom, top):
        if len(bottom) != 2:
            raise ValueError("EuclideanLossLayer needs two bottoms, got %d" % len(bottom))

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise ValueError("EuclideanLossLayer: bottoms have %d and %d elements"
                             % (bottom[0].count, bottom[1].count))
        top[0].reshape(1)

    def forward(self, bottom, top):
        self.diff = bottom[0].data - bottom[1].data.reshape(bottom[0].data.shape)
        top[0].data[...] = np.sum(self.diff ** 2) / bottom[0].data.shape[0] / 2.0

    def backward(self, top, propagate_down, bottom):
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                g = sign * top[0].diff.ravel()[0] * self.diff / bottom[i].data.shape[0]
                bottom[i].diff[...] = g.reshape(bottom[i].diff.shape)
