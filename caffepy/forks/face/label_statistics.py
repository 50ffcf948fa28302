"""LabelSpecificStatistics: the angle statistics of the label's and the other classes' cosines
(Aliang-SEU/MTCNN-on-caffe-window, Centerus/caffe-windows)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer

_DEG = np.pi / 180.0


@register_layer("LabelSpecificStatistics")
class LabelSpecificStatisticsLayer(Layer):
    """Mean and deviation, in degrees, of the label column and of the other columns of x
    (src/caffe/layers/label_specific_statistics_layer.cu of Aliang-SEU/MTCNN-on-caffe-window and
    Centerus/caffe-windows; the CPU path is NOT_IMPLEMENTED, this is the GPU path). For x N x D
    (usually angles in radians) and labels l, with values read as x / (pi/180):

        mp = sum_n x[n, l_n] / N,            sp = sqrt(sum_n x[n, l_n]^2 / N - mp^2)
        mn = sum_{n, j != l_n} x[n, j] / (N (D - 1)),  sn likewise over those values
        top[0] = (mp, sp, mn, sn);           top[1] (optional, shape (1,)) = (mn - mp) / 2

    Backward (only with the second top, from its diff g), as the fork writes it:
        dL/dx[n, l_n] = -g / N / (pi/180);   dL/dx[n, j] = g / (N (D - 1)) / (pi/180)  (j != l_n)
    which is twice the gradient of (mn - mp) / 2; the first top passes no gradient (with one top
    the bottom's gradient is 0 here; the fork leaves it unwritten). No prototxt fields. Bottoms:
    x (N x ...), labels (N).
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes == 0 or bottom[1].count != x.shape[0]:
            raise self.error("need one label per row of bottom[0] (%s), got %s"
                             % (x.shape, bottom[1].shape), ShapeError)
        if x.count_range(1) < 2:
            raise self.error("bottom[0] needs at least two columns, got shape %s" % (x.shape,),
                             ShapeError)
        top[0].reshape((4,))
        if len(top) == 2:
            top[1].reshape((1,))

    def _mask(self, bottom):
        n = bottom[0].shape[0]
        d = bottom[0].count // n
        lab = np.trunc(bottom[1].data.reshape(n)).astype(np.int64)
        if lab.min() < 0 or lab.max() >= d:
            raise self.error("label outside [0, %d)" % d)
        pos = np.zeros((n, d), dtype=bool)
        pos[np.arange(n), lab] = True
        return n, d, pos

    def forward_cpu(self, bottom, top):
        n, d, pos = self._mask(bottom)
        x = bottom[0].data.reshape(n, d).astype(np.float64)
        sp_sum, sq_p = x[pos].sum() / _DEG, (x[pos] ** 2).sum() / _DEG / _DEG
        sn_sum, sq_n = x[~pos].sum() / _DEG, (x[~pos] ** 2).sum() / _DEG / _DEG
        mp = sp_sum / n
        sp = np.sqrt(sq_p / n - mp * mp)
        mn = sn_sum / (n * (d - 1))
        sn = np.sqrt(sq_n / n / (d - 1) - mn * mn)
        top[0].data[...] = [mp, sp, mn, sn]
        if len(top) == 2:
            top[1].data[...] = (mn - mp) / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels (bottom 1)")
        if not propagate_down[0]:
            return
        if len(top) < 2:
            bottom[0].diff[...] = 0
            return
        n, d, pos = self._mask(bottom)
        g = float(top[1].diff.reshape(-1)[0])
        dx = np.where(pos, -g / n / np.pi * 180.0, g / n / (d - 1) / np.pi * 180.0)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
