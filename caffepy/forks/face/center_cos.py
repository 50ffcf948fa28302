"""banxia1994/Mycaffe's ``CenterCosLoss``: a centre loss on the cosine between a feature and its
class centre."""
import numpy as np

from ...layers.base import register_layer
from .losses import CentresLoss, _labels


@register_layer("CenterCosLoss")
class CenterCosLossLayer(CentresLoss):
    """src/caffe/layers/center_cos_loss_layer.cpp of banxia1994/Mycaffe, its CPU code:

        L = -sum_i cos(x_i, c_{y_i})                       (a sum over the batch, not a mean)
        dL/dx_i = dL/dL_top / M * (cos_i / |x_i|^2 x_i - c_{y_i} / (|x_i| |c_{y_i}|))
        dc_j += 1 / (1 + n_j) * sum_{i: y_i = j} (x_i / (|x_i| |c_j|)
                                                 - (x_i . c_j) c_j / (|x_i| |c_j|^3))

    with M the batch and n_j the items of class j. So the feature gradient is dL/dx divided by M
    (the loss is not), and the centre "gradient" is d cos / dc = -dL/dc averaged the centre-loss
    way and blind to the loss weight: the solver's step moves each centre away from its
    features, as the fork does. (The fork's CUDA file differs -- |cos| summed, the centre sums
    carried across items, a host pointer handed to a kernel -- and is not followed.)

    prototxt: ``center_cos_loss_param { num_output center_cos_filler axis: 1 }`` (the fork's
    caffe.proto does not declare the message; the layer reads these three). Bottoms: x (M, K...)
    flattened from ``axis``, label (M). Top: the loss (). Param: centres (num_output, K).
    """

    param_field, filler_field = "center_cos_loss_param", "center_cos_filler"

    def _terms(self, bottom):
        c = self.blobs[0].data
        y = _labels(self, bottom[1], self.m, c.shape[0])
        x = bottom[0].data.reshape(self.m, self.k)
        cy = c[y]
        nx = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
        nc = np.sqrt(np.einsum("ij,ij->i", cy, cy))[:, None]
        dot = np.einsum("ij,ij->i", x, cy)[:, None]
        return x, y, cy, nx, nc, dot

    def forward_cpu(self, bottom, top):
        x, y, cy, nx, nc, dot = self._terms(bottom)
        top[0].data[...] = -np.sum(dot / (nx * nc))

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels (bottom 1)")
        x, y, cy, nx, nc, dot = self._terms(bottom)
        if self.param_propagate_down[0]:
            n = self.blobs[0].shape[0]
            dcos_dc = x / (nx * nc) - dot * cy / (nx * nc ** 3)
            total = np.zeros((n, self.k), dtype=np.float64)
            np.add.at(total, y, dcos_dc)
            count = np.bincount(y, minlength=n)
            self.blobs[0].diff[...] += total / (1.0 + count)[:, None]
        if propagate_down[0]:
            g = dot / (nx ** 3 * nc) * x - cy / (nx * nc)
            scale = float(top[0].diff.reshape(())) / self.m
            bottom[0].diff.reshape(self.m, self.k)[...] = g * scale
