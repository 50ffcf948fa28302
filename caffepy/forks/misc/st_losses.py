"""The helper layers that travel with the spatial transformer of py-faster-rcnn-st
(rremani/py-faster-rcnn-st, caffe-fast-rcnn/src/caffe/layers/; the same files in
ALISCIFP/Segmentation, garrickbrazil/AR-Ped, lawy623/SVS, Yuliang-Liu/Curve-Text-Detector):
PowerFile (a shift read from a text file), LocLoss and STLoss (penalties keeping the transform's
parameters and its sampling grid inside [-1, 1]). The forks compute all three only on the GPU
(their ``Forward_cpu`` / ``Backward_cpu`` stop with "not implemented"); caffepy computes the
GPU kernels' math on the host.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, fork_param, register_layer


@register_layer("PowerFile")
class PowerFileLayer(Layer):
    """y = x + shift, the shift one value per element of an item (count(1) values, the same for
    every n); dL/dx = dL/dy (power_file_layer.cu).

    prototxt: ``power_file_param { shift_file }``: whitespace-separated numbers read in order
    until count(1) are read or one does not parse (the rest stay 0, as the fork's ``fin >>``
    loop); without shift_file the shift is 0. A shift_file that cannot be opened is an error
    here (the fork reads it as empty: all zeros). Bottom: any shape, N first; top: same shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "power_file_param")
        self.dim = bottom[0].count // bottom[0].shape[0] if bottom[0].num_axes else 1
        self.shift = np.zeros(self.dim)
        if p is not None and p.HasField("shift_file"):
            try:
                with open(p.shift_file) as f:
                    tokens = f.read().split()
            except OSError as e:
                raise self.error("cannot read shift_file %s: %s"
                                 % (p.shift_file, e.strerror or e))
            for k, tok in enumerate(tokens[:self.dim]):
                try:
                    self.shift[k] = float(tok)
                except ValueError:
                    break

    def reshape(self, bottom, top):
        dim = bottom[0].count // bottom[0].shape[0] if bottom[0].num_axes else 1
        if dim != self.dim:
            raise self.error("items of %d values, the shift was read for %d" % (dim, self.dim),
                             ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = (x.reshape(-1, self.dim) + self.shift).reshape(x.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff


def _outside(v, bound):
    """v + bound below -bound, v - bound above bound, else 0: the penalty's slope."""
    return np.where(v < -bound, v + bound, np.where(v > bound, v - bound, 0.0))


@register_layer("LocLoss")
class LocLossLayer(LossLayer):
    """Squared excess over a threshold t, averaged over all M values (loc_loss_layer.cu):

        loss = sum_k 0.5 d_k^2 / M,   d_k = x_k + t (x_k < -t), x_k - t (x_k > t), else 0
        dL/dx_k = d_k * loss_weight / M

    (where |x_k| <= t the fork's kernel leaves the diff unwritten; caffepy writes 0). prototxt:
    ``loc_loss_param { threshold }`` (> 0). Bottom: any shape. Top: the loss.
    """
    exact_num_bottom_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "loc_loss_param")
        self.t = float(p.threshold) if p is not None else 0.0
        if not self.t > 0:
            raise self.error("loc_loss_param.threshold must be > 0, got %g" % self.t)

    def reshape(self, bottom, top):
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        d = _outside(bottom[0].data, self.t)
        top[0].data[...] = np.sum(0.5 * d * d) / bottom[0].count

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = _outside(bottom[0].data, self.t) * (
                top[0].diff / bottom[0].count)

    def allow_force_backward(self, bottom_index):
        return True


@register_layer("STLoss")
class STLossLayer(LossLayer):
    """Keeps an affine transform's sampling grid inside [-1, 1] (st_loss_layer.cu). theta_n =
    (a, b, c, d, e, f) maps the output grid point (s, t) (s < output_H, t < output_W) to

        X = a u + b v + c,  Y = d u + e v + f,   u = 2 s / output_H - 1, v = 2 t / output_W - 1

    (u from the rows, v from the columns, as the fork). loss = sum 0.5 (g(X)^2 + g(Y)^2) /
    (N output_H output_W), g(z) = z + 1 below -1, z - 1 above 1, else 0; dL/dtheta is its
    exact gradient times loss_weight. prototxt: ``st_loss_param { output_H output_W }``.
    Bottom: theta, N x 6. Top: the loss.
    """
    exact_num_bottom_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "st_loss_param")
        self.h, self.w = (int(p.output_H), int(p.output_W)) if p is not None else (0, 0)
        if self.h <= 0 or self.w <= 0:
            raise self.error("st_loss_param.output_H and output_W must be > 0")

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 1 or bottom[0].count != 6 * bottom[0].shape[0]:
            raise self.error("theta must be N x 6, got %s" % (bottom[0].shape,), ShapeError)
        top[0].reshape(())

    def _grid(self, bottom):
        n = bottom[0].shape[0]
        theta = bottom[0].data.reshape(n, 2, 3)
        s, t = np.meshgrid(np.arange(self.h), np.arange(self.w), indexing="ij")
        pts = np.stack([s * 2.0 / self.h - 1, t * 2.0 / self.w - 1, np.ones(s.shape)])
        pts = pts.reshape(3, -1)
        return pts, theta @ pts     # (3, HW), (N, 2, HW)

    def forward_cpu(self, bottom, top):
        _, xy = self._grid(bottom)
        g = _outside(xy, 1.0)
        top[0].data[...] = np.sum(0.5 * g * g) / (bottom[0].shape[0] * self.h * self.w)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            pts, xy = self._grid(bottom)
            scale = top[0].diff / (bottom[0].shape[0] * self.h * self.w)
            dtheta = _outside(xy, 1.0) @ pts.T     # (N, 2, 3)
            bottom[0].diff[...] = (dtheta * scale).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return True
