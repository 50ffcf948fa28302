"""The ``ROIAlign`` of nnop/caffe (branch roialign, commit 023b8b31,
src/caffe/layers/roi_align_layer.cpp / .cu), which nnop/mtnet's detection nets use: per bin,
the maximum of a few bilinear samples. Taken when the layer sets ``roi_align_param``
(Cascade R-CNN's ROIAlign, the default, reads ``roi_pooling_param``).
Other forks declare ``roi_align_param`` too (GT9505/MONet, XiangChenchao/DDPN, xhzdeng/crpn,
dengshuo/D-M-F-ConvNets, synopsys-caffe, ...) and their layers may compute another function
(an average of samples, another sampling grid); the prototxt does not tell them apart, so each
such layer logs one WARNING naming the function computed here."""
import logging
import math

import numpy as np

from ...layers.base import Layer, register_variant
from ...math import kernels
from .roi import features_diff_wanted

_FLT_MAX = float(np.finfo(np.float32).max)
_log = logging.getLogger(__name__)


def _samples(start, end):
    """The fork's sample positions in [start, end]: stride (end - start) / 3 from start + stride,
    while at most end - stride + 0.01, stepping by max(stride, 0.01)."""
    stride = (end - start) / 3.0
    out, v = [], start + stride
    while v <= end - stride + 0.01:
        out.append(v)
        v += max(stride, 0.01)
    return out


def _bins(start, size, pooled, limit):
    """(start, end) of each bin along one axis: size / pooled wide from ``start``, cut to
    [0, limit]."""
    step = size / float(pooled)
    return [(min(max(i * step + start, 0.0), float(limit)),
             min(max((i + 1) * step + start, 0.0), float(limit))) for i in range(pooled)]


def _taps(h, w, H, W):
    """The four neighbours of (h, w) as the fork picks them: the low ones floor() clipped to the
    map, the high ones one more (not clipped), and their bilinear weights."""
    hl = min(max(int(math.floor(h)), 0), H - 1)
    wl = min(max(int(math.floor(w)), 0), W - 1)
    a, b = h - hl, w - wl
    return ((hl, wl, (1 - a) * (1 - b)), (hl, wl + 1, (1 - a) * b),
            (hl + 1, wl, a * (1 - b)), (hl + 1, wl + 1, a * b))


