"""Multi-task Network Cascades' layers (MNC, daijifeng001/MNC's caffe, as GT9505/MONet carries it
in caffe/src/caffe/layers): InnerProductBlob, MaskPooling, ROIWarping, ROIMaskPooling, MaskResize.

Except ROIMaskPooling's forward, the fork's CPU functions are NOT_IMPLEMENTED: these classes
compute what its CUDA kernels (the ``.cu`` files) do. The bilinear sample of ROIWarping and
MaskResize at (y, x): nothing outside [-0.5, H - 0.5] x [-0.5, W - 0.5]; else y, x clamped to
>= 0, the low corner ``int(y)``, and a coordinate on or past the last row (column) taken as
that row with no high neighbour.
"""
import numpy as np

from ...layers.base import Layer, register_layer
from ...math import bilinear
from .roi import _c_round, _ROIBase, features_diff_wanted, roi_bins


def _corners(y, x, H, W):
    """The fork's bilinear sample: [(h, w, weight)] with distinct pixels (empty outside)."""
    if y < -0.5 or y > H - 0.5 or x < -0.5 or x > W - 0.5:
        return []
    hl, hh, wl, wh, y, x = bilinear.corners(max(y, 0.0), max(x, 0.0), H, W)
    ly, lx = y - hl, x - wl
    out = {}
    for h, fy in ((hl, 1 - ly), (hh, ly)):
        for w, fx in ((wl, 1 - lx), (wh, lx)):
            if (h, w) not in out:          # a clamped corner counts once, as in the backward
                out[(h, w)] = fy * fx
    return [(h, w, v) for (h, w), v in out.items()]


def _sample(img, y, x):
    """img (C, H, W) sampled at (y, x) with the fork's four-corner sum (a clamped corner adds all
    its weights); also the clamped (y, x), None outside."""
    C, H, W = img.shape
    if y < -0.5 or y > H - 0.5 or x < -0.5 or x > W - 0.5:
        return np.zeros(C, dtype=img.dtype), None
    at = bilinear.corners(max(y, 0.0), max(x, 0.0), H, W)
    return bilinear.read(img, at), at[4:]


