"""happynear's InnerProduct that takes its weight matrix from a second bottom."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_variant


@register_variant("InnerProduct", lambda lp: len(lp.bottom) == 2)
class BottomWeightInnerProductLayer(Layer):
    """InnerProduct with ``bottom: x bottom: W`` (NormFace's lenet_NCA_nonorm, whose W is a
    ``Parameter`` layer's top): y = x W^T (x W with ``transpose``), no parameter blobs.

    Followed: happynear's caffe-windows line, src/caffe/layers/inner_product_layer.cpp of its
    later form (with ``normalize_``; the copy in the code index that has ``N_ =
    bottom[1]->num()``; the stored happynear/caffe-windows commit 29886c6 predates it):
    N = bottom[1].shape[0] (``num_output`` is not read), K = the count of x from ``axis``;
    forward gemm(x, W); backward dW = dy^T x (x^T dy when transposed), written over W's diff
    when propagate_down[1], and dx = dy W (dy W^T) when propagate_down[0].
    With two bottoms and ``bias_term: true`` the fork reads a bias blob it never creates (it
    makes blob 0 and uses blob 1), so caffepy refuses it: set ``bias_term: false``.
    ``normalize`` applies to the one-bottom form only. Shapes: x (*B, *F) with K = prod(F);
    W with N K values ((N, K), or (K, N) read from its N-first shape when ``transpose``);
    top (*B, N).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.inner_product_param
        if p.bias_term:
            raise self.error("a weight bottom with bias_term: true reads a bias the fork never "
                             "makes; set inner_product_param { bias_term: false }")
        self.transpose = p.transpose

    def reshape(self, bottom, top):
        axis = bottom[0].canonical_axis_index(self.layer_param.inner_product_param.axis)
        self.m, self.k = bottom[0].count_range(0, axis), bottom[0].count_range(axis)
        if bottom[1].num_axes < 1:
            raise self.error("bottom[1] (weights) must have a first axis N", ShapeError)
        self.n = bottom[1].shape[0]
        if bottom[1].count != self.n * self.k:
            raise self.error("bottom[1] (weights) %s must hold N x K = %d x %d values (K from "
                             "bottom[0] %s)" % (bottom[1].shape, self.n, self.k, bottom[0].shape),
                             ShapeError)
        top[0].reshape(bottom[0].shape[:axis] + (self.n,))

    def _w(self, blob):
        return blob.reshape(self.k, self.n) if self.transpose else blob.reshape(self.n, self.k)

    def forward_cpu(self, bottom, top):
        x, w = bottom[0].data.reshape(self.m, self.k), self._w(bottom[1].data)
        top[0].data[...] = (x @ (w if self.transpose else w.T)).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.m, self.n)
        x, w = bottom[0].data.reshape(self.m, self.k), self._w(bottom[1].data)
        if propagate_down[1]:
            self._w(bottom[1].diff)[...] = x.T @ dy if self.transpose else dy.T @ x
        if propagate_down[0]:
            bottom[0].diff[...] = (dy @ (w.T if self.transpose else w)).reshape(bottom[0].shape)
