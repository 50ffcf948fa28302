"""``RotateROIAlign`` of CRPN (xhzdeng/crpn) and of RRPN (mjq11302010044/RRPN; on quadrilaterals,
taken when ``rotate_align_param`` is set), from their rotate_roi_align_layer.cu kernels (both
forks' CPU functions are NOT_IMPLEMENTED)."""
import numpy as np

from ...layers.base import register_layer, register_variant
from .roi import _c_round, features_diff_wanted
from .rotated_roi import RotateROIPoolingLayer, _RotateBase


@register_layer("RotateROIAlign")
class RotateROIAlignLayer(_RotateBase):
    """CRPN's rotated ROI align (xhzdeng/crpn rotate_roi_align_layer.cu; the .cpp is
    NOT_IMPLEMENTED), a max over interpolated samples.

    ROI [b x1 y1 x2 y2 theta]: s = x1 scale, e = x2 scale (no rounding; same for y), size max(e
    - s + 1, 1), centre c = s + size / 2, bin b = size / pooled; bin (i, j) takes the points (x,
    y) = (s_x + j b_x + u, s_y + i b_y + v), u, v = 0, 1, ... while below the bin's end, rotated to
    r = c + R (p - c) (R as RotateROIPooling's), and reads r with the kernel's four-corner sum
    over floor / ceil of each coordinate (only corners in the map; an integer coordinate makes
    floor = ceil, so that corner counts twice or four times); the output is max(0, the largest
    read), its argmax the truncated (int) r. A third bottom, when given, replaces spatial_scale
    by |its first value|. Backward as the kernel's: map pixel q gets, for each ROI of its image
    holding it strictly inside the rotated box grown by one pixel (integer geometry: s =
    round(x1 scale), e = ceil(x2 scale), c = s + int(size / 2), corners rounded), the dy of every
    bin in the window of q rotated back (floor .. ceil, both ends included, clipped to [0,
    pooled]) whose stored argmax is q; the window's last row / column may index the next
    channel's bins, which is read as the kernel reads it (within the top blob; past it, nothing).

    prototxt: ``rotate_roi_align_param { pooled_h pooled_w (required > 0) spatial_scale: 1 }``.
    Bottoms: features N x C x H x W, rois R x 6, optionally a scale blob. Top R x C x pooled_h x
    pooled_w.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    param_field = "rotate_roi_align_param"

    def _scale(self, bottom):
        if len(bottom) > 2:
            return float(abs(bottom[2].data.reshape(-1)[0]))
        return self.scale

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        dt = self.dtype.type
        s = dt(self._scale(bottom))
        out = top[0].data
        self._ax = np.full(out.shape, -1, dtype=np.int64)
        self._ay = np.full(out.shape, -1, dtype=np.int64)
        for r, roi in enumerate(self._rois(bottom)):
            b = self._batch_index(roi, N)
            sx, sy, ex, ey = (dt(v) * s for v in roi[1:5])
            th = dt(dt(roi[5]) / dt(180.0) * 3.1415926)
            w, h = max(ex - sx + dt(1), dt(1)), max(ey - sy + dt(1), dt(1))
            cx, cy = sx + w * dt(0.5), sy + h * dt(0.5)
            cs, sn = np.cos(th).astype(self.dtype), np.sin(th).astype(self.dtype)
            bh, bw = h / dt(self.ph), w / dt(self.pw)
            for i in range(self.ph):
                for j in range(self.pw):
                    best = np.zeros(C, dtype=x.dtype)
                    ax, ay = np.full(C, -1), np.full(C, -1)
                    hh, he = dt(i) * bh + sy, dt(i + 1) * bh + sy
                    while hh < he:
                        ww, we = dt(j) * bw + sx, dt(j + 1) * bw + sx
                        while ww < we:
                            rw = (ww - cx) * cs + (hh - cy) * sn + cx
                            rh = (ww - cx) * -sn + (hh - cy) * cs + cy
                            v = _four_corners(x[b], rw, rh)
                            win = v > best
                            best = np.where(win, v, best)
                            ax[win], ay[win] = int(rw), int(rh)
                            ww = ww + dt(1)
                        hh = hh + dt(1)
                    out[r, :, i, j] = best
                    self._ax[r, :, i, j], self._ay[r, :, i, j] = ax, ay

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        dt = self.dtype.type
        s = dt(self._scale(bottom))
        P = self.ph * self.pw
        ax, ay, dy = self._ax.reshape(-1), self._ay.reshape(-1), top[0].diff.reshape(-1)
        diff = np.zeros(bottom[0].shape)
        qh, qw = np.divmod(np.arange(H * W), W)
        for r, roi in enumerate(self._rois(bottom)):
            b = int(roi[0])
            sx, sy = (int(v) for v in _c_round(np.array(roi[1:3], dtype=self.dtype) * s))
            ex, ey = (int(np.ceil(dt(v) * s)) for v in roi[3:5])
            th = dt(dt(roi[5]) / dt(180.0) * 3.1415926)
            w, h = max(ex - sx + 1, 1), max(ey - sy + 1, 1)
            cx, cy = sx + int(w * 0.5), sy + int(h * 0.5)
            corners = np.array([[sx - 1, sy - 1], [ex + 1, sy - 1], [ex + 1, ey + 1],
                                [sx - 1, ey + 1]])
            px, py = RotateROIPoolingLayer._rotate(corners[:, 0] - cx, corners[:, 1] - cy, th,
                                                   self.dtype)
            px, py = px + cx, py + cy
            sides = np.array([(px[(k + 1) % 4] - px[k]) * (qh - py[k])
                              - (py[(k + 1) % 4] - py[k]) * (qw - px[k]) for k in range(4)],
                             dtype=np.float64)
            inside = (sides > 0).all(axis=0) | (sides < 0).all(axis=0)
            ix, iy = RotateROIPoolingLayer._rotate(qw - cx, qh - cy, -th, self.dtype)
            ix, iy = ix + cx, iy + cy
            bh, bw = dt(h) / dt(self.ph), dt(w) / dt(self.pw)
            for q in np.nonzero(inside)[0]:
                phs = min(max(int(np.floor(dt(iy[q] - sy) / bh)), 0), self.ph)
                phe = min(max(int(np.ceil(dt(iy[q] - sy + 1) / bh)), 0), self.ph)
                pws = min(max(int(np.floor(dt(ix[q] - sx) / bw)), 0), self.pw)
                pwe = min(max(int(np.ceil(dt(ix[q] - sx + 1) / bw)), 0), self.pw)
                for c in range(C):
                    base = (r * C + c) * P
                    for i in range(phs, phe + 1):
                        for j in range(pws, pwe + 1):
                            k = base + i * self.pw + j
                            if k < ax.size and ax[k] == qw[q] and ay[k] == qh[q]:
                                diff[b, c, qh[q], qw[q]] += dy[k]
        bottom[0].diff[...] = diff


def _four_corners(img, rw, rh):
    """The CRPN align kernel's read of img (C, H, W) at (rw, rh): floor / ceil corners in the map."""
    _, H, W = img.shape
    xl, xr, yb, yt = int(np.floor(rw)), int(np.ceil(rw)), int(np.floor(rh)), int(np.ceil(rh))
    val = np.zeros(img.shape[0], dtype=img.dtype)
    for xx, yy, wt in ((xl, yt, (1 - rw + xl) * (1 - yt + rh)), (xr, yt, (1 - xr + rw) * (1 - yt + rh)),
                       (xl, yb, (1 - rw + xl) * (1 - rh + yb)), (xr, yb, (1 - xr + rw) * (1 - rh + yb))):
        if 0 <= xx <= W - 1 and 0 <= yy <= H - 1:
            val = val + wt * img[:, yy, xx]
    return val


