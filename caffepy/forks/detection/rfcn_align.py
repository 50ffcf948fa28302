"""Sampled position-sensitive ROI pooling of the R-FCN forks: ``PSROIAlign`` (makefile/frcnn
src/caffe/RFCN/psroi_align_layer.cu; afantideng/R-FCN-PSROIAlign) and ``DeformablePSROIPooling``
(Deformable ConvNets' operator as makefile/frcnn src/caffe/DeformConv and GT9505/MONet carry it;
the two files are the same). Their CUDA kernels are the reference.

Both pool a ROI [b x1 y1 x2 y2] into group_size x group_size bins; bin (i, j) of output channel
c reads input channel (c G + i) G + j (G = group_size).
"""
import numpy as np

from ...layers.base import register_layer
from ...math import bilinear
from .roi import _c_round, _ROIBase


class _PSBase(_ROIBase):
    exact_num_bottom_blobs = None

    def _common(self, p):
        self.scale, self.dim, self.G = float(p.spatial_scale), int(p.output_dim), int(p.group_size)
        if self.dim <= 0 or self.G <= 0:
            raise self.error("output_dim and group_size must be > 0 (got %d, %d)"
                             % (self.dim, self.G))

    def reshape(self, bottom, top):
        rois = self._check_rois(bottom)
        C = bottom[0].shape[1]
        if C != self.dim * self.G * self.G:
            raise self.error("input channels (%d) must equal output_dim * group_size^2 (%d)"
                             % (C, self.dim * self.G * self.G))
        top[0].reshape((rois.shape[0], self.dim, self.G, self.G))


@register_layer("PSROIAlign")
class PSROIAlignLayer(_PSBase):
    """Position-sensitive ROI align (makefile/frcnn's RFCN/psroi_align_layer.cu).

    ROI on the map: s = x1 scale, e = (x2 + 1) scale (no rounding; the same for y), size
    max(e - s, 0.1), bin b = size / G, sample step b / (n + 1) with n = ``sample_num``. Bin (i, j)
    spans [s + i b, s + (i + 1) b] clipped to [0, H - 1] (same for x); samples at clipped start
    + k step, k = 1 .. n, skipped from the clipped end on; output = (sum of the bilinear samples)
    / n^2 (0 when the clipped bin is empty). Backward: map pixel (h, w) in the integer bin
    [floor(s + i b), ceil(s + (i + 1) b)) (clipped to the map) gets (1 - |y - h|)(1 - |x - w|)
    dy / n^2 from each sample (y, x) within 1 of it in both axes -- the bilinear weights, except
    that a high neighbour past that integer bin gets nothing, as in the kernel. Skipped samples
    give nothing here; the kernel reuses the positions stored by an earlier forward for them.
    No gradient to the rois.

    prototxt: ``psroi_align_param { spatial_scale output_dim group_size sample_num: 2 }``.
    Bottoms: features N x output_dim G^2 x H x W, rois R x 5. Top R x output_dim x G x G.
    """
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.psroi_align_param
        self._common(p)
        self.n = int(p.sample_num)
        if self.n <= 0:
            raise self.error("psroi_align_param sample_num must be > 0 (got %d)" % self.n)

    def _bins(self, roi, H, W):
        dt = self.dtype.type
        s = dt(self.scale)
        x1, y1 = dt(roi[1]) * s, dt(roi[2]) * s
        x2, y2 = (dt(roi[3]) + dt(1)) * s, (dt(roi[4]) + dt(1)) * s
        bw, bh = max(x2 - x1, dt(0.1)) / dt(self.G), max(y2 - y1, dt(0.1)) / dt(self.G)
        return x1, y1, bw, bh

    def _samples(self, roi, i, j, H, W):
        """(positions [(y, x)], empty) of bin (i, j)."""
        dt = self.dtype.type
        x1, y1, bw, bh = self._bins(roi, H, W)
        hs = min(max(dt(i) * bh + y1, dt(0)), dt(H - 1))
        he = min(max(dt(i + 1) * bh + y1, dt(0)), dt(H - 1))
        ws = min(max(dt(j) * bw + x1, dt(0)), dt(W - 1))
        we = min(max(dt(j + 1) * bw + x1, dt(0)), dt(W - 1))
        sh, sw = bh / dt(self.n + 1), bw / dt(self.n + 1)
        pts = []
        for a in range(1, self.n + 1):
            for b in range(1, self.n + 1):
                y, x = hs + dt(a) * sh, ws + dt(b) * sw
                if y < he and x < we:
                    pts.append((float(y), float(x)))
        return pts, he <= hs or we <= ws

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        G = self.G
        out = top[0].data
        out[...] = 0
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = self._batch_index(roi, N)
            for i in range(G):
                for j in range(G):
                    pts, empty = self._samples(roi, i, j, H, W)
                    if empty:
                        continue
                    chans = x[b, i * G + j::G * G]
                    acc = np.zeros(self.dim)
                    for y, xx in pts:
                        acc += _bilinear(chans, y, xx)
                    out[r, :, i, j] = acc / (self.n * self.n)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            bottom[1].diff[...] = 0
        if not propagate_down[0]:
            return
        N, C, H, W = bottom[0].shape
        G = self.G
        dt = self.dtype.type
        diff = np.zeros(bottom[0].shape)
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = int(roi[0])
            x1, y1, bw, bh = self._bins(roi, H, W)
            for i in range(G):
                for j in range(G):
                    hs = min(max(int(np.floor(dt(i) * bh + y1)), 0), H)
                    he = min(max(int(np.ceil(dt(i + 1) * bh + y1)), 0), H)
                    ws = min(max(int(np.floor(dt(j) * bw + x1)), 0), W)
                    we = min(max(int(np.ceil(dt(j + 1) * bw + x1)), 0), W)
                    if he <= hs or we <= ws:
                        continue
                    g = top[0].diff[r, :, i, j] / (self.n * self.n)
                    for y, xx in self._samples(roi, i, j, H, W)[0]:
                        for h in range(max(hs, int(np.floor(y))), min(he, int(np.floor(y)) + 2)):
                            for w in range(max(ws, int(np.floor(xx))),
                                           min(we, int(np.floor(xx)) + 2)):
                                dh, dw = abs(y - h), abs(xx - w)
                                if dh < 1 and dw < 1:
                                    diff[b, i * G + j::G * G, h, w] += (1 - dh) * (1 - dw) * g
        bottom[0].diff[...] = diff


