"""Rotated-ROI pooling of the arbitrary-oriented text and ship detectors: RRPN's
(mjq11302010044/RRPN, caffe-fast-rcnn/src/caffe/layers/rotate_roi_pooling_layer.cu; its copy in
lilinhao/ShipDetection) and CRPN's (xhzdeng/crpn, the same file name), both ``RotateROIPooling``,
whose ``RotateROIAlign`` layers are in :mod:`.rotated_align`.

Their CUDA kernels are the reference (the training path: both forks' CPU backward is
NOT_IMPLEMENTED, and their CPU forwards differ from the kernels -- RRPN's rounds the image size,
CRPN's clips the bins before rotating and starts the maximum at -FLT_MAX). ``round`` is C's.
RRPN's form takes three bottoms (features, rois, im_info), CRPN's two.
"""
import numpy as np

from ...layers.base import register_layer, register_variant
from .roi import _c_round, _ROIBase, features_diff_wanted


class _RotateBase(_ROIBase):
    exact_num_bottom_blobs = None
    width = 6

    def layer_setup(self, bottom, top):
        p = getattr(self.layer_param, self.param_field)
        self.ph, self.pw, self.scale = int(p.pooled_h), int(p.pooled_w), float(p.spatial_scale)
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("%s pooled_h and pooled_w must be > 0 (got %d, %d)"
                             % (self.param_field, self.ph, self.pw))

    def reshape(self, bottom, top):
        rois = bottom[1]
        if bottom[0].num_axes != 4 or rois.count_range(1) != self.width:
            raise self.error("bottoms must be N x C x H x W features and R x %d rois, got %s and "
                             "%s" % (self.width, bottom[0].shape, rois.shape))
        top[0].reshape((rois.shape[0], bottom[0].shape[1], self.ph, self.pw))

    def _rois(self, bottom):
        return bottom[1].data.reshape(-1, self.width)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        out = top[0].data
        self._argmax = np.full(out.shape, -1, dtype=np.int64)
        flat = x.reshape(N, C, H * W)
        for r, roi in enumerate(self._rois(bottom)):
            b = self._batch_index(roi, N)
            for i in range(self.ph):
                for j in range(self.pw):
                    idx = self._bin_pixels(roi, i, j, H, W, bottom)
                    best = np.zeros(C, dtype=x.dtype)        # the kernels start the maximum at 0
                    arg = np.full(C, -1, dtype=np.int64)
                    for k in idx:
                        win = flat[b, :, k] > best
                        best = np.where(win, flat[b, :, k], best)
                        arg[win] = k
                    out[r, :, i, j] = best
                    self._argmax[r, :, i, j] = arg

    def _routes(self, r, roi, H, W):
        """Whether the argmax of each bin of ROI r sends its gradient (all here)."""
        return None

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        diff = np.zeros((N, C, H * W))
        for r, roi in enumerate(self._rois(bottom)):
            b = int(roi[0])
            a = self._argmax[r].reshape(C, -1)
            d = top[0].diff[r].reshape(C, -1)
            keep = self._routes(r, roi, H, W)
            c_idx, k = np.nonzero(a >= 0)
            if keep is not None:
                ok = keep[k, a[c_idx, k]]
                c_idx, k = c_idx[ok], k[ok]
            np.add.at(diff[b], (c_idx, a[c_idx, k]), d[c_idx, k])
        bottom[0].diff[...] = diff.reshape(bottom[0].shape)


