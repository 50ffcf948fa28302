"""InnerProduct (fully connected) layer."""
import numpy as np

from ..errors import ShapeError
from ..math import cpu
from .base import Layer, register_layer


@register_layer("InnerProduct")
class InnerProductLayer(Layer):
    """Fully connected: y = x W^T + b (x W + b with ``transpose``).

    The bottom is viewed as a matrix (M, K): M = product of the axes before ``axis``, K = product
    of the axes from ``axis`` on. Backward: dW += dy^T x (x^T dy when transposed), db += sum_rows dy,
    dx = dy W (dy W^T when transposed).

    prototxt: ``inner_product_param { num_output (required) bias_term: true
    weight_filler {constant 0} bias_filler {constant 0} axis: 1 transpose: false }``.
    Blobs: bottom (*B, *F) -> top (*B, num_output) with B = axes before ``axis``, K = prod(F).
    Weight (num_output, K), or (K, num_output) when ``transpose``; bias (num_output,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    fused_relu = None     # a ReLU's negative slope fused into the forward by caffepy.infer.plan

    ip_param_field = "inner_product_param"  # a fork's variant reads its own message (same fields)

    def layer_setup(self, bottom, top):
        p = getattr(self.layer_param, self.ip_param_field)
        self.num_output = p.num_output
        if self.num_output <= 0:
            raise self.error("num_output must be positive")
        self.bias_term = p.bias_term
        self.transpose = p.transpose
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.k = bottom[0].count_range(self.axis)
        wshape = (self.k, self.num_output) if self.transpose else (self.num_output, self.k)
        shapes = [wshape] + ([(self.num_output,)] if self.bias_term else [])
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        axis = bottom[0].canonical_axis_index(getattr(self.layer_param, self.ip_param_field).axis)
        k = bottom[0].count_range(axis)
        if k != self.k:
            raise self.error("input size incompatible with inner product parameters: %d inputs "
                             "per row (shape %s), expected %d" % (k, bottom[0].shape, self.k),
                             ShapeError)
        self.m = bottom[0].count_range(0, axis)
        top[0].reshape(bottom[0].shape[:axis] + (self.num_output,))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.m, self.k)
        w = self.blobs[0].data
        y = top[0].data.reshape(self.m, self.num_output)
        np.matmul(x, w if self.transpose else w.T, out=y)
        if self.bias_term:
            y += self.blobs[1].data
        cpu.relu_inplace(y, self.fused_relu)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.m, self.num_output)
        x = bottom[0].data.reshape(self.m, self.k)
        w = self.blobs[0]
        if self.param_propagate_down[0]:
            # summed straight into the diff (no temporary of the weight's size)
            cpu.gemm_accumulate(*((x.T, dy) if self.transpose else (dy.T, x)), w.diff)
        if self.bias_term and self.param_propagate_down[1]:
            self.blobs[1].diff += dy.sum(axis=0)
        if propagate_down[0]:
            np.matmul(dy, w.data.T if self.transpose else w.data,
                      out=bottom[0].diff.reshape(self.m, self.k))
