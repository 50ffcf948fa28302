"""MovingNormalize: division by a running average of the feature norm (happynear/caffe-windows,
also Centerus/caffe-windows)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("MovingNormalize")
class MovingNormalizeLayer(Layer):
    """Scales the bottom by one over a moving average of its L2 norm (happynear/caffe-windows,
    src/caffe/layers/moving_normalize_layer.cu; the fork's CPU path is NOT_IMPLEMENTED, this is
    its GPU path). For x N x C x H x W (at most 4 axes; missing ones are 1), S = H W:

        r[n, s] = sqrt(sum_c x[n, c, s]^2 + 1e-12)
        m = (r[0] + ... + r[N-1]) / (N S)     (the first N entries of r in memory order,
                                                 as the fork's dot product of length N reads them;
                                                 for S = 1 that is the mean norm)
        a = m at the first forward (a < 0: the parameter's initial -1), else 0.99 a + 0.01 m
        y = x / a;    top[1] (optional, shape (1,)) = a
        dL/dx = dL/dy / a   (a taken as a constant, as the fork's backward does)

    a is updated at every forward, in TRAIN and TEST alike. Parameter: a (shape (1,)), never
    learned: it gets lr_mult 0 and decay_mult 0; a ParamSpec with another lr_mult is an error.
    No prototxt fields.
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        params = self.layer_param.param
        if len(params) == 0:
            spec = params.add()
            spec.lr_mult = 0.0
            spec.decay_mult = 0.0
        elif params[0].lr_mult != 0:
            raise self.error("the moving average is not learned: param { lr_mult } must be 0, "
                             "got %g" % params[0].lr_mult)
        if self.blobs:
            self.check_param_blobs([(1,)])
        else:
            self.blobs = [self.new_blob((1,))]
            self.blobs[0].data[...] = -1.0
        self.param_propagate_down = [False]

    def reshape(self, bottom, top):
        if bottom[0].num_axes > 4:
            raise self.error("bottom must have at most 4 axes, got shape %s"
                             % (bottom[0].shape,), ShapeError)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)
        if len(top) == 2:
            top[1].reshape((1,))

    def forward_cpu(self, bottom, top):
        shape = tuple(bottom[0].shape) + (1,) * (4 - bottom[0].num_axes)
        n, c = shape[:2]
        x = bottom[0].data.reshape(n, c, -1).astype(np.float64)
        r = np.sqrt((x * x).sum(axis=1) + 1e-12).reshape(-1)
        m = r[:n].sum() / r.size
        stat = self.blobs[0].data.reshape(-1)
        stat[0] = m if stat[0] < 0 else stat[0] * 0.99 + m * 0.01
        a = float(stat[0])
        self.scale = a
        if len(top) == 2:
            top[1].data[...] = a
        top[0].data[...] = bottom[0].data / a

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff / self.scale