@register_layer("RotateROIPooling")
class RotateROIPoolingLayer(_RotateBase):
    """CRPN's rotated ROI pooling (xhzdeng/crpn), two bottoms.

    ROI [b x1 y1 x2 y2 theta (degrees)]: s = round(x1 scale) .. e = round(x2 scale) (same for y),
    size max(e - s + 1, 1), centre c = s + int(size / 2); bin (i, j) covers the axis-aligned
    pixels [floor(i b_h), ceil((i + 1) b_h)) + s_y (the same for x, not clipped); each pixel p
    is read at c + round(R (p - c)), R = [[cos t, sin t], [-sin t, cos t]], and skipped outside
    the map; the output is max(0, the largest value read) (0 and no argmax when none is
    positive). Backward as the kernel's: map pixel q gets the dy of a bin whose argmax it is only
    if q lies strictly inside the rotated box grown by one pixel (corners rounded) and the bin is
    in the window of q rotated back (c + round(R^-1 (q - c)), floor / ceil by the bin size, as
    ROIPooling's backward) -- rounding can leave an argmax out.

    prototxt: ``rotate_roi_pooling_param { pooled_h pooled_w (required > 0) spatial_scale: 1 }``.
    Bottoms: features N x C x H x W, rois R x 6. Top R x C x pooled_h x pooled_w.
    """
    exact_num_bottom_blobs = 2
    param_field = "rotate_roi_pooling_param"

    def _geometry(self, roi):
        dt = self.dtype.type
        sx, sy, ex, ey = (int(v) for v in _c_round(roi[1:5].astype(self.dtype) * dt(self.scale)))
        theta = dt(roi[5]) / dt(180.0) * dt(3.1415926)
        w, h = max(ex - sx + 1, 1), max(ey - sy + 1, 1)
        cx, cy = sx + int(w * 0.5), sy + int(h * 0.5)
        return sx, sy, ex, ey, w, h, cx, cy, theta

    @staticmethod
    def _rotate(dx, dy, theta, dtype):
        c, s = np.cos(theta).astype(dtype), np.sin(theta).astype(dtype)
        rx = _c_round(np.asarray(dx, dtype) * c + np.asarray(dy, dtype) * s).astype(np.int64)
        ry = _c_round(np.asarray(dx, dtype) * -s + np.asarray(dy, dtype) * c).astype(np.int64)
        return rx, ry

    def _bin_pixels(self, roi, i, j, H, W, bottom):
        sx, sy, _, _, w, h, cx, cy, theta = self._geometry(roi)
        dt = self.dtype.type
        bh, bw = dt(h) / dt(self.ph), dt(w) / dt(self.pw)
        hs, he = int(np.floor(i * bh)) + sy, int(np.ceil((i + 1) * bh)) + sy
        ws, we = int(np.floor(j * bw)) + sx, int(np.ceil((j + 1) * bw)) + sx
        hh, ww = np.meshgrid(np.arange(hs, he), np.arange(ws, we), indexing="ij")
        rx, ry = self._rotate(ww - cx, hh - cy, theta, self.dtype)
        rx, ry = rx + cx, ry + cy
        ok = (rx >= 0) & (ry >= 0) & (rx <= W - 1) & (ry <= H - 1)
        return (ry * W + rx)[ok].ravel()

    def _routes(self, r, roi, H, W):
        sx, sy, ex, ey, w, h, cx, cy, theta = self._geometry(roi)
        dt = self.dtype.type
        corners = np.array([[sx - 1, sy - 1], [ex + 1, sy - 1], [ex + 1, ey + 1], [sx - 1, ey + 1]])
        px, py = self._rotate(corners[:, 0] - cx, corners[:, 1] - cy, theta, self.dtype)
        px, py = px + cx, py + cy
        qh, qw = np.divmod(np.arange(H * W), W)
        signs = []
        for k in range(4):
            a, b = k, (k + 1) % 4
            signs.append((px[b] - px[a]) * (qh - py[a]) - (py[b] - py[a]) * (qw - px[a]))
        signs = np.array(signs, dtype=np.float64)
        inside = (signs > 0).all(axis=0) | (signs < 0).all(axis=0)
        ix, iy = self._rotate(qw - cx, qh - cy, -theta, self.dtype)
        ix, iy = ix + cx, iy + cy
        bh, bw = dt(h) / dt(self.ph), dt(w) / dt(self.pw)
        phs = np.clip(np.floor((iy - sy) / bh).astype(int), 0, self.ph)
        phe = np.clip(np.ceil((iy - sy + 1) / bh).astype(int), 0, self.ph)
        pws = np.clip(np.floor((ix - sx) / bw).astype(int), 0, self.pw)
        pwe = np.clip(np.ceil((ix - sx + 1) / bw).astype(int), 0, self.pw)
        bins = np.arange(self.ph * self.pw)
        bi, bj = bins[:, None] // self.pw, bins[:, None] % self.pw
        return inside[None, :] & (phs <= bi) & (bi < phe) & (pws <= bj) & (bj < pwe)


