"""Layers of hyojinie/crn (Kim et al., "Learned Contextual Feature Reweighting for Image
Geo-Localization"), its V1 types NETVLAD, INTRANORM and SPFILTER: Netvlad, Intranorm, Spfilter.
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, NeuronLayer, register_layer


@register_layer("Netvlad")
class NetvladLayer(Layer):
    """NetVLAD aggregation (hyojinie/crn, caffe/src/caffe/layers/netvlad_layer.cpp). With soft
    assignments a (N x K x H x W, bottom 0), local features x (N x D x H x W, bottom 1) and the
    learned centres c (K x D):

        V[n, k, :] = sum_p a[n, k, p] (x[n, :, p] + c_k)      (the fork adds the centre)
        dL/da[n, k, p] = sum_d (x[n, d, p] + c_k[d]) g[n, k, d];  dL/dx[n, :, p] = sum_k a g_k
        dL/dc_k += sum_n (sum_p a[n, k, p]) g[n, k, :]

    prototxt: ``netvlad_param { cluster_num: K local_dim: D vlad_dim: K D weight_filler }``.
    Top: N x (K D), cluster-major.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.netvlad_param
        self.k, self.d = int(p.cluster_num), int(p.local_dim)
        if p.vlad_dim != self.k * self.d:
            raise self.error("netvlad_param: vlad_dim %d must be cluster_num x local_dim = %d"
                             % (p.vlad_dim, self.k * self.d))
        if not self.blobs:
            self.blobs = [self.new_blob((self.k, self.d))]
            get_filler(p.weight_filler).fill(self.blobs[0])
        elif self.blobs[0].count != self.k * self.d:
            raise self.error("centre blob holds %d values, expected %d"
                             % (self.blobs[0].count, self.k * self.d))
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        a, x = bottom
        if a.num_axes != 4 or x.num_axes != 4 or a.shape[1] != self.k or x.shape[1] != self.d \
                or a.shape[0] != x.shape[0] or a.shape[2:] != x.shape[2:]:
            raise self.error("bottoms must be N x %d x H x W and N x %d x H x W, got %s and %s"
                             % (self.k, self.d, a.shape, x.shape), ShapeError)
        top[0].reshape((x.shape[0], self.k * self.d))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, self.k, -1)
        x = bottom[1].data.reshape(n, self.d, -1)
        c = self.blobs[0].data
        v = np.einsum("nkp,ndp->nkd", a, x) + a.sum(2)[:, :, None] * c[None]
        top[0].data[...] = v.reshape(n, -1)

    def backward_cpu(self, top, propagate_down, bottom):
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, self.k, -1)
        x = bottom[1].data.reshape(n, self.d, -1)
        c = self.blobs[0].data
        g = top[0].diff.reshape(n, self.k, self.d)
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += np.einsum("nk,nkd->kd", a.sum(2), g)
        if propagate_down[0]:
            da = np.einsum("ndp,nkd->nkp", x, g) + np.einsum("kd,nkd->nk", c, g)[:, :, None]
            bottom[0].diff[...] = da.reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = np.einsum("nkd,nkp->ndp", g, a).reshape(bottom[1].shape)


@register_layer("Intranorm")
class IntranormLayer(NeuronLayer):
    """Intra-normalisation (hyojinie/crn, intranorm_layer.cpp): each sample's values, split into
    ``cluster_num`` consecutive blocks, are L2-normalised block by block:

        y = x / sqrt(sum_block x^2 + 1e-12);  dL/dx = (dL/dy - y <y, dL/dy>) / sqrt(sum x^2 + 1e-12)

    prototxt: ``intranorm_param { cluster_num: 1 }``. Not in place.
    """

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("Intranorm does not run in place")
        k = self.layer_param.intranorm_param.cluster_num
        if k < 1 or bottom[0].count_range(1) % k:
            raise self.error("cluster_num %d must divide the %d values per sample"
                             % (k, bottom[0].count_range(1)), ShapeError)
        super().reshape(bottom, top)

    def _blocks(self, a):
        return a.reshape(a.shape[0], self.layer_param.intranorm_param.cluster_num, -1)

    def forward_cpu(self, bottom, top):
        x = self._blocks(bottom[0].data)
        top[0].data[...] = (x / np.sqrt((x * x).sum(2, keepdims=True) + 1e-12)).reshape(
            top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x, y, dy = (self._blocks(b) for b in (bottom[0].data, top[0].data, top[0].diff))
            r = np.sqrt((x * x).sum(2, keepdims=True) + 1e-12)
            dx = (dy - y * (y * dy).sum(2, keepdims=True)) / r
            bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("Spfilter")
class SpfilterLayer(Layer):
    """Spatial reweighting (hyojinie/crn, spfilter_layer.cpp): the last bottom, a map of
    N x (H W) weights, multiplies every channel of each other bottom (N x C x H x W):

        top_t = w * bottom_t;  dL/dbottom_t = w dL/dtop_t;  dL/dw = sum_t sum_c bottom_t dL/dtop_t

    Tops: one per bottom but the last, each its bottom's shape. No parameters.
    """
    min_bottom_blobs = 2
    exact_num_top_blobs = None

    def reshape(self, bottom, top):
        if len(top) != len(bottom) - 1:
            raise self.error("needs one top per bottom but the last (the weights)")
        w = bottom[-1]
        for i, b in enumerate(bottom[:-1]):
            if b.num_axes != 4 or b.shape[0] != w.shape[0] or b.count_range(2) != \
                    w.count // w.shape[0]:
                raise self.error("bottom[%d] %s does not match the weights %s"
                                 % (i, b.shape, w.shape), ShapeError)
        for t, b in zip(top, bottom):
            t.reshape(b.shape)

    def _w(self, bottom):
        w = bottom[-1]
        return w.data.reshape(w.shape[0], 1, -1)

    def forward_cpu(self, bottom, top):
        w = self._w(bottom)
        for t, b in zip(top, bottom):
            t.data[...] = (b.data.reshape(b.shape[0], b.shape[1], -1) * w).reshape(b.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        w = self._w(bottom)
        dw = np.zeros_like(w[:, 0])
        for i, (t, b) in enumerate(zip(top, bottom)):
            dy = t.diff.reshape(b.shape[0], b.shape[1], -1)
            dw += (b.data.reshape(dy.shape) * dy).sum(1)
            if propagate_down[i]:
                b.diff[...] = (w * dy).reshape(b.shape)
        if propagate_down[-1]:
            bottom[-1].diff[...] = dw.reshape(bottom[-1].shape)
