"""Spatial pyramid pooling (SPP): Pooling's MAX / AVE / STOCHASTIC kernels at several bin counts."""
import numpy as np

from ..errors import ShapeError
from .base import Layer, register_layer
from .pooling import (PoolGeometry, ave_pool, ave_pool_backward, max_pool, max_pool_backward,
                      pool_input_hw, stochastic_pool, stochastic_pool_backward)


@register_layer("SPP")
class SPPLayer(Layer):
    """Spatial pyramid pooling: pool (N, C, H, W) into 1, 2x2, 4x4 ... bins, flatten, concatenate.

    Level l (l = 0 .. pyramid_height - 1) has b = 2^l bins per side: kernel = ceil(H / b),
    pad = (kernel * b - H + 1) // 2, stride = kernel (and the same for W), pooled with Pooling's
    rules. prototxt: ``spp_param { pyramid_height pool: MAX }`` (MAX, AVE or STOCHASTIC).
    Blobs: bottom (N, C, H, W) -> top (N, C * sum_l 4^l); with pyramid_height 1 the top is the
    pooled (N, C, 1, 1), as in Caffe. An input so small that a level needs pad >= kernel is
    rejected (Caffe aborts on it).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.spp_param
        self.height = p.pyramid_height
        if self.height < 1:
            raise self.error("pyramid_height must be at least 1")
        self.method = p.pool

    def reshape(self, bottom, top):
        b = bottom[0]
        hw = pool_input_hw(self, b)
        if min(hw) <= 0:
            raise self.error("input dimensions cannot be zero", ShapeError)
        self.levels = []
        for level in range(self.height):
            bins = 2 ** level
            kernel = tuple(-(-s // bins) for s in hw)
            pad = tuple((k * bins - s + 1) // 2 for k, s in zip(kernel, hw))
            if any(p >= k for p, k in zip(pad, kernel)):
                raise self.error("input %dx%d is too small for pyramid_height %d (level %d needs "
                                 "pad %s >= kernel %s, which Caffe's pooling rejects)"
                                 % (hw + (self.height, level, pad, kernel)), ShapeError)
            self.levels.append(PoolGeometry(hw, kernel, kernel, pad))
        n, c = b.shape[:2]
        if self.height == 1:
            top[0].reshape((n, c) + self.levels[0].out_hw)
        else:
            top[0].reshape((n, sum(c * g.out_hw[0] * g.out_hw[1] for g in self.levels)))

    def forward_cpu(self, bottom, top):
        P = type(self.layer_param.spp_param)
        x = bottom[0].data
        n = x.shape[0]
        out = top[0].data.reshape(n, -1)
        self.args = []
        start = 0
        train = self.phase == self._caffe_pb2.TRAIN
        for g in self.levels:
            arg = None
            if self.method == P.MAX:
                y, arg = max_pool(x, g)
            elif self.method == P.AVE:
                y = ave_pool(x, g)
            else:
                u = self.rng().random(x.shape[:2] + g.out_hw) if train else None
                y, arg = stochastic_pool(x, g, u)
            self.args.append(arg)
            size = y[0].size
            out[:, start:start + size] = y.reshape(n, -1)
            start += size

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        P = type(self.layer_param.spp_param)
        x = bottom[0].data
        n, c = x.shape[:2]
        dyall = top[0].diff.reshape(n, -1)
        dx = np.zeros_like(x)
        start = 0
        for g, arg in zip(self.levels, self.args):
            size = c * g.out_hw[0] * g.out_hw[1]
            dy = dyall[:, start:start + size].reshape((n, c) + g.out_hw)
            start += size
            if self.method == P.MAX:
                dx += max_pool_backward(dy, arg, g)
            elif self.method == P.AVE:
                dx += ave_pool_backward(dy, g)
            else:
                dx += stochastic_pool_backward(dy, x, arg, g)
        bottom[0].diff[...] = dx