@register_variant("RotateROIPooling", lambda lp: len(lp.bottom) == 3)
class RRPNRotateROIPoolingLayer(_RotateBase):
    """RRPN's rotated ROI pooling (mjq11302010044/RRPN), three bottoms.

    ROI [b cx cy h w angle (degrees)] (height before width). With s the scale, P the pooled
    size, bin (i, j) is the quadrilateral of M [j, i, 1], M [j, i + 1, 1], M [j + 1, i, 1],
    M [j + 1, i + 1, 1] for M = [[a Sx, b Sy, -a Sx P_w / 2 - b Sy P_h / 2 + cx s],
    [-b Sx, a Sy, b Sx P_w / 2 - a Sy P_h / 2 + cy s]], a = cos, b = sin, Sx = w s / P_w,
    Sy = h s / P_h. Pixels (x, y) with x in [max(round(min corner x), 0), min(round(max corner
    x), int(im_info[1] s) - 1)] (the same for y with im_info[0]) whose offset from the first
    corner projects into [0, |AB|^2) on AB and [0, |AC|^2) on AC are read; the output is max(0,
    the largest) (argmax none when no value is positive). The size clip comes from im_info of
    image 0; pixels past the feature map are skipped here (the kernel would read past its row).
    Backward: each bin's dy goes to its argmax (the fork launches its backward kernel over the
    bottom's count instead of the top's; this is the routing it means).

    prototxt: ``rotate_pooling_param { pooled_h pooled_w (required > 0) spatial_scale: 1 }``.
    Bottoms: features N x C x H x W, rois R x 6, im_info (height, width, ...). Top R x C x
    pooled_h x pooled_w.
    """
    exact_num_bottom_blobs = 3
    param_field = "rotate_pooling_param"

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0

    def _bin_pixels(self, roi, i, j, H, W, bottom):
        dt = self.dtype.type
        info = bottom[2].data.reshape(-1)
        s = dt(self.scale)
        img_w, img_h = int(dt(info[1]) * s), int(dt(info[0]) * s)
        cx, cy, h, w = (dt(v) for v in roi[1:5])
        ang = dt(roi[5]) / dt(180.0) * dt(3.1415926535)
        a, b = np.cos(ang).astype(self.dtype), np.sin(ang).astype(self.dtype)
        sx, sy = w * s / dt(self.pw), h * s / dt(self.ph)
        dx, dy = -dt(self.pw) / dt(2), -dt(self.ph) / dt(2)
        M = np.array([[a * sx, b * sy, a * sx * dx + b * sy * dy + cx * s],
                      [-b * sx, a * sy, -b * sx * dx + a * sy * dy + cy * s]], dtype=self.dtype)
        pts = [M @ np.array([u, v, 1], dtype=self.dtype)
               for u, v in ((j, i), (j, i + 1), (j + 1, i), (j + 1, i + 1))]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        left = int(max(_c_round(min(xs)), 0.0))
        right = int(min(_c_round(max(xs)), img_w - 1.0))
        top_ = int(max(_c_round(min(ys)), 0.0))
        bottom_ = int(min(_c_round(max(ys)), img_h - 1.0))
        ab, ac = pts[1] - pts[0], pts[2] - pts[0]
        abab, acac = ab @ ab, ac @ ac
        hh, ww = np.meshgrid(np.arange(top_, bottom_ + 1), np.arange(left, right + 1),
                             indexing="ij")
        apx, apy = (ww - pts[0][0]).astype(self.dtype), (hh - pts[0][1]).astype(self.dtype)
        abap, acap = ab[0] * apx + ab[1] * apy, ac[0] * apx + ac[1] * apy
        ok = (abab > abap) & (abap >= 0) & (acac > acap) & (acap >= 0) & (ww < W) & (hh < H)
        return (hh * W + ww)[ok].ravel()