@register_layer("InnerProductBlob")
class InnerProductBlobLayer(Layer):
    """Inner product with the weights in a bottom (inner_product_blob_layer.cu).

    y = X W^T with X the first M K values of bottom 0 as M x K (M = its axis 0, K = its axis 1)
    and W the first N K values of bottom 1 as N x K (N = its axis 0); top M x N x 1 x 1.
    ``inner_product_param.transpose`` is read by the fork and not used. The R-FCN / soft-NMS
    forks (bharatsingh430/soft-nms@b8e69bd, GT9505/MONet, the py-R-FCN-multiGPU forks) declare
    ``inner_product_blob_param { transpose }`` beside it, which their layer never reads
    (inner_product_blob_layer.cpp LayerSetUp reads inner_product_param): accepted, changing
    nothing. The fork's backward is NOT_IMPLEMENTED on CPU and GPU, so a fork net runs it only
    where no gradient reaches its bottoms; caffepy gives the exact gradient,
    dX = dY W and dW = dY^T X (the values past M K / N K get none).
    prototxt: no parameters of its own.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x, w = bottom
        if x.num_axes < 2 or w.num_axes < 1:
            raise self.error("bottoms must be M x K (x) and N x K (weights), got %s and %s"
                             % (x.shape, w.shape))
        self.M, self.K, self.N = x.shape[0], x.shape[1], w.shape[0]
        if x.count < self.M * self.K or w.count < self.N * self.K:
            raise self.error("bottom 1 %s holds fewer than N x K = %d x %d values"
                             % (w.shape, self.N, self.K))
        top[0].reshape((self.M, self.N, 1, 1))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1)[:self.M * self.K].reshape(self.M, self.K)
        w = bottom[1].data.reshape(-1)[:self.N * self.K].reshape(self.N, self.K)
        top[0].data.reshape(self.M, self.N)[...] = x @ w.T

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.M, self.N)
        mk, nk = self.M * self.K, self.N * self.K
        if propagate_down[0]:
            w = bottom[1].data.reshape(-1)[:nk].reshape(self.N, self.K)
            dx = bottom[0].diff.reshape(-1)
            dx[...] = 0
            dx[:mk] = (dy @ w).reshape(-1)
        if propagate_down[1]:
            x = bottom[0].data.reshape(-1)[:mk].reshape(self.M, self.K)
            dw = bottom[1].diff.reshape(-1)
            dw[...] = 0
            dw[:nk] = (dy.T @ x).reshape(-1)


@register_layer("MaskPooling")
class MaskPoolingLayer(Layer):
    """Feature maps times a one-channel mask (mask_pooling_layer.cu).

    y[n, c, h, w] = x[n, c, h, w] * m[n, 0, h, w]; dx = dy * m, dm = sum_c dy * x.
    Bottoms: x (N x C x H x W), m (N x 1 x H x W; the fork reads channel 0 only). Top: as x.
    prototxt: no parameters.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x, m = bottom
        if x.num_axes != 4 or m.num_axes != 4 or m.shape[0] != x.shape[0] \
                or m.shape[2:] != x.shape[2:]:
            raise self.error("bottoms must be N x C x H x W and N x 1 x H x W with the same N, H, "
                             "W, got %s and %s" % (x.shape, m.shape))
        top[0].reshape(x.shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data * bottom[1].data[:, :1]

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if propagate_down[0]:
            bottom[0].diff[...] = dy * bottom[1].data[:, :1]
        if propagate_down[1]:
            bottom[1].diff[:, :1] = (dy * bottom[0].data).sum(axis=1, keepdims=True)


@register_layer("MaskResize")
class MaskResizeLayer(Layer):
    """Bilinear resize to output_height x output_width (mask_resize_layer.cu).

    Output (h, w) samples the input at (h r_h, w r_w), r = input size / output size (module doc).
    Backward as the fork's: input pixel (h, w) takes weight * dy from the outputs ph in
    {floor(h / r_h), +1}, pw in {floor(w / r_w), +1} whose sample lies within 1 of it in both
    axes -- the exact gradient when shrinking; when enlarging more than 2x the outputs outside
    that pair give it nothing, as in the fork.

    prototxt: ``mask_resize_param { output_height: 0 output_width: 0 }`` (both required > 0).
    Bottom N x C x H x W; top N x C x output_height x output_width.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.mask_resize_param
        self.oh, self.ow = int(p.output_height), int(p.output_width)
        if self.oh <= 0 or self.ow <= 0:
            raise self.error("mask_resize_param output_height and output_width must be > 0 "
                             "(got %d, %d)" % (self.oh, self.ow))

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,))
        n, c = bottom[0].shape[:2]
        top[0].reshape((n, c, self.oh, self.ow))

    def _ratios(self, H, W):
        dt = self.dtype.type
        return dt(H) / dt(self.oh), dt(W) / dt(self.ow)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        rh, rw = self._ratios(H, W)
        img = x.reshape(N * C, H, W)
        out = top[0].data.reshape(N * C, self.oh, self.ow)
        for h in range(self.oh):
            for w in range(self.ow):
                out[:, h, w] = _sample(img, float(h * rh), float(w * rw))[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        N, C, H, W = bottom[0].shape
        rh, rw = self._ratios(H, W)
        dy = top[0].diff.reshape(N * C, self.oh, self.ow)
        dx = np.zeros((N * C, H, W))
        for ph in range(self.oh):
            for pw in range(self.ow):
                ih, iw = float(ph * rh), float(pw * rw)
                for h, w, wt in _corners(ih, iw, H, W):
                    if abs(iw - w) >= 1 or abs(ih - h) >= 1:
                        continue
                    if ph - int(np.floor(h / rh)) not in (0, 1) \
                            or pw - int(np.floor(w / rw)) not in (0, 1):
                        continue
                    dx[:, h, w] += wt * dy[:, ph, pw]
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)


def _roi_warp_grad(img, y, x, k, oh, ow, ph_n, pw_n):
    """The fork's get_coordinate_gradient for coordinate k (1..4) at the sample (y, x)."""
    C, H, W = img.shape
    ah, aw = int(y), int(x)
    if ah + 1 > H - 1 or aw + 1 > W - 1:
        return np.zeros(C)
    rh, rw = oh / ph_n, ow / pw_n
    v1, v2, v3, v4 = img[:, ah, aw], img[:, ah, aw + 1], img[:, ah + 1, aw], img[:, ah + 1, aw + 1]
    fy, fx = y - ah, x - aw
    dxc = -(1 - fy) * v1 + (1 - fy) * v2 - fy * v3 + fy * v4
    dyc = -(1 - fx) * v1 - fx * v2 + (1 - fx) * v3 + fx * v4
    dw = ((0.5 - rw) * (1 - fy) * v1 + (rw - 0.5) * (1 - fy) * v2 + (0.5 - rw) * fy * v3
          + (rw - 0.5) * fy * v4)
    dh = ((0.5 - rh) * (1 - fx) * v1 + (0.5 - rh) * fx * v2 + (rh - 0.5) * (1 - fx) * v3
          + (rh - 0.5) * fx * v4)
    return {1: 0.5 * dxc - dw, 2: 0.5 * dyc - dh, 3: 0.5 * dxc + dw, 4: 0.5 * dyc + dh}[k]


@register_layer("ROIWarping")
class ROIWarpingLayer(_ROIBase):
    """MNC's differentiable ROI warping (roi_warping_layer.cu).

    ROI on the map: s = round(x1 scale), e = round(x2 scale) (the same for y); bin b = max(e - s,
    0) / pooled; output (ph, pw) is the bilinear sample (module doc) at (s_y + ph b_h, s_x + pw
    b_w), 0 when it falls outside. Feature backward as the fork's: pixel (h, w) of a ROI with
    floor(s) <= w <= ceil(e) (same for h) takes weight * dy from the outputs in [floor((h - s -
    1) / b' - 1), ceil((h - s + 1) / b')) (b' = (e - s + 1) / pooled, clipped to the grid) whose
    sample has it as a corner; the window uses b', not the forward's b, so some samples give no
    gradient to pixels they read, as in the fork. ROI backward (the fork's hand-written
    coordinate gradient; the forward itself is piecewise constant in the ROI through the
    rounding): column k = 1..4 of ROI r gets scale * sum over c, ph, pw of g_k dy, with g_k the
    fork's derivatives of the sample with respect to x-centre, y-centre, width, height (from the
    four neighbours of the sample, 0 when a neighbour would be past the map) combined as 0.5 dxc
    -+ dw, 0.5 dyc -+ dh; column 0 gets 0. An empty sample (outside the map) gives 0 here; the
    fork's kernel reads memory before the map for it.

    prototxt: ``roi_warping_param { pooled_h pooled_w (required > 0) spatial_scale: 1 }``.
    Bottoms: features (N x C x H x W), rois (R x 5 [batch x1 y1 x2 y2]). Top R x C x pooled_h x
    pooled_w.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_warping_param
        self.ph, self.pw, self.scale = int(p.pooled_h), int(p.pooled_w), float(p.spatial_scale)
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("roi_warping_param pooled_h and pooled_w must be > 0 (got %d, %d)"
                             % (self.ph, self.pw))

    def reshape(self, bottom, top):
        rois = self._check_rois(bottom)
        top[0].reshape((rois.shape[0], bottom[0].shape[1], self.ph, self.pw))

    def _box(self, roi):
        dt = self.dtype.type
        return [float(v) for v in _c_round(roi[1:].astype(self.dtype) * dt(self.scale))]

    def allow_force_backward(self, bottom_index):
        return True

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N = x.shape[0]
        out = top[0].data
        self._args = {}
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = self._batch_index(roi, N)
            sx, sy, ex, ey = self._box(roi)
            bh, bw = max(ey - sy, 0.0) / self.ph, max(ex - sx, 0.0) / self.pw
            for i in range(self.ph):
                for j in range(self.pw):
                    out[r, :, i, j], arg = _sample(x[b], sy + i * bh, sx + j * bw)
                    self._args[(r, i, j)] = arg

    def backward_cpu(self, top, propagate_down, bottom):
        x = bottom[0].data
        N, C, H, W = x.shape
        rois = bottom[1].data.reshape(-1, 5)
        dy = top[0].diff
        if propagate_down[0]:
            dx = np.zeros(x.shape)
            for r, roi in enumerate(rois):
                b = int(roi[0])
                sx, sy, ex, ey = self._box(roi)
                bh, bw = max(ey - sy + 1, 1.0) / self.ph, max(ex - sx + 1, 1.0) / self.pw
                for i in range(self.ph):
                    for j in range(self.pw):
                        arg = self._args[(r, i, j)]
                        if arg is None:
                            continue
                        for h, w, wt in _corners(arg[0], arg[1], H, W):
                            if not (np.floor(sx) <= w <= np.ceil(ex)
                                    and np.floor(sy) <= h <= np.ceil(ey)):
                                continue
                            lo_h = min(max(int(np.floor((h - sy - 1) / bh - 1)), 0), self.ph)
                            hi_h = min(max(int(np.ceil((h - sy + 1) / bh)), 0), self.ph)
                            lo_w = min(max(int(np.floor((w - sx - 1) / bw - 1)), 0), self.pw)
                            hi_w = min(max(int(np.ceil((w - sx + 1) / bw)), 0), self.pw)
                            if lo_h <= i < hi_h and lo_w <= j < hi_w:
                                dx[b, :, h, w] += wt * dy[r, :, i, j]
            bottom[0].diff[...] = dx
        if propagate_down[1]:
            drois = np.zeros(rois.shape)
            for r, roi in enumerate(rois):
                b = int(roi[0])
                sx, sy, ex, ey = self._box(roi)
                bh = max(ey - sy + 1, 1.0) / self.ph
                bw = max(ex - sx + 1, 1.0) / self.pw
                for i in range(self.ph):
                    for j in range(self.pw):
                        arg = self._args[(r, i, j)]
                        if arg is None:
                            continue
                        oh, ow = (arg[0] - sy) / bh, (arg[1] - sx) / bw
                        for k in range(1, 5):
                            g = _roi_warp_grad(x[b], arg[0], arg[1], k, oh, ow, self.ph, self.pw)
                            drois[r, k] += self.scale * float(np.dot(g, dy[r, :, i, j]))
            bottom[1].diff[...] = drois.reshape(bottom[1].shape)


@register_layer("ROIMaskPooling")
class ROIMaskPoolingLayer(_ROIBase):
    """ROI max pooling over a rescaled box with its centre masked out (roi_mask_pooling_layer.cu;
    the fork's CPU forward reads the ROI as [x1 x2 y1 y2] and its CPU backward is
    NOT_IMPLEMENTED, so the CUDA kernels are the reference).

    ROI [b x1 y1 x2 y2], centre (xc, yc), size (w, h) = (x2 - x1, y2 - y1). Pooled box: xc -+ w
    roi_scale / 2 (same for y), then ``half_part`` 1 / 2 / 3 / 4 keeps its left / right / top /
    bottom half (0: all); mask box: xc -+ w mask_scale / 2. Both are mapped with round(v scale +
    shift). Bins as ROIPooling's (size max(e - s + 1, 1) / pooled, floor / ceil, clipped); when
    mask_scale > 0 a pixel inside the mask box compares as 0, and whenever the compared value
    beats the running maximum the pixel's true value becomes the maximum (as the kernel does, so
    a masked pixel can set the output to its unmasked value). Empty bins give 0. Backward: each
    output's dy goes to its argmax; no gradient to the rois.

    prototxt: ``roi_mask_pooling_param { pooled_h pooled_w (required > 0) spatial_scale: 1
    spatial_shift: 0 half_part: 0 roi_scale: 1 mask_scale: 0 }``. Bottoms: features N x C x H x
    W, rois R x 5. Top R x C x pooled_h x pooled_w.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_mask_pooling_param
        self.ph, self.pw = int(p.pooled_h), int(p.pooled_w)
        self.scale, self.shift = float(p.spatial_scale), float(p.spatial_shift)
        self.half, self.roi_scale, self.mask_scale = (int(p.half_part), float(p.roi_scale),
                                                      float(p.mask_scale))
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("roi_mask_pooling_param pooled_h and pooled_w must be > 0 (got %d, "
                             "%d)" % (self.ph, self.pw))

    def reshape(self, bottom, top):
        rois = self._check_rois(bottom)
        top[0].reshape((rois.shape[0], bottom[0].shape[1], self.ph, self.pw))

    def _boxes(self, roi):
        dt = self.dtype.type
        x1, y1, x2, y2 = roi[1:].astype(self.dtype)
        xc, yc, w, h = (x1 + x2) / dt(2), (y1 + y2) / dt(2), x2 - x1, y2 - y1
        rs, ms = dt(self.roi_scale), dt(self.mask_scale)
        box = [xc - w * rs / 2, yc - h * rs / 2, xc + w * rs / 2, yc + h * rs / 2]
        if self.half in (1, 2, 3, 4):
            box[{1: 2, 2: 0, 3: 3, 4: 1}[self.half]] = xc if self.half <= 2 else yc
        mask = [xc - w * ms / 2, yc - h * ms / 2, xc + w * ms / 2, yc + h * ms / 2]

        def fmap(v):
            return [int(c) for c in _c_round(np.array(v, dtype=self.dtype) * dt(self.scale)
                                             + dt(self.shift))]
        return fmap(box), fmap(mask)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        out = top[0].data
        self._argmax = np.full(out.shape, -1, dtype=np.int64)
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = self._batch_index(roi, N)
            (sx, sy, ex, ey), (mx1, my1, mx2, my2) = self._boxes(roi)
            hs, he = roi_bins(self.dtype, sy, ey, self.ph, H)
            ws, we = roi_bins(self.dtype, sx, ex, self.pw, W)
            for i in range(self.ph):
                for j in range(self.pw):
                    empty = he[i] <= hs[i] or we[j] <= ws[j]
                    best = np.full(C, 0.0 if empty else -np.finfo(np.float32).max)
                    arg = np.full(C, -1, dtype=np.int64)
                    for h in range(hs[i], he[i]):
                        for w in range(ws[j], we[j]):
                            v = x[b, :, h, w]
                            cmp = np.zeros_like(v) if (self.mask_scale > 0 and mx1 <= w <= mx2
                                                       and my1 <= h <= my2) else v
                            win = cmp > best
                            best = np.where(win, v, best)
                            arg[win] = h * W + w
                    out[r, :, i, j] = best
                    self._argmax[r, :, i, j] = arg

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        diff = np.zeros((N, C, H * W))
        rois = bottom[1].data.reshape(-1, 5)
        for r in range(rois.shape[0]):
            b = int(rois[r, 0])
            a = self._argmax[r].reshape(C, -1)
            d = top[0].diff[r].reshape(C, -1)
            c_idx, k = np.nonzero(a >= 0)
            np.add.at(diff[b], (c_idx, a[c_idx, k]), d[c_idx, k])
        bottom[0].diff[...] = diff.reshape(bottom[0].shape)

