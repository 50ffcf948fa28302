"""SpatialSoftmax: the softmax over each feature map's pixels of the guided-policy-search Caffe
forks (dementrock/caffe, AliGhadirzadeh/Caffe: src/caffe/layers/spatial_softmax_layer.cu;
``spatial_softmax_param``), whose spatial feature points feed the visuomotor policy nets."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("SpatialSoftmax")
class SpatialSoftmaxLayer(Layer):
    """A softmax over the last two axes (the H x W pixels of each channel), with a temperature:

        y[n, c, p] = exp((x[n, c, p] - max_q x[n, c, q]) / T) / sum_q exp((x[n, c, q] - max) / T)
        dx[n, c, p] = y[n, c, p] (dy[n, c, p] - sum_q dy[n, c, q] y[n, c, q]) / T

    as the forks' Forward_gpu / Backward_gpu compute it (their CPU functions are unimplemented).
    For a single pixel the output is 1 (the forks' GPU reductions skip that case and read a
    buffer they did not write).

    prototxt: ``spatial_softmax_param { temperature: 1.0 engine: DEFAULT }`` (engine chooses
    nothing here: the forks' CAFFE and CUDNN engines compute the same). Bottom (..., H, W), at
    least 2 axes; top the same shape; may run in place.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        t = float(self.layer_param.spatial_softmax_param.temperature)
        if not t > 0:
            raise self.error("spatial_softmax_param.temperature must be positive, got %g" % t)
        self.inv_t = 1.0 / t

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 2:
            raise self.error("the bottom needs at least 2 axes (the pixels are the last two), "
                             "got shape %s" % (tuple(bottom[0].shape),), ShapeError)
        top[0].reshape(bottom[0].shape)

    def _maps(self, a):
        s = a.shape
        return a.reshape(int(np.prod(s[:-2], dtype=np.int64)), s[-2] * s[-1])

    def forward_cpu(self, bottom, top):
        x = self._maps(bottom[0].data)
        e = np.exp((x - x.max(axis=1, keepdims=True)) * self.inv_t)
        y = e / e.sum(axis=1, keepdims=True)
        self._maps(top[0].data)[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        y, dy = self._maps(top[0].data), self._maps(top[0].diff)
        dx = y * (dy - np.sum(dy * y, axis=1, keepdims=True)) * self.inv_t
        self._maps(bottom[0].diff)[...] = dx
