"""pathak22/caffe-ccnn (constrained CNNs for weak segmentation; Repack also in nian-liu/DSCLRCN):
Repack (src/caffe/layers/repack_layer.cpp / .cu) and RunningAverage (running_average.cpp), with
YutingZhang/dbnet-caffe-matlab's different RunningAverage
(caffe/src/caffe/layers/running_average_layer.cpp) as a variant.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer, register_variant
from ...proto import caffe_pb2


@register_layer("Repack")
class RepackLayer(Layer):
    """Moves the stride phases of a feature map into the batch (PACK_IMAGE) or back (UNPACK_IMAGE).

    PACK_IMAGE: x N x C x H x W, top (s_h s_w N) x C x H' x W' with H' = (H - 1) // s_h + 1,
    top[(y s_w + x) N + n, c, j, i] = x[n, c, j s_h + y, i s_w + x] (0 past the map).
    UNPACK_IMAGE is its inverse: x (s_h s_w N') x C x H x W, top N' x C x s_h H x s_w W with
    N' = N // (s_h s_w) (items past s_h s_w N' are not read; their gradient is 0). The backward
    of each is the other applied to the gradient. prototxt: ``repack_param { operation:
    PACK_IMAGE stride: 1 stride_h stride_w }`` (stride_h given: stride_h and stride_w, else
    stride for both). Bottom and top 4-D.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "repack_param")
        self.sh, self.sw = ((p.stride_h, p.stride_w) if p.HasField("stride_h")
                            else (p.stride, p.stride))
        if self.sh <= 0 or self.sw <= 0:
            raise self.error("strides must be > 0, got %d x %d (stride_h needs stride_w)"
                             % (self.sh, self.sw))
        self.pack = p.operation == p.PACK_IMAGE

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        n, c, h, w = x.shape
        s = self.sh * self.sw
        if self.pack:
            top[0].reshape(s * n, c, (h - 1) // self.sh + 1, (w - 1) // self.sw + 1)
        else:
            top[0].reshape(n // s, c, h * self.sh, w * self.sw)

    def _pack(self, big, small):
        """``small`` (s_h s_w N x C x H' x W') from ``big`` (N x C x H x W)."""
        n, c, h, w = big.shape
        oh, ow = small.shape[2:]
        padded = np.zeros((n, c, oh * self.sh, ow * self.sw), big.dtype)
        padded[:, :, :h, :w] = big
        v = padded.reshape(n, c, oh, self.sh, ow, self.sw).transpose(3, 5, 0, 1, 2, 4)
        small[...] = v.reshape(small.shape)

    def _unpack(self, small, big):
        """``big`` (N' x C x H x W) from the first s_h s_w N' items of ``small`` (values placed
        past H x W are dropped)."""
        n, c, h, w = big.shape
        ih, iw = small.shape[2:]
        used = small[:self.sh * self.sw * n].reshape(self.sh, self.sw, n, c, ih, iw)
        full = used.transpose(2, 3, 4, 0, 5, 1).reshape(n, c, ih * self.sh, iw * self.sw)
        big[...] = full[:, :, :h, :w]

    def forward_cpu(self, bottom, top):
        if self.pack:
            self._pack(bottom[0].data, top[0].data)
        else:
            self._unpack(bottom[0].data, top[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        if self.pack:
            self._unpack(top[0].diff, bottom[0].diff)
        else:
            bottom[0].diff[...] = 0
            used = bottom[0].diff[:self.sh * self.sw * top[0].shape[0]]
            self._pack(top[0].diff, used)


@register_layer("RunningAverage")
class RunningAverageLayer(Layer):
    """caffe-ccnn's RunningAverage: a state a (1 x C x H x W, ``initial_value`` at set-up, not
    saved) updated at every forward with the batch's sum, a <- alpha a + sum_n x_n; top = a.
    dL/dx_n = dL/dtop for every n (the state's history held constant). prototxt:
    ``running_average_param { alpha: 0.9 initial_value: 0 }`` (alpha <= 1). Bottom N x C x H x W.
    (With ``mass``, ``update_test`` or ``reset_history`` set, or more than one bottom, the layer
    is dbnet-caffe-matlab's, :class:`RunningMeanLayer`.)
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "running_average_param")
        self.alpha = float(p.alpha)
        if self.alpha > 1:
            raise self.error("alpha cannot be greater than 1")
        if bottom[0].num_axes > 4:
            raise self.error("bottom needs at most 4 axes", ShapeError)
        b = bottom[0]
        self.average = np.full((1, b.channels, b.height, b.width), float(p.initial_value),
                               self.dtype)

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes > 4 or (b.channels, b.height, b.width) != self.average.shape[1:]:
            raise self.error("bottom %s must stay ... x %d x %d x %d"
                             % ((b.shape,) + self.average.shape[1:]), ShapeError)
        top[0].reshape(*self.average.shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape((bottom[0].num,) + self.average.shape[1:])
        self.average *= self.alpha
        self.average += x.sum(axis=0)
        top[0].data[...] = self.average

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dx = bottom[0].diff.reshape((bottom[0].num,) + self.average.shape[1:])
            dx[...] = top[0].diff


def _dbnet_form(lp):
    p = lp.running_average_param
    return (len(lp.bottom) > 1 or p.HasField("mass") or p.HasField("update_test")
            or p.HasField("reset_history"))


@register_variant("RunningAverage", _dbnet_form)
class RunningMeanLayer(Layer):
    """YutingZhang/dbnet-caffe-matlab's RunningAverage, chosen when ``mass``, ``update_test`` or
    ``reset_history`` is set or the layer has more than one bottom: an exponentially weighted
    mean of each bottom over the forwards, kept in parameter blobs (one per bottom, its shape,
    and a last 1 x 1 x 1 x 1 blob holding the weight w, all 0 at set-up; saved with the net).
    With d = mass / (1 + mass), a forward in TRAIN (or in TEST with update_test) does, per
    bottom, m <- (d w m + x) / (d w + 1), then w <- d w + 1 (w first set to 0 at the layer's
    first forward with reset_history). Top i is mean i (the fork shares the data). No gradient
    (the fork's backward is empty; parameter gradients off). prototxt: ``running_average_param
    { mass: 1e4 update_test: true reset_history: false }``.
    """
    min_bottom_blobs = 1

    def layer_setup(self, bottom, top):
        if len(top) != len(bottom):
            raise self.error("takes one top per bottom (%d bottoms, %d tops)"
                             % (len(bottom), len(top)))
        p = fork_param(self.layer_param, "running_average_param")
        mass = float(p.mass)
        self.decay, self.update_test = mass / (1.0 + mass), bool(p.update_test)
        self.reset_first = bool(p.reset_history)
        if not self.blobs:
            self.blobs = [self.new_blob(b.shape) for b in bottom] + [self.new_blob((1, 1, 1, 1))]
        elif len(self.blobs) != len(bottom) + 1:
            raise self.error("expected %d parameter blobs, got %d"
                             % (len(bottom) + 1, len(self.blobs)))
        self.param_propagate_down = [False] * len(self.blobs)

    def reshape(self, bottom, top):
        for i, (b, t) in enumerate(zip(bottom, top)):
            if b.count != self.blobs[i].count:
                raise self.error("bottom[%d] %s does not match its running mean %s"
                                 % (i, b.shape, self.blobs[i].shape), ShapeError)
            t.reshape(*b.shape)

    def forward_cpu(self, bottom, top):
        if self.phase == caffe_pb2.TRAIN or self.update_test:
            w = self.blobs[-1].data.reshape(-1)
            if self.reset_first:
                w[0] = 0
            self.reset_first = False
            dw = w[0] * self.decay
            for b, m in zip(bottom, self.blobs):
                m.data[...] = (m.data * dw + b.data.reshape(m.shape)) / (dw + 1)
            w[0] = dw + 1
        for t, m in zip(top, self.blobs):
            t.data[...] = m.data.reshape(t.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass
