"""Small layers of 2014 Caffe forks from before type strings (their V1 enum values map here through
:mod:`caffepy.proto.v1_fork_types`): ArthurWang123/caffe's ``InvertGradient`` (INVERT_GRADIENT) and
``LabelToOnehot`` (LABEL_TO_ONEHOT), YutingZhang/fgs-obj's ``NaN2Zero`` (NAN2ZERO)."""
import math

import numpy as np

from ...layers.base import Layer, NeuronLayer, register_layer


@register_layer("InvertGradient")
class InvertGradientLayer(NeuronLayer):
    """y = x; dL/dx = -c dL/dy (a gradient-reversal layer). c starts at ``initial_coeff``; after
    the i-th backward it is initial + (final - initial) (2 / (1 + exp(-gamma i)) - 1)
    (``coeff_schedule_param { gamma initial_coeff final_coeff }``, defaults 1)."""

    def layer_setup(self, bottom, top):
        p = self.layer_param.coeff_schedule_param
        self.gamma, self.initial, self.final = p.gamma, p.initial_coeff, p.final_coeff
        self.iter, self.coeff = 0, p.initial_coeff

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = -self.coeff * top[0].diff
        self.iter += 1
        self.coeff = self.initial + (self.final - self.initial) * (
            2.0 / (1.0 + math.exp(-self.gamma * self.iter)) - 1.0)


@register_layer("LabelToOnehot")
class LabelToOnehotLayer(Layer):
    """Labels (one per item, N x ...) to one-hot rows N x K x 1 x 1, K =
    ``inner_product_param { num_output }``; a label outside [0, K) is an error. No backward."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        self.k = int(self.layer_param.inner_product_param.num_output)
        if self.k < 1:
            raise self.error("inner_product_param.num_output must be positive")
        top[0].reshape((bottom[0].shape[0], self.k, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        labels = bottom[0].data.reshape(n, -1)[:, 0].astype(np.int64)
        bad = (labels < 0) | (labels >= self.k)
        if bad.any():
            raise self.error("label %d outside [0, %d]" % (labels[bad][0], self.k - 1))
        top[0].data[...] = 0
        top[0].data.reshape(n, self.k)[np.arange(n), labels] = 1

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("NaN2Zero")
class NaN2ZeroLayer(NeuronLayer):
    """y = x with NaN set to 0; dL/dx = dL/dy where neither it nor x is NaN, else 0. (The fork's
    forward reads its top, so it works in place, as its nets use it.)"""

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = np.where(np.isnan(x), 0, x)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff
            ok = ~np.isnan(dy) & ~np.isnan(bottom[0].data)
            bottom[0].diff[...] = np.where(ok, dy, 0)
