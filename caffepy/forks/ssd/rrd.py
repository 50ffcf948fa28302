"""RRD's Extend and ORPooling (MhLiao/RRD, Rotation-sensitive Regression Detector:
src/caffe/layers/extend_layer.cpp / .cu, orpooling_layer.cpp / .cu): Extend repeats the input
image once per orientation channel for the Oriented Response Network convolutions that follow it;
ORPooling takes the maximum over each group of orientation channels, giving the
rotation-invariant features RRD classifies."""
import numpy as np

from ...errors import NetError, ShapeError
from ...layers.base import Layer, register_layer


class _OrnLayer(Layer):
    """One 4-axis bottom, one top, ``orn_param.orientations`` (the fork refuses 1 or fewer)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.orn_param
        if int(p.orientations) <= 1:
            raise self.error("orn_param.orientations should be greater than 1, got %d"
                             % p.orientations, NetError)
        self.orientations = int(p.orientations)

    def _bottom_4d(self, bottom):
        shape = tuple(bottom[0].shape)
        if len(shape) != 4:
            raise self.error("the bottom must be N x C x H x W, got %s" % (shape,), ShapeError)
        return shape


@register_layer("Extend")
class ExtendLayer(_OrnLayer):
    """Repeats every channel ``orientations`` times, consecutively (RRD's Extend).

    y[n, c * O + k, h, w] = x[n, c, h, w] for k = 0 .. O-1, O = ``orn_param.orientations``
    (numpy: ``np.repeat(x, O, axis=1)``).
    prototxt: ``orn_param { orientations: 8 }`` (the schema's default is 1; the fork refuses
    O <= 1). Bottom (N, C, H, W), 4 axes -> top (N, C * O, H, W).
    No backward (the fork's Backward is empty and writes no gradient): RRD puts it on the data.
    """

    def reshape(self, bottom, top):
        shape = self._bottom_4d(bottom)
        top[0].reshape((shape[0], shape[1] * self.orientations) + shape[2:])

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = x.repeat(self.orientations, axis=1)


# the fork starts its running maximum at this value (so an output is never below it)
_ORPOOL_FLOOR = -999999.0


@register_layer("ORPooling")
class ORPoolingLayer(_OrnLayer):
    """Max over each group of ``orientations`` consecutive channels (RRD's ORPooling).

    With O = ``orn_param.orientations``:
        y[n, c, h, w] = max(-999999, max_{k < O} x[n, c * O + k, h, w])
    (the fork's running maximum starts at -999999; ties keep the lowest k). Backward: dL/dy goes
    to the channel c * O + k* that gave the maximum, 0 to the others (nothing where the floor
    -999999 won: no input gave the output there).
    prototxt: ``orn_param { orientations: 8 }`` (default 1; the fork refuses O <= 1).
    Bottom (N, C * O, H, W), 4 axes, C * O a multiple of O -> top (N, C, H, W).
    """

    def reshape(self, bottom, top):
        shape = self._bottom_4d(bottom)
        if shape[1] % self.orientations:
            raise self.error("the bottom's %d channels are not a multiple of orientations %d"
                             % (shape[1], self.orientations), ShapeError)
        top[0].reshape((shape[0], shape[1] // self.orientations) + shape[2:])

    def _grouped(self, x):
        n, c, h, w = x.shape
        return x.reshape(n, c // self.orientations, self.orientations, h, w)

    def forward_cpu(self, bottom, top):
        g = self._grouped(bottom[0].data)
        self._arg = g.argmax(axis=2)              # first maximum, as the fork's strict '>'
        best = np.take_along_axis(g, self._arg[:, :, None], axis=2)[:, :, 0]
        self._floored = best <= _ORPOOL_FLOOR
        top[0].data[...] = np.where(self._floored, _ORPOOL_FLOOR, best)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        gx = np.zeros(bottom[0].shape, dtype=bottom[0].diff.dtype)
        dy = np.where(self._floored, 0, top[0].diff)
        np.put_along_axis(self._grouped(gx), self._arg[:, :, None], dy[:, :, None], axis=2)
        bottom[0].diff[...] = gx
