"""Element-wise neuron layers: y = f(x), one bottom, one top of the same shape (in-place allowed)."""
import numpy as np

from .base import NeuronLayer, register_layer


@register_layer("ReLU")
class ReLULayer(NeuronLayer):
    """Rectified linear unit, leaky when ``negative_slope`` != 0.

    y = max(0, x) + negative_slope * min(0, x);  dL/dx = dL/dy * (1 if x > 0 else negative_slope)

    prototxt: ``relu_param { negative_slope: 0 }`` (engine ignored).
    """

    def layer_setup(self, bottom, top):
        self.negative_slope = self.layer_param.relu_param.negative_slope

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.negative_slope:
            np.copyto(top[0].data, np.where(x > 0, x, x * self.negative_slope))
        else:
            np.maximum(x, 0, out=top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        # In place, bottom data already holds y; sign(y) == sign(x) for slope >= 0.
        x = bottom[0].data
        dy = top[0].diff
        if self.negative_slope:
            np.copyto(bottom[0].diff, np.where(x > 0, dy, dy * self.negative_slope))
        else:
            np.multiply(dy, x > 0, out=bottom[0].diff)
