"""The realtime-pose Caffe's Switch and Maximum (CMU-Perceptual-Computing-Lab/caffe_rtpose).
Switch was added for debugging its demo and later removed (src/caffe/layers/switch_layer.cpp /
.cu before that); Maximum finds each heat map's peak.

The demo's ``pose_deploy_linevec_switch.prototxt`` feeds every stage's output into one Switch so
the viewer can show any stage's maps; the demo picks the bottom through ``SelectSwitch``.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant


@register_layer("Switch")
class SwitchLayer(Layer):
    """Passes one of its bottoms through unchanged (caffe_rtpose's Switch).

    y = x_s, where s (``switch_select``) is the last bottom after set-up, as the fork's set-up
    leaves it; :meth:`select_switch` picks another, as the fork's ``SelectSwitch``. The top has
    bottom 0's shape and takes the first count(bottom 0) values of bottom s in memory order (the
    fork copies that many); all bottoms must have bottom 0's number of axes, and bottom s must
    hold at least count(bottom 0) values (the fork would read past its end).
    Backward: dL/dx_s = dL/dy on those values (the rest of x_s, and the other bottoms, get 0; the
    fork writes only bottom s's diff).
    prototxt: no parameters (``type: "Switch"``, one or more bottoms, one top). The fork's
    ``switch_param { num_output }`` was never read and is not in its final schema.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.num_inputs = len(bottom)
        self.switch_select = len(bottom) - 1

    def select_switch(self, num):
        """Choose the bottom the top copies (the fork's ``SelectSwitch``)."""
        if not 0 <= num < self.num_inputs:
            raise self.error("cannot select input %d: the layer has %d bottoms"
                             % (num, self.num_inputs))
        self.switch_select = num

    def reshape(self, bottom, top):
        shape = tuple(bottom[0].shape)
        for i, b in enumerate(bottom[1:], 1):
            if len(b.shape) != len(shape):
                raise self.error("all inputs must have the same number of axes: bottom 0 %s, "
                                 "bottom %d %s" % (shape, i, tuple(b.shape)), ShapeError)
        count = int(np.prod(shape, dtype=np.int64))
        selected = int(np.prod(bottom[self.switch_select].shape, dtype=np.int64))
        if selected < count:
            raise self.error("bottom %d %s holds %d values, fewer than bottom 0 %s (%d)"
                             % (self.switch_select, tuple(bottom[self.switch_select].shape),
                                selected, shape, count), ShapeError)
        self.count = count
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        x = bottom[self.switch_select].data.reshape(-1)
        top[0].data[...] = x[:self.count].reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        for i, b in enumerate(bottom):
            if not propagate_down[i]:
                continue
            b.diff[...] = 0
            if i == self.switch_select:
                b.diff.reshape(-1)[:self.count] = top[0].diff.reshape(-1)


@register_variant("Maximum", lambda lp: len(lp.bottom) == 1)
class MaximumLayer(Layer):
    """caffe_rtpose's Maximum (src/caffe/layers/maximum_layer.cpp): the peak of each channel's map,
    top[n, c, 0] = (x, y, value) of the first maximum in raster order. The CPU path, computed
    here, starts its search at the smallest positive float, so a map with no value above it gives
    (0, 0, that float); the fork's GPU reduction starts at -1e10. Bottom N x C x H x W; top
    N x C x 1 x 3. Backward: NOT_IMPLEMENTED in the fork. No parameters. Chosen when the layer
    has one bottom; with two, Maximum is synopsys-caffe's element-wise one
    (:mod:`caffepy.forks.misc.tensor_ops`).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        top[0].reshape(x.shape[0], x.shape[1], 1, 3)

    def forward_cpu(self, bottom, top):
        n, c, h, w = bottom[0].shape
        x = bottom[0].data.reshape(n, c, h * w)
        start = np.finfo(self.dtype).tiny
        at = np.argmax(x, axis=2)
        peak = np.take_along_axis(x, at[..., None], axis=2)[..., 0]
        found = peak > start
        at = np.where(found, at, 0)
        y = top[0].data.reshape(n, c, 3)
        y[..., 0], y[..., 1] = at % w, at // w
        y[..., 2] = np.where(found, peak, start)