def _quad_point(q, i, j, ph, pw):
    """RRPN's DexX / DexY: the bilinear point (i / ph, j / pw) of quadrilateral q (x1 y1 .. x4 y4;
    corners 1, 2 along the top, 4, 3 along the bottom)."""
    a, b = (ph - i) / ph, i / ph
    u, v = (pw - j) / pw, j / pw
    x = a * (u * q[0] + v * q[2]) + b * (u * q[6] + v * q[4])
    y = u * (a * q[1] + b * q[7]) + v * (a * q[3] + b * q[5])
    return np.float32(x), np.float32(y)


def _in_quad(px, py, pts):
    sign = 0
    for k in range(4):
        (x1, y1), (x2, y2) = pts[k], pts[(k + 1) % 4]
        val = x2 * py + px * y1 + x1 * y2 - x2 * y1 - px * y2 - x1 * py
        cur = int(val > 0) - int(val < 0)
        if cur:
            if sign and cur != sign:
                return False
            sign = cur
    return True


@register_variant("RotateROIAlign", lambda lp: lp.HasField("rotate_align_param"))
class RRPNRotateROIAlignLayer(_RotateBase):
    """RRPN's rotated ROI align on quadrilaterals (mjq11302010044/RRPN rotate_roi_align_layer.cu;
    the .cpp is NOT_IMPLEMENTED), taken when ``rotate_align_param`` is set.

    ROI [b x1 y1 x2 y2 x3 y3 x4 y4] in image pixels; the scales are the map's size over
    im_info's (H / im_info[0], W / im_info[1]; ``spatial_scale`` is not read). Bin (i, j) is the
    quadrilateral of the ROI's bilinear points (i, j), (i, j + 1), (i + 1, j + 1), (i + 1, j)
    (fractions of pooled_h, pooled_w), scaled; the points (x, y) = (left + u, top + v) of its
    bounding box clipped to the map (u, v = 0, 1, ... up to right + 1, bottom + 1) inside or on
    it are read as the kernel does -- fractions fx = x - floor(x) and, as written there, fy = y -
    floor(x); corners clipped to the map; the lower-left corner read at the lower-right pixel --
    and the output is max(0, the largest read), in float, with the point kept. Backward: each
    output's dy goes to the four pixels around its kept point with the bilinear weights of (fx, fy
    = y - floor(y)) (an output with no point: pixel (0, 0) with weight 1, as the kernel); the ROI
    gets the kernel's coordinate terms: with dw, dh the sample's x / y derivatives times dy,
    corner k of the quadrilateral gets the bilinear share of the bin's upper-left grid point (the
    next column when its x test selects corner 2 or 3 as the leftmost; its y test never fires).
    The fork launches this kernel over the features' count instead of the top's, without
    atomics; here every output is visited once.

    prototxt: ``rotate_align_param { pooled_h pooled_w (required > 0) spatial_scale }``.
    Bottoms: features N x C x H x W, rois R x 9, im_info (height, width, ...). Top R x C x
    pooled_h x pooled_w.
    """
    exact_num_bottom_blobs = 3
    param_field = "rotate_align_param"
    width = 9

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2

    def _bin(self, roi, i, j, H, W, info):
        sh, sw = np.float32(H / np.float32(info[0])), np.float32(W / np.float32(info[1]))
        q = roi[1:9].astype(np.float32)
        pts = []
        for a, b in ((i, j), (i, j + 1), (i + 1, j + 1), (i + 1, j)):
            x, y = _quad_point(q, a, b, self.ph, self.pw)
            pts.append((np.float32(x * sw), np.float32(y * sh)))
        return pts, sh, sw

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        info = bottom[2].data.reshape(-1)
        out = top[0].data
        self._kept = np.full(out.shape + (2,), -1.0)
        for r, roi in enumerate(self._rois(bottom)):
            b = self._batch_index(roi, N)
            for i in range(self.ph):
                for j in range(self.pw):
                    pts, _, _ = self._bin(roi, i, j, H, W, info)
                    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                    left, right = max(min(xs), 0.0), min(max(xs), W - 1.0)
                    top_, bottom_ = max(min(ys), 0.0), min(max(ys), H - 1.0)
                    best = np.zeros(C, dtype=np.float32)
                    kept = np.full((C, 2), -1.0)
                    h = top_
                    while h < bottom_ + 1:
                        w = left
                        while w < right + 1:
                            if _in_quad(w, h, pts):
                                v = self._read(x[b], w, h)
                                win = v > best
                                best = np.where(win, v, best)
                                kept[win] = (w, h)
                            w += 1.0
                        h += 1.0
                    out[r, :, i, j] = best
                    self._kept[r, :, i, j] = kept

    @staticmethod
    def _read(img, w, h):
        _, H, W = img.shape
        bx, by = int(np.floor(w)), int(np.floor(h))
        rx, ry = w - np.floor(w), h - np.floor(w)
        x0, y0 = min(max(bx, 0), W - 1), min(max(by, 0), H - 1)
        x1, y1 = max(min(bx + 1, W - 1), 0), max(min(by + 1, H - 1), 0)
        v = ((1 - rx) * (1 - ry) * img[:, y0, x0] + rx * (1 - ry) * img[:, y0, x1]
             + rx * ry * img[:, y1, x1] + (1 - rx) * ry * img[:, y1, x1])
        return v.astype(np.float32)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x = bottom[0].data
        N, C, H, W = x.shape
        info = bottom[2].data.reshape(-1)
        rois = self._rois(bottom)
        dx = np.zeros(x.shape)
        drois = np.zeros(rois.shape)
        Ph, Pw = self.ph, self.pw
        for r, roi in enumerate(rois):
            b = int(roi[0])
            for i in range(Ph):
                for j in range(Pw):
                    pts, _, _ = self._bin(roi, i, j, H, W, info)
                    P = [c for p in pts for c in p]
                    for c in range(C):
                        g = top[0].diff[r, c, i, j]
                        w, h = self._kept[r, c, i, j]
                        bx, by = int(np.floor(w)), int(np.floor(h))
                        rx, ry = w - bx, h - by
                        x0, y0 = min(max(bx, 0), W - 1), min(max(by, 0), H - 1)
                        x1, y1 = max(min(bx + 1, W - 1), 0), max(min(by + 1, H - 1), 0)
                        u = x[b, c]
                        for yy, xx, q in ((y0, x0, (1 - rx) * (1 - ry)), (y0, x1, rx * (1 - ry)),
                                          (y1, x1, rx * ry), (y1, x0, (1 - rx) * ry)):
                            dx[b, c, yy, xx] += q * g
                        dw = (-(1 - h + by) * u[y0, x0] + (1 - h + by) * u[y0, x1]
                              + (h - by) * u[y1, x1] - (h - by) * u[y1, x0])
                        dh = (-(1 - w + bx) * u[y0, x0] - (w - bx) * u[y0, x1]
                              + (w - bx) * u[y1, x1] + (1 - w + bx) * u[y1, x0])
                        lw, lh = dw * g, dh * g
                        trig_w = lw != 0 and any(
                            P[k] >= 0 and all(P[k] < P[m] for m in (0, 2, 4, 6) if m != k)
                            for k in (2, 4))
                        trig_h = False      # the kernel tests an even index against 5 and 7
                        hi, wi = i + 1 if trig_h else i, j + 1 if trig_w else j
                        a, bb = (Ph - hi) / Ph, hi / Ph
                        u_, v_ = (Pw - wi) / Pw, wi / Pw
                        drois[r, 1:9] += [a * u_ * lw, u_ * a * lh, a * v_ * lw, v_ * a * lh,
                                          bb * v_ * lw, v_ * bb * lh, bb * u_ * lw, u_ * bb * lh]
        bottom[0].diff[...] = dx
        if propagate_down[1]:
            bottom[1].diff[...] = drois.reshape(bottom[1].shape)
