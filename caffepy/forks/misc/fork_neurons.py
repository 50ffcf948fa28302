"""Small element-wise and sink layers of single forks, each the layer behind one of that fork's
V1 types: CReLU (Cambricon/caffe, V1 CRELU), Trunc and Quant_Trun (Ante-Su/RXGNet, V1 TRUNC and
QUANT_TRUN), BlackHole (BobLiu20/caffe, V1 BLACKHOLE), GetDataDim (ArcherFMY/caffe-sal-ensemble,
V1 GETDATADIM), GatingInnerProduct (mees/deep_adaptive_fusion, V1 GATING_INNER_PRODUCT).
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, NeuronLayer, register_layer


@register_layer("CReLU")
class CReLULayer(Layer):
    """Concatenated ReLU (Cambricon/caffe, src/caffe/layers/crelu_layer.cpp): along
    ``concat_axis`` the top holds, for each outer index, f(x) then f(-x), with
    f(v) = max(v, 0) + negative_slope min(v, 0):

        top[i, 0:K] = f(x[i]);  top[i, K:2K] = f(-x[i])   (i over the axes before concat_axis,
                                                          K = x's size from concat_axis on)
        dL/dx = f'(x) dL/dtop[:K] - f'(-x) dL/dtop[K:]

    The fork runs forward only (an inference fork); the backward is the derivative.
    prototxt: ``crelu_param { negative_slope: 0 concat_axis: 1 }`` (engine ignored). Not in
    place. Top: bottom's shape with concat_axis doubled.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("CReLU does not run in place")
        p = self.layer_param.crelu_param
        self.slope = p.negative_slope
        n = bottom[0].num_axes
        if not -n <= p.concat_axis < n:
            raise self.error("concat_axis %d out of range for %d axes" % (p.concat_axis, n))
        self.axis = p.concat_axis % n

    def reshape(self, bottom, top):
        shape = list(bottom[0].shape)
        shape[self.axis] *= 2
        top[0].reshape(tuple(shape))

    def _f(self, v):
        return np.maximum(v, 0) + self.slope * np.minimum(v, 0)

    def _df(self, v):
        return np.where(v > 0, 1.0, self.slope)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        outer = int(np.prod(x.shape[:self.axis]))
        xv = x.reshape(outer, 1, -1)
        top[0].data[...] = np.concatenate([self._f(xv), self._f(-xv)], 1).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x = bottom[0].data
            xv = x.reshape(int(np.prod(x.shape[:self.axis])), -1)
            dy = top[0].diff.reshape(xv.shape[0], 2, -1)
            dx = self._df(xv) * dy[:, 0] - self._df(-xv) * dy[:, 1]
            bottom[0].diff[...] = dx.reshape(x.shape)


@register_layer("Trunc")
class TruncLayer(NeuronLayer):
    """Clip to [-scale, scale] (Ante-Su/RXGNet, src/caffe/layers/trunc_layer.cpp):

        y = min(max(x, -scale), scale);  dL/dx = dL/dy where -scale < x < scale, else 0

    prototxt: ``trunc_param { scale: 3 }``.
    """

    def layer_setup(self, bottom, top):
        self.scale = self.layer_param.trunc_param.scale

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self._inside = (x > -self.scale) & (x < self.scale)
        top[0].data[...] = np.clip(x, -self.scale, self.scale)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self._inside


@register_layer("Quant_Trun")
class QuantTrunLayer(NeuronLayer):
    """Quantise and clip (Ante-Su/RXGNet, src/caffe/layers/quant_trun_layer.cpp):

        y = min(int(x / quant), 4) for x > 0;  max(int(x / quant), -4) otherwise

    (int truncates toward 0). The fork's backward does nothing; caffepy's writes a zero
    gradient. prototxt: ``quant_trun_param { quant: 1 }``.
    """

    def forward_cpu(self, bottom, top):
        q = np.trunc(bottom[0].data / self.layer_param.quant_trun_param.quant)
        top[0].data[...] = np.clip(q, -4, 4)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0


@register_layer("BlackHole")
class BlackHoleLayer(Layer):
    """A sink (BobLiu20/caffe, include/caffe/layers/blackhole_layer.hpp): one bottom, no top;
    forward and backward do nothing (unlike Silence, the bottom's diff is not zeroed)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 0

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        pass



@register_layer("GetDataDim")
class GetDataDimLayer(Layer):
    """The bottom's spatial size per sample (ArcherFMY/caffe-sal-ensemble,
    caffe/src/caffe/layers/get_data_dim_layer.cpp): top (N x 1 x 1 x 2) holds (H, W) for every
    sample. No backward (the fork's does nothing; no gradient is written)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W")
        top[0].reshape((bottom[0].shape[0], 1, 1, 2))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.array(bottom[0].shape[2:], dtype=top[0].data.dtype)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("GatingInnerProduct")
class GatingInnerProductLayer(Layer):
    """Mixture of expert predictions by per-sample gates (mees/deep_adaptive_fusion,
    caffe-fast-rcnn/src/caffe/layers/gating_inner_product_layer.cpp). Bottoms: the experts'
    outputs E (M x K N: K experts, N = ``num_output`` classes, expert-major), the gates G
    (M x K), and two label blobs that must agree (the experts' data layers' labels):

        top[m, n] = sum_k G[m, k] E[m, k, n];   dL/dG[m, k] = sum_n dL/dtop[m, n] E[m, k, n]

    The experts get no gradient (as in the fork). The fork declares an N x K weight and an N
    bias (inner_product_param's fillers) that nothing reads; caffepy declares them too so weight
    files line up. (The fork also appends gate values to /tmp/gating_probout_*.txt; caffepy
    does not.) prototxt: ``inner_product_param { num_output bias_term weight_filler bias_filler
    axis: 1 }``. Top: M x N.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.inner_product_param
        self.n = int(p.num_output)
        self.axis = p.axis % bottom[1].num_axes
        self.k = bottom[1].count_range(self.axis)
        if not self.blobs:
            self.blobs = [self.new_blob((self.n, self.k))]
            get_filler(p.weight_filler).fill(self.blobs[0])
            if p.bias_term:
                self.blobs.append(self.new_blob((self.n,)))
                get_filler(p.bias_filler).fill(self.blobs[1])
        self.param_propagate_down = [False] * len(self.blobs)

    def reshape(self, bottom, top):
        m = bottom[1].count // self.k
        if bottom[1].count_range(self.axis) != self.k or bottom[0].count != m * self.k * self.n \
                or bottom[2].count != bottom[3].count:
            raise self.error("experts must hold M x K x num_output values for M x K gates, "
                             "got %s and %s" % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(tuple(bottom[0].shape[:self.axis]) + (self.n,))

    def forward_cpu(self, bottom, top):
        if np.any(np.trunc(bottom[2].data) != np.trunc(bottom[3].data)):
            raise self.error("the experts' labels disagree")
        m = bottom[1].count // self.k
        e = bottom[0].data.reshape(m, self.k, self.n)
        g = bottom[1].data.reshape(m, self.k)
        top[0].data[...] = np.einsum("mk,mkn->mn", g, e).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        m = bottom[1].count // self.k
        if propagate_down[1]:
            e = bottom[0].data.reshape(m, self.k, self.n)
            dy = top[0].diff.reshape(m, self.n)
            bottom[1].diff[...] = np.einsum("mn,mkn->mk", dy, e).reshape(bottom[1].shape)
        if propagate_down[0]:
            bottom[0].diff[...] = 0
