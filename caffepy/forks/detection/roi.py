"""Region-of-interest pooling from the detection forks: ROIPooling (Fast/Faster R-CNN's
caffe-fast-rcnn) and PSROIPooling (R-FCN).

A ROI is a row ``[batch_index, x1, y1, x2, y2]`` in image coordinates; ``spatial_scale`` maps it
onto the feature map. ``round`` below is C's (halves away from zero).
"""
import numpy as np

from ...layers.base import Layer, register_layer


def _c_round(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def features_diff_wanted(propagate_down, bottom):
    """The ROI layers' backward guard: whether bottom 0 (the features) wants a gradient. No
    gradient flows to the rois (bottom 1): when the net asks for one (py-faster-rcnn's end-to-end
    nets, whose rois come from Python layers downstream of the RPN convolutions) their diff is
    zero, as the forks' kernels leave it (caffe-fast-rcnn's Backward_gpu reads only
    propagate_down[0]; R-FCN's zeroes the rois diff)."""
    if propagate_down[1]:
        bottom[1].diff[...] = 0
    return bool(propagate_down[0])


def roi_bins(dtype, start, end, pooled, limit):
    """Caffe ROIPooling's bins along one axis: [lo, hi) of each of ``pooled`` bins over the roi's
    ``start`` .. ``end`` (inclusive; at least 1 wide), bin size computed in ``dtype``, clipped to
    [0, limit)."""
    dt = np.dtype(dtype).type
    b = dt(max(end - start + 1, 1)) / dt(pooled)
    p = np.arange(pooled, dtype=dtype)
    lo = np.clip(np.floor(p * b).astype(int) + start, 0, limit)
    hi = np.clip(np.ceil((p + 1) * b).astype(int) + start, 0, limit)
    return lo, hi


class _ROIBase(Layer):
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def _check_rois(self, bottom):
        rois = bottom[1]
        if rois.count_range(1) != 5:
            raise self.needs("bottom[1] (rois) must be R x 5 [batch_index x1 y1 x2 y2], got %s"
                             % (rois.shape,), [(1, (max(rois.shape[:1] or (1,)), 5), None)])
        if bottom[0].num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got %s" % (bottom[0].shape,))
        return rois.data.reshape(-1, 5)

    def _batch_index(self, r, n):
        b = int(r[0])
        if not 0 <= b < n:
            raise self.error("roi batch index %d outside [0, %d)" % (b, n))
        return b

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("ROIPooling")
class ROIPoolingLayer(_ROIBase):
    """Max pooling of each ROI into a fixed pooled_h x pooled_w grid (Fast R-CNN).

    Arithmetic is in the layer's dtype, as Caffe's.
    ROI on the map: ``s = round(x1 * scale)``, ``e = round(x2 * scale)`` (same for y),
    size ``max(e - s + 1, 1)``, bin ``b = size / pooled``; bin p covers
    ``[floor(p b), ceil((p + 1) b)) + s`` clipped to the map; empty bins give 0.
    Backward routes each output's gradient to its argmax.

    prototxt: ``roi_pooling_param { pooled_h: 0 (required > 0), pooled_w: 0 (required > 0),
    spatial_scale: 1 pad_ratio: 0 }``; MSCNN's ``pad_ratio`` widens each ROI by pad_ratio times
    its width (height) + 1 on each side before the rounding. Bottoms: features (N x C x H x W), rois (R x 5).
    Top: R x C x pooled_h x pooled_w.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_pooling_param
        self.ph, self.pw, self.scale = int(p.pooled_h), int(p.pooled_w), float(p.spatial_scale)
        self.pad_ratio = float(getattr(p, "pad_ratio", 0.0))     # MSCNN's context padding
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("roi_pooling_param pooled_h and pooled_w must be > 0 (got %d, %d)"
                             % (self.ph, self.pw))

    def reshape(self, bottom, top):
        rois = self._check_rois(bottom)
        top[0].reshape(rois.shape[0], bottom[0].shape[1], self.ph, self.pw)

    def _bins(self, start, end, pooled, limit):
        return roi_bins(self.dtype, start, end, pooled, limit)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C, H, W = x.shape
        rois = bottom[1].data.reshape(-1, 5)
        out = top[0].data
        out[...] = 0
        self._argmax = np.full(out.shape, -1, dtype=np.int64)
        for r, roi in enumerate(rois):
            b = self._batch_index(roi, N)
            box = roi[1:]
            if self.pad_ratio:          # MSCNN: widen by pad_ratio of the roi's size each side
                pw, ph = ((box[2] - box[0] + 1) * self.pad_ratio, (box[3] - box[1] + 1) * self.pad_ratio)
                box = box + self.dtype.type(1) * np.array([-pw, -ph, pw, ph], dtype=self.dtype)
            x1, y1, x2, y2 = (int(v) for v in _c_round(box * self.scale))
            hs, he = self._bins(y1, y2, self.ph, H)
            ws, we = self._bins(x1, x2, self.pw, W)
            for i in range(self.ph):
                for j in range(self.pw):
                    if he[i] <= hs[i] or we[j] <= ws[j]:
                        continue
                    patch = x[b, :, hs[i]:he[i], ws[j]:we[j]].reshape(C, -1)
                    k = patch.argmax(axis=1)
                    out[r, :, i, j] = patch[np.arange(C), k]
                    bw = we[j] - ws[j]
                    self._argmax[r, :, i, j] = (hs[i] + k // bw) * W + ws[j] + k % bw

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        rois = bottom[1].data.reshape(-1, 5)
        diff = np.zeros((N, C, H * W), dtype=np.float64)
        valid = self._argmax >= 0
        r_idx, c_idx = np.nonzero(valid.any(axis=(2, 3)))
        b_of_roi = rois[:, 0].astype(np.int64)
        R = rois.shape[0]
        idx = np.broadcast_to(np.arange(R)[:, None, None, None], valid.shape)
        ch = np.broadcast_to(np.arange(C)[None, :, None, None], valid.shape)
        np.add.at(diff, (b_of_roi[idx[valid]], ch[valid], self._argmax[valid]),
                  top[0].diff[valid])
        bottom[0].diff[...] = diff.reshape(bottom[0].shape)


@register_layer("PSROIPooling")
class PSROIPoolingLayer(_ROIBase):
    """Position-sensitive ROI average pooling (R-FCN).

    ROI on the map: ``s = round(x1) * scale``, ``e = (round(x2) + 1) * scale``, size
    ``max(e - s, 0.1)``, bin ``b = size / group_size``; bin (i, j) averages input channel
    ``(c * group_size + i) * group_size + j`` over rows ``[floor(s + i b), ceil(s + (i + 1) b))``
    (and the same for columns) clipped to the map; empty bins give 0.

    prototxt: ``psroi_pooling_param { spatial_scale (required), output_dim (required),
    group_size (required) }``. Bottoms: features (N x output_dim*group_size^2 x H x W),
    rois (R x 5). Top: R x output_dim x group_size x group_size.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.psroi_pooling_param
        self.scale, self.dim, self.G = float(p.spatial_scale), int(p.output_dim), int(p.group_size)
        if self.dim <= 0 or self.G <= 0:
            raise self.error("psroi_pooling_param output_dim and group_size must be > 0 "
                             "(got %d, %d)" % (self.dim, self.G))

    def reshape(self, bottom, top):
        rois = self._check_rois(bottom)
        C = bottom[0].shape[1]
        if C != self.dim * self.G * self.G:
            raise self.error("input channels (%d) must equal output_dim * group_size^2 (%d)"
                             % (C, self.dim * self.G * self.G))
        top[0].reshape(rois.shape[0], self.dim, self.G, self.G)

    def _bins(self, roi, H, W):
        dt = self.dtype.type
        scale, G = dt(self.scale), dt(self.G)
        x1, y1, x2, y2 = _c_round(roi[1:].astype(self.dtype))
        sw, sh = x1 * scale, y1 * scale
        bw = max((x2 + 1) * scale - sw, dt(0.1)) / G
        bh = max((y2 + 1) * scale - sh, dt(0.1)) / G
        p = np.arange(self.G, dtype=self.dtype)
        hs = np.clip(np.floor(p * bh + sh).astype(int), 0, H)
        he = np.clip(np.ceil((p + 1) * bh + sh).astype(int), 0, H)
        ws = np.clip(np.floor(p * bw + sw).astype(int), 0, W)
        we = np.clip(np.ceil((p + 1) * bw + sw).astype(int), 0, W)
        return hs, he, ws, we

    def _walk(self, bottom):
        N, C, H, W = bottom[0].shape
        G = self.G
        for r, roi in enumerate(bottom[1].data.reshape(-1, 5)):
            b = self._batch_index(roi, N)
            hs, he, ws, we = self._bins(roi, H, W)
            for i in range(G):
                for j in range(G):
                    area = (he[i] - hs[i]) * (we[j] - ws[j])
                    if he[i] <= hs[i] or we[j] <= ws[j]:
                        continue
                    chans = slice(i * G + j, C, G * G)
                    yield r, b, i, j, chans, (slice(hs[i], he[i]), slice(ws[j], we[j])), area

    def forward_cpu(self, bottom, top):
        x, out = bottom[0].data, top[0].data
        out[...] = 0
        for r, b, i, j, chans, (hh, ww), area in self._walk(bottom):
            out[r, :, i, j] = x[b, chans, hh, ww].sum(axis=(1, 2)) / area

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        dx = bottom[0].diff
        dx[...] = 0
        dy = top[0].diff
        for r, b, i, j, chans, (hh, ww), area in self._walk(bottom):
            dx[b, chans, hh, ww] += (dy[r, :, i, j] / area)[:, None, None]
