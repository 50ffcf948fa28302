"""L2Norm of two forks under one type name: LeYangNwpu/SROWN's per-sample normalisation and
Akrit2013/caffe-dev-160608's per-pixel normalisation over the channels (chosen when
``l2norm_param`` is given)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from .activations import NormalizationL2Layer


@register_layer("L2Norm")
class L2NormLayer(NormalizationL2Layer):
    """Per-sample L2 normalisation (LeYangNwpu/SROWN, caffe-master/src/caffe/layers/
    lp_norm_layer.cpp), with no epsilon:

        y_n = x_n / |x_n|;   dL/dx_n = (dL/dy_n - y_n (y_n . dL/dy_n)) / |x_n|

    n runs over axis 0; each sample's values are normalised together. No parameters. Bottom:
    N x ...; top: same shape. In place is allowed (the fork's in-place backward would write
    its own top diff while still reading it; here the gradient above is kept). With
    ``l2norm_param`` the per-pixel form :class:`L2NormChannelsLayer` is built instead.
    """
    type = "L2Norm"
    epsilon = 0.0


@register_variant("L2Norm", lambda lp: lp.HasField("l2norm_param"))
class L2NormChannelsLayer(Layer):
    """Per-pixel normalisation over the channels (Akrit2013/caffe-dev-160608,
    src/caffe/layers/l2norm_layer.cpp), taken when ``l2norm_param`` is given. For x
    N x C x H x W (C >= 2) and L = ``l2_length``:

        r[n, h, w] = sqrt(sum_c x[n, c, h, w]^2 / L)   (1 where the sum is 0)
        y = x / r;     dL/dx = dL/dy / r   (r taken as a constant, as the fork's backward does)

    prototxt: ``l2norm_param { l2_length: 1 }``. Bottom N x C x H x W; top the same shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.length = float(self.layer_param.l2norm_param.l2_length)
        if self.length <= 0:
            raise self.error("l2norm_param.l2_length must be > 0, got %g" % self.length)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 2 or x.num_axes > 4 or x.shape[1] < 2:
            raise self.error("bottom must be N x C (x H x W) with C >= 2, got shape %s"
                             % (x.shape,), ShapeError)
        if top[0] is not x:
            top[0].reshape(x.shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(bottom[0].shape[0], bottom[0].shape[1], -1)
        s = (x.astype(np.float64) ** 2 / self.length).sum(axis=1, keepdims=True)
        self.r = np.where(s == 0, 1.0, np.sqrt(s))
        top[0].data[...] = (x / self.r).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff.reshape(self.r.shape[0], -1, self.r.shape[2])
            bottom[0].diff[...] = (dy / self.r).reshape(bottom[0].shape)
