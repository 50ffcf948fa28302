"""happynear/caffe-windows' ``PredictBox`` (src/caffe/layers/predict_box_layer.cpp), the MTCNN
proposal step of its Windows Caffe and its copies (Aliang-SEU/MTCNN-on-caffe-window,
Centerus/caffe-windows)."""
import numpy as np

from ...layers.base import Layer, register_layer


@register_layer("PredictBox")
class PredictBoxLayer(Layer):
    """Face boxes from an MTCNN P-Net score map (the fork's CPU code).

    Bottoms: scores (N x 2 x H x W; channel 1 is the face probability), optionally box
    regression (N x 4 x H x W), and optionally a third blob: 2 channels -- NMS mode, a cell is
    kept only when its score > that blob's channel 1 - 1e-5 (a max-pooled score map) -- or 3
    channels -- stitch mode, per cell (bias_x, bias_y, receptive field), cells whose field is 0
    skipped. The modes come from the bottoms, not from ``nms`` / ``output_vector`` (read by
    nothing).

    A cell (y, x) with score s > ``positive_thresh`` (and the mode's test) gives, with r =
    ``receptive_field`` (stitch: its own) and bias 0 outside stitch mode, box x0 = (x stride -
    bias_x) / 12 r, y0 = (y stride - bias_y) / 12 r, width = height = r, score s; regression
    (d0..d3) with ``bbreg_exp``: x0 += d0 r, y0 += d1 r, width *= exp(d2), height *= exp(d3);
    without: x0 += d1 r, y0 += d0 r, width += (d3 - d1) r, height += (d2 - d0) r. Other cells are
    all 0. Top 0: N x 5 x H x W (x0, y0, width, height, score). Top 1 (optional): with one image
    and k > 0 kept cells, 1 x k x 5 rows of the cells whose top-0 score > positive_thresh, in
    column-major cell order (x outer, y inner); otherwise N x 1 x 5 zeros. No backward (the
    fork's is NOT_IMPLEMENTED). The fork's CUDA forward differs (it also drops scores >= 1 +
    1e-6, takes NMS within 1e-6 and, in NMS mode, puts x0 = x stride without the / 12 r).

    prototxt: ``predict_box_param { stride: 2 receptive_field: 12 positive_thresh: 0.5 bbreg_exp:
    true nms: true output_vector: true }``.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.predict_box_param
        self.stride, self.rf = int(p.stride), int(p.receptive_field)
        self.thresh, self.bbreg_exp = float(p.positive_thresh), bool(p.bbreg_exp)
        self.regress = len(bottom) >= 2
        third = bottom[2].shape[1] if len(bottom) == 3 and bottom[2].num_axes > 1 else 0
        self.nms, self.stitch = third == 2, third == 3

    def reshape(self, bottom, top):
        s = bottom[0]
        if s.num_axes != 4 or s.shape[1] != 2:
            raise self.error("bottom 0 must be N x 2 x H x W scores, got %s" % (s.shape,))
        n, _, H, W = s.shape
        if self.regress and bottom[1].shape != (n, 4, H, W):
            raise self.error("bottom 1 must be %s box regression, got %s"
                             % ((n, 4, H, W), bottom[1].shape))
        if len(bottom) == 3 and (bottom[2].shape[0] != n or bottom[2].shape[2:] != (H, W)
                                 or not (self.nms or self.stitch)):
            raise self.error("bottom 2 must be N x 2 (NMS) or N x 3 (stitch) x %d x %d, got %s"
                             % (H, W, bottom[2].shape))
        top[0].reshape((n, 5, H, W))
        if len(top) == 2:
            top[1].reshape((n, 1, 5))

    def forward_cpu(self, bottom, top):
        score = bottom[0].data[:, 1]
        N, H, W = score.shape
        dt = self.dtype.type
        keep = score > dt(self.thresh)
        if self.nms:
            keep &= score > bottom[2].data[:, 1] - dt(1e-5)
        if self.stitch:
            st = bottom[2].data
            keep &= st[:, 2] != 0
            bx, by, r = st[:, 0], st[:, 1], st[:, 2]
        else:
            bx = by = np.zeros_like(score)
            r = np.full_like(score, dt(self.rf))
        ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        box = np.stack([(xs * self.stride - bx) / dt(12) * r, (ys * self.stride - by) / dt(12) * r,
                        r, r, score], axis=1).astype(self.dtype)
        if self.regress:
            d = bottom[1].data
            if self.bbreg_exp:
                box[:, 0] += d[:, 0] * r
                box[:, 1] += d[:, 1] * r
                box[:, 2] *= np.exp(d[:, 2])
                box[:, 3] *= np.exp(d[:, 3])
            else:
                box[:, 0] += d[:, 1] * r
                box[:, 1] += d[:, 0] * r
                box[:, 2] += (d[:, 3] - d[:, 1]) * r
                box[:, 3] += (d[:, 2] - d[:, 0]) * r
        top[0].data[...] = np.where(keep[:, None], box, 0)
        if len(top) == 2:
            out = top[0].data
            if N == 1 and keep.any():
                rows = out[0].transpose(2, 1, 0).reshape(-1, 5)     # x outer, y inner
                rows = rows[rows[:, 4] > dt(self.thresh)]
                top[1].reshape((1, rows.shape[0], 5))
                top[1].data[...] = rows
            else:
                top[1].reshape((N, 1, 5))
                top[1].data[...] = 0

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("has no backward (the fork's is NOT_IMPLEMENTED)")
