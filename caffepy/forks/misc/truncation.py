"""happynear/caffe-windows' ``Truncation`` and ``SoftTruncation`` (src/caffe/layers/
truncation_layer.cpp/.cu, soft_truncation_layer.cpp/.cu; also in its copies
Aliang-SEU/MTCNN-on-caffe-window and Centerus/caffe-windows).
"""
import numpy as np

from ...layers.base import NeuronLayer, register_layer


@register_layer("Truncation")
class TruncationLayer(NeuronLayer):
    """y = min(max(x, lower_bound), upper_bound); dL/dx = dL/dy where lower_bound < x <
    upper_bound, else 0 (x read from the bottom after the forward, so in place the clamped
    value: at a bound, 0 either way).

    prototxt: ``truncation_param { lower_bound: 0 upper_bound: 5 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.truncation_param
        self.lower, self.upper = p.lower_bound, p.upper_bound

    def forward_cpu(self, bottom, top):
        dt = self.dtype.type
        lo, hi = dt(self.lower), dt(self.upper)
        x = bottom[0].data
        m = np.where(x < lo, lo, x)                         # std::max(x, lower_bound)
        top[0].data[...] = np.where(hi < m, hi, m)          # std::min(.., upper_bound)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x, dt = bottom[0].data, self.dtype.type
            inside = (x > dt(self.lower)) & (x < dt(self.upper))
            bottom[0].diff[...] = np.where(inside, top[0].diff, 0)


@register_layer("SoftTruncation")
class SoftTruncationLayer(NeuronLayer):
    """y = 1 - exp(-x / c); dL/dx = dL/dy (1 - y) / c.

    prototxt: ``soft_truncation_param { c: 2 }``; c = 0 is refused (the fork divides by it).
    """

    def layer_setup(self, bottom, top):
        self.c = self.layer_param.soft_truncation_param.c
        if self.c == 0:
            raise self.error("soft_truncation_param.c must be nonzero")

    def forward_cpu(self, bottom, top):
        c = self.dtype.type(self.c)
        top[0].data[...] = 1 - np.exp(bottom[0].data / -c)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            c = self.dtype.type(self.c)
            bottom[0].diff[...] = top[0].diff * (1 - top[0].data) / c