@register_variant("ROIAlign", lambda lp: lp.HasField("roi_align_param"))
class NnopROIAlignLayer(Layer):
    """nnop/caffe's ROIAlign. For a roi (b, x1, y1, x2, y2) with scale s = ``spatial_scale``:

        x0 = x1 s, y0 = y1 s;   w = max(trunc(x2 s - x0 + 1), 1), h likewise
        bin (i, j): [y0 + i h / PH, y0 + (i + 1) h / PH] x [x0 + j w / PW, ...], each end cut
        to [0, H] (to [0, W] for x)

    In each bin [hs, he] x [ws, we], with d = (he - hs) / 3, the samples along y are
    hs + d, hs + d + max(d, 0.01), ... while <= he - d + 0.01 (two for bins wider than 0.03);
    x alike. Each sample (y, x) is bilinear with y_lo = clip(floor(y), 0, H - 1), y_hi = y_lo + 1,
    weights y - y_lo and 1 - that (x alike). The top is the largest sample, taken in y-major
    order, the first of equal ones; a bin with an empty clipped area starts from 0 instead
    (it is 0 unless a sample is larger; a full one starts from -FLT_MAX). A roi whose batch
    index is negative gives 0. y_hi = H or x_hi = W is not clipped: the fork reads the blob's
    memory there (the next row, or the next channel's first row); so here, and past the blob's
    end the read is 0.

    Backward is the fork's (its CPU backward is NOT_IMPLEMENTED; the GPU kernel): the bin
    geometry is rebuilt from the roi coordinates truncated to integers after scaling,
    trunc(x1 s) etc., the winning sample (by its index) is placed there, and its top diff
    goes with the bilinear weights to those of its neighbours inside the map. For rois whose
    scaled corners are whole non-negative numbers this is the derivative of the forward (but
    for the neighbours read outside the plane, which get nothing); otherwise it is not.

    prototxt: ``roi_align_param { pooled_h pooled_w (required > 0) spatial_scale: 1 }``.
    Bottoms: features (N, C, H, W), rois (R, 5) (or R x 5 x 1 x 1). Top: (R, C, pooled_h,
    pooled_w). The rois get no gradient.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.roi_align_param
        self.ph, self.pw, self.scale = int(p.pooled_h), int(p.pooled_w), float(p.spatial_scale)
        if self.ph <= 0 or self.pw <= 0:
            raise self.error("roi_align_param pooled_h and pooled_w must be > 0")
        _log.warning("layer '%s' (ROIAlign): roi_align_param is computed as nnop/caffe's ROIAlign "
                     "(each bin the largest of its bilinear samples); other forks that declare "
                     "roi_align_param may compute another function", self.name)

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("features must be N x C x H x W, got %s" % (bottom[0].shape,))
        if bottom[1].num_axes < 1 or bottom[1].count_range(1) != 5:
            raise self.error("rois must be R x 5, got %s" % (bottom[1].shape,))
        top[0].reshape((bottom[1].shape[0], bottom[0].shape[1], self.ph, self.pw))

    def _rois(self, bottom):
        return bottom[1].data.reshape(-1, 5).astype(np.float64)

    def forward_cpu(self, bottom, top):
        N, C, H, W = bottom[0].shape
        k, planes = kernels.get(), None
        flat = np.ascontiguousarray(bottom[0].data).reshape(-1) if k is not None else None
        out = np.zeros(top[0].shape)
        self._argmax = np.full(top[0].shape, -1, dtype=np.int64)
        for r, roi in enumerate(self._rois(bottom)):
            b = int(roi[0])
            if b < 0:
                self._argmax[r] = 0
                continue
            if b >= N:
                raise self.error("roi %d names image %d of %d" % (r, b, N))
            x0, y0, x1, y1 = (v * self.scale for v in roi[1:])
            rw, rh = max(int(x1 - x0 + 1), 1), max(int(y1 - y0 + 1), 1)
            points, spans = [], []
            for hs, he in _bins(y0, rh, self.ph, H):
                for ws, we in _bins(x0, rw, self.pw, W):
                    first = len(points)
                    points.extend((h, w) for h in _samples(hs, he) for w in _samples(ws, we))
                    spans.append((first, len(points), he <= hs or we <= ws))
            if k is not None:                    # the same arithmetic, compiled
                bins = np.empty((C, len(spans)))
                won = np.empty((C, len(spans)), dtype=np.int64)
                k.nnop_roi_align_bins(flat, b * C * H * W, C, H, W,
                                      np.array(points, dtype=np.float64).reshape(-1, 2),
                                      np.array(spans, dtype=np.int64), -_FLT_MAX, bins, won)
                out[r] = bins.reshape(C, self.ph, self.pw)
                self._argmax[r] = won.reshape(C, self.ph, self.pw)
                continue
            if planes is None:
                planes = self._planes(bottom[0].data)
            vals = self._bilinear(planes, b * C, C, np.array(points), H, W)   # (points, C)
            counts = {hi - lo for lo, hi, _ in spans}
            if len(counts) == 1:                 # every bin has as many samples: all at once
                per = vals.reshape(len(spans), counts.pop(), C)
                best = np.argmax(per, axis=1)                             # (bins, C)
                top_val = np.take_along_axis(per, best[:, None, :], axis=1)[:, 0, :]
            else:
                best = np.array([np.argmax(vals[lo:hi], axis=0) for lo, hi, _ in spans])
                top_val = np.array([vals[lo + bb, np.arange(C)]
                                    for (lo, _, _), bb in zip(spans, best)])
            start = np.array([0.0 if empty else -_FLT_MAX for _, _, empty in spans])[:, None]
            won = top_val > start
            out[r] = np.where(won, top_val, start).T.reshape(C, self.ph, self.pw)
            self._argmax[r] = np.where(won, best + 1, -1).T.reshape(C, self.ph, self.pw)
        top[0].data[...] = out

    @staticmethod
    def _planes(x):
        """The blob as the fork's reads see its memory, channels last: (H W, N C + 1) float64,
        column k the plane k = n C + c and the last column zeros (the reads past the blob's
        end), so a read at offset o of plane k >= H W (an unclipped high neighbour on the last
        row) is the next plane's offset o - H W."""
        N, C, H, W = x.shape
        planes = np.zeros((H * W, N * C + 1))
        planes[:, :N * C] = x.reshape(N * C, H * W).T
        return planes

    @staticmethod
    def _bilinear(planes, first, C, points, H, W):
        """Samples at ``points`` (P, 2) of the C planes from plane ``first`` (an image's), read
        as the fork reads its memory (:meth:`_planes`): (P, C), each the sum of its four taps'
        weighted values in the order (low, low), (low, high), (high, low), (high, high)."""
        h, w = points[:, 0], points[:, 1]
        hl = np.clip(np.floor(h).astype(np.int64), 0, H - 1)
        wl = np.clip(np.floor(w).astype(np.int64), 0, W - 1)
        a, b = (h - hl)[:, None], (w - wl)[:, None]
        here, past = planes[:, first:first + C], planes[:, first + 1:first + 1 + C]
        v = np.zeros((len(points), C))
        for dh, dw, wt in ((0, 0, (1 - a) * (1 - b)), (0, 1, (1 - a) * b),
                           (1, 0, a * (1 - b)), (1, 1, a * b)):
            offset = (hl + dh) * W + wl + dw
            over = offset >= H * W
            vals = here.take(np.where(over, 0, offset), axis=0)
            if over.any():
                vals[over] = past.take(offset[over] - H * W, axis=0)
            v += wt * vals
        return v

    def backward_cpu(self, top, propagate_down, bottom):
        if not features_diff_wanted(propagate_down, bottom):
            return
        N, C, H, W = bottom[0].shape
        dx = np.zeros((N, C, H, W))
        for r, roi in enumerate(self._rois(bottom)):
            b = int(roi[0])
            if not 0 <= b < N:
                continue
            x0, y0, x1, y1 = (int(v * self.scale) for v in roi[1:])
            rw, rh = max(x1 - x0 + 1, 1), max(y1 - y0 + 1, 1)
            for i, (hs, he) in enumerate(_bins(y0, rh, self.ph, H)):
                for j, (ws, we) in enumerate(_bins(x0, rw, self.pw, W)):
                    points = [(h, w) for h in _samples(hs, he) for w in _samples(ws, we)]
                    for c in range(C):
                        k = int(self._argmax[r, c, i, j])
                        if not 1 <= k <= len(points):
                            continue
                        g = top[0].diff[r, c, i, j]
                        for hi, wi, wt in _taps(points[k - 1][0], points[k - 1][1], H, W):
                            if (hi < H and wi < W and x0 - 1 <= wi <= x1 + 1
                                    and y0 - 1 <= hi <= y1 + 1 and ws - 1 < wi < we + 1
                                    and hs - 1 < hi < he + 1):
                                dx[b, c, hi, wi] += g * wt
        bottom[0].diff[...] = dx
