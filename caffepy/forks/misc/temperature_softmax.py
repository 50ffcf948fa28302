"""dementrock/caffe's Softmax with a temperature (branch pose, src/caffe/layers/softmax_layer.cpp;
``softmax_param { temperature }``, its number is BVLC's axis there)."""
import numpy as np

from ...layers.base import register_variant
from ...layers.softmax import SoftmaxLayer, softmax


@register_variant("Softmax", lambda lp: lp.softmax_param.HasField("temperature"))
class TemperatureSoftmaxLayer(SoftmaxLayer):
    """Softmax of x / T along ``axis`` (T = ``temperature``; the fork's "channel" dimension):

        y_k = exp((x_k - max_j x_j) / T) / sum_j exp((x_j - max_j x_j) / T)
        dL/dx_k = y_k (dL/dy_k - sum_j dL/dy_j y_j) / T

    prototxt: ``softmax_param { temperature: 1 axis: 1 }`` (the fork has no axis field: its
    softmax runs over the channels; a non-positive T is refused). Blobs as Softmax.
    """

    def layer_setup(self, bottom, top):
        self.temperature = float(self.layer_param.softmax_param.temperature)
        if not self.temperature > 0:
            raise self.error("softmax_param.temperature must be positive, got %g"
                             % self.temperature)

    def forward_cpu(self, bottom, top):
        x = self._view(bottom[0].data).astype(np.float64)
        self._view(top[0].data)[...] = softmax(x / self.temperature, axis=1)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        y, dy = self._view(top[0].data), self._view(top[0].diff)
        dot = np.sum(dy * y, axis=1, keepdims=True)
        self._view(bottom[0].diff)[...] = (dy - dot) * y / self.temperature
