"""PG-CNN (mysee1989/PG-CNN, patch-gated CNN for facial expressions under occlusion): its
``MultiROIPooling``, which cuts one fixed-size patch of a feature map around each facial landmark
(src/multi_roi_pooling_layer.cu; the .cpp's CPU functions are NOT_IMPLEMENTED).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer


def _round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


@register_layer("MultiROIPooling")
class MultiROIPoolingLayer(Layer):
    """One crop per landmark, one top per landmark: landmark t of image n, (x, y) = rois[n, t],
    gives the pooled_h x pooled_w window of the feature map starting at

        (round(y spatial_scale - pooled_h // 2), round(x spatial_scale - pooled_w // 2))

    (round: half away from zero) as top t's [n]; window cells outside the map are 0. No
    pooling: the crop is copied. dL/dx adds each top's gradient back at its window (the fork's
    backward reads the crop's first row of gradients for every row). prototxt:
    ``multi_roi_pooling_param { pooled_h pooled_w spatial_scale: 1 top_num: 1 }``. Bottoms:
    feature map N x C x H x W, landmarks N x top_num x 2 ((x, y), image coordinates). Tops:
    top_num blobs of N x C x pooled_h x pooled_w.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "multi_roi_pooling_param")
        self.ph, self.pw = int(p.pooled_h), int(p.pooled_w)
        self.scale, self.num = float(p.spatial_scale), int(p.top_num)
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("pooled_h and pooled_w must be > 0")
        if self.num != len(top):
            raise self.error("top_num is %d, the layer has %d tops" % (self.num, len(top)))

    def reshape(self, bottom, top):
        f, r = bottom
        if f.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got %s" % (f.shape,), ShapeError)
        if r.num_axes < 2 or r.shape[0] != f.shape[0] or r.count != f.shape[0] * self.num * 2:
            raise self.error("landmarks %s must be N x %d x 2 with N = %d"
                             % (r.shape, self.num, f.shape[0]), ShapeError)
        for t in top:
            t.reshape(f.shape[0], f.shape[1], self.ph, self.pw)

    def _windows(self, bottom):
        """Per (image, landmark): (top rows, top cols, bottom rows, bottom cols) as slices."""
        n, _, h, w = bottom[0].shape
        pts = bottom[1].data.reshape(n, self.num, 2)
        sx = _round_half_away(pts[..., 0] * self.scale - self.pw // 2).astype(np.int64)
        sy = _round_half_away(pts[..., 1] * self.scale - self.ph // 2).astype(np.int64)
        out = {}
        for i in range(n):
            for t in range(self.num):
                axes = []
                for s, size, k in ((sy[i, t], h, self.ph), (sx[i, t], w, self.pw)):
                    b0, t0 = max(s, 0), max(-s, 0)
                    length = min(k - t0, size - b0)
                    axes.append((slice(t0, t0 + max(length, 0)), slice(b0, b0 + max(length, 0))))
                out[i, t] = axes
        return out

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        self.win = self._windows(bottom)
        for t in top:
            t.data[...] = 0
        for (i, t), ((ty, by), (tx, bx)) in self.win.items():
            top[t].data[i, :, ty, tx] = x[i, :, by, bx]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to the landmarks")
        if not propagate_down[0]:
            return
        dx = bottom[0].diff
        dx[...] = 0
        for (i, t), ((ty, by), (tx, bx)) in self.win.items():
            dx[i, :, by, bx] += top[t].diff[i, :, ty, tx]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