def _bilinear(chans, y, x):
    """The PSROIAlign kernel's sample of chans (C, H, W) at (y, x), inside the map."""
    return bilinear.sample(chans, max(y, 0.0), max(x, 0.0))


@register_layer("DeformablePSROIPooling")
class DeformablePSROIPoolingLayer(_PSBase):
    """Deformable position-sensitive ROI pooling (Deformable ConvNets; makefile/frcnn and
    GT9505/MONet deformable_psroi_pooling_layer.cu).

    ROI on the map: s = round(x1) scale - 0.5, e = (round(x2) + 1) scale - 0.5 (same for y),
    size max(e - s, 0.1), bin b = size / G (pooled size = group_size; ``pooled_size`` is not
    read). Bin (i, j) of output channel c, with part (p_i, p_j) = (floor(i / G P), floor(j / G
    P)) (P = ``part_size``) and class k = c / (output_dim / K) (K = trans channels / 2), is
    shifted by (t_x, t_y) = trans_std * trans[n, 2 k (+1), p_i, p_j] times the ROI's size (zero
    with ``no_trans``); its S x S samples (S = ``sample_per_part``) at start + (u, v) b / S are
    skipped outside [-0.5, W - 0.5] x [-0.5, H - 0.5], clamped to the map, and interpolated
    between floor and ceil; output = their mean (0 when none). Backward: the bilinear weights
    times dy / count to the features; to trans (only when the features get a gradient, as in the
    kernel) the derivative of the sample along x (y) times trans_std and the ROI's width
    (height). The rois get 0.

    prototxt: ``deformable_psroi_pooling_param { spatial_scale output_dim group_size part_size: 0
    sample_per_part: 1 trans_std: 0 no_trans: false }``. Bottoms: features N x output_dim G^2 x H
    x W, rois R x 5, and unless no_trans trans (R x 2K x P x P). Top R x output_dim x G x G.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.deformable_psroi_pooling_param
        self._common(p)
        self.P, self.S = int(p.part_size), int(p.sample_per_part)
        self.trans_std, self.no_trans = float(p.trans_std), bool(p.no_trans)
        if len(bottom) != (2 if self.no_trans else 3):
            raise self.error("takes %d bottoms with no_trans: %s, got %d"
                             % (2 if self.no_trans else 3, str(self.no_trans).lower(),
                                len(bottom)))
        if self.S <= 0:
            raise self.error("sample_per_part must be > 0 (got %d)" % self.S)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if not self.no_trans:
            t, R = bottom[2], top[0].shape[0]
            K = t.shape[1] // 2 if t.num_axes > 1 else 0
            need = R * K * 2 * self.P * self.P
            if K < 1 or self.dim % K or t.count < max(need, 1):
                raise self.error("trans must be R x 2K x part_size x part_size with K dividing "
                                 "output_dim, got %s" % (t.shape,))

    def _walk(self, bottom):
        """Per (roi, c, i, j): batch, channel, start (x, y), roi size, trans indices, samples."""
        dt = self.dtype.type
        N, C, H, W = bottom[0].shape
        G, P = self.G, self.P
        K = 1 if self.no_trans else bottom[2].shape[1] // 2
        per = self.dim // K
        tr = None if self.no_trans else bottom[2].data.reshape(-1)
        s = dt(self.scale)
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = self._batch_index(roi, N)
            x1, y1, x2, y2 = _c_round(roi[1:].astype(self.dtype))
            sx, sy = x1 * s - dt(0.5), y1 * s - dt(0.5)
            rw = max((x2 + dt(1)) * s - dt(0.5) - sx, dt(0.1))
            rh = max((y2 + dt(1)) * s - dt(0.5) - sy, dt(0.1))
            bw, bh = rw / dt(G), rh / dt(G)
            for c in range(self.dim):
                k = c // per
                for i in range(G):
                    for j in range(G):
                        pi, pj = int(np.floor(dt(i) / dt(G) * dt(P))), int(np.floor(dt(j) / dt(G) * dt(P)))
                        ix = (((r * K + k) * 2) * P + pi) * P + pj
                        iy = (((r * K + k) * 2 + 1) * P + pi) * P + pj
                        tx = dt(0) if tr is None else dt(tr[ix]) * dt(self.trans_std)
                        ty = dt(0) if tr is None else dt(tr[iy]) * dt(self.trans_std)
                        ws, hs = dt(j) * bw + sx + tx * rw, dt(i) * bh + sy + ty * rh
                        pts = []
                        for u in range(self.S):
                            for v in range(self.S):
                                w, h = ws + dt(v) * (bw / dt(self.S)), hs + dt(u) * (bh / dt(self.S))
                                if w < -0.5 or w > W - 0.5 or h < -0.5 or h > H - 0.5:
                                    continue
                                pts.append((min(max(float(h), 0.0), H - 1.0),
                                            min(max(float(w), 0.0), W - 1.0)))
                        yield r, b, c, i, j, (c * G + i) * G + j, pts, (ix, iy), (rw, rh)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        out = top[0].data
        out[...] = 0
        for r, b, c, i, j, ch, pts, _, _ in self._walk(bottom):
            if pts:
                out[r, c, i, j] = sum(_interp(x[b, ch], h, w) for h, w in pts) / len(pts)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        bottom[1].diff[...] = 0
        x = bottom[0].data
        dx = np.zeros(x.shape)
        dtr = None if self.no_trans else np.zeros(bottom[2].count)
        for r, b, c, i, j, ch, pts, (ix, iy), (rw, rh) in self._walk(bottom):
            if not pts:
                continue
            g = top[0].diff[r, c, i, j] / len(pts)
            for h, w in pts:
                x0, x1, y0, y1 = int(np.floor(w)), int(np.ceil(w)), int(np.floor(h)), int(np.ceil(h))
                ddx, ddy = w - x0, h - y0
                for yy, xx, q in ((y0, x0, (1 - ddx) * (1 - ddy)), (y1, x0, (1 - ddx) * ddy),
                                  (y0, x1, ddx * (1 - ddy)), (y1, x1, ddx * ddy)):
                    dx[b, ch, yy, xx] += q * g
                if dtr is not None:
                    u = x[b, ch]
                    gx = (u[y1, x1] * ddy + u[y0, x1] * (1 - ddy) - u[y1, x0] * ddy
                          - u[y0, x0] * (1 - ddy))
                    gy = (u[y1, x1] * ddx + u[y1, x0] * (1 - ddx) - u[y0, x1] * ddx
                          - u[y0, x0] * (1 - ddx))
                    dtr[ix] += gx * self.trans_std * g * rw
                    dtr[iy] += gy * self.trans_std * g * rh
        bottom[0].diff[...] = dx
        if dtr is not None:
            bottom[2].diff[...] = dtr.reshape(bottom[2].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1


def _interp(img, y, x):
    """Deformable PSROI pooling's interpolation between floor and ceil of (y, x)."""
    x0, x1, y0, y1 = int(np.floor(x)), int(np.ceil(x)), int(np.floor(y)), int(np.ceil(y))
    dx, dy = x - x0, y - y0
    return ((1 - dx) * (1 - dy) * img[y0, x0] + (1 - dx) * dy * img[y1, x0]
            + dx * (1 - dy) * img[y0, x1] + dx * dy * img[y1, x1])
