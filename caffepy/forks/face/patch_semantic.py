"""PatchSemantic of JiajianZeng/ContextWithStructure (commit 2508ceb4): the feature-map
derivatives (Fx, Fy, Ft) around each landmark that its PerceptualLoss weighs the residuals with.

The reference is the fork's src/caffe/layers/patch_semantic_layer.cu (host code; its
Forward_cpu only stops with "not implemented") with the SpatialOperation and BoundingBox classes
of include/caffe/deep_landmark_layers.hpp.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from .context_structure import _points, _zero_diffs


def _spatial_operations(layer, params):
    """Each operation's receptive field and accumulated stride (w, h), each following the one
    before it, and its weight and used flag."""
    ops, field, accum = [], None, None
    for i, sp in enumerate(params):
        has_size = sp.HasField("kernel_size")
        if has_size == (sp.HasField("kernel_w") and sp.HasField("kernel_h")):
            raise layer.error("spatial_operation_param %d: the kernel is kernel_size OR "
                              "kernel_w and kernel_h" % i)
        one = sp.HasField("stride") and not sp.HasField("stride_w") and not sp.HasField("stride_h")
        two = not sp.HasField("stride") and sp.HasField("stride_w") and sp.HasField("stride_h")
        if not (one or two):
            raise layer.error("spatial_operation_param %d: the stride is stride OR stride_w and "
                              "stride_h (one of them given)" % i)
        kernel = (sp.kernel_size,) * 2 if has_size else (sp.kernel_w, sp.kernel_h)
        stride = (sp.stride,) * 2 if one else (sp.stride_w, sp.stride_h)
        if field is None:
            field, accum = tuple(kernel), tuple(stride)
        else:
            field = tuple(f + (k - 1) * a for f, k, a in zip(field, kernel, accum))
            accum = tuple(a * s for a, s in zip(accum, stride))
        ops.append({"field": field, "accum": accum, "weight": float(sp.weight),
                    "used": bool(sp.used)})
    return ops


@register_layer("PatchSemantic")
class PatchSemanticLayer(Layer):
    """For landmark l of image b, from each used feature map F (C x H x W) of the ground-truth
    landmark g and the predicted landmark p:

    fiducial cell: the landmark (x, y), scaled to pixels, ceil(x image_w), ceil(y image_h),
      clipped to the image, is the centre of a patch_w x patch_h patch (clipped); cell (h, w)
      of F sees the box [w a_w, w a_w + r_w] x [h a_h, h a_h + r_h] (clipped), r the
      operation's receptive field and a its accumulated stride (each spatial_operation_param
      following the one before it: r_i = r_{i-1} + (k_i - 1) a_{i-1}, a_i = a_{i-1} s_i, the
      first r = k, a = s). The cell whose box has the highest IoU with the patch wins, ties
      to the box centre nearest the landmark, then to the first cell in row-major order;
      (0, 0) when no box overlaps the patch.
    neighbours: right = w + 1 < W, down = h + 1 < H; a 2 x 2 block of cells from (h, w)
      towards the right / down where there is room, else left / up:
      Dx = sum over the block's two rows of F[., w_right] - F[., w_left],
      Dy = sum over its two columns of F[h_down, .] - F[h_up, .].
    Fx = 1/C sum_c (Dx_c(g) + Dx_c(p)) / 4,  Fy likewise with Dy;
    Ft = 1/C sum_c (S_c(p) - S_c(g)) / 4, S the sum of the block's four cells (its signs: +1
      right / down, else -1; where the two signs differ and neither cell is in column (row) 0,
      both take -1).
    The top holds (sum_ops weight Fx, sum_ops weight Fy, sum_ops weight Ft) per landmark. No
    gradient: the fork's backward writes none. ``cross_channel: MAX`` is read but, as in the
    fork, averages like AVE.

    prototxt: ``patch_semantic_param { num_landmark: 5 cross_channel: AVE image_w image_h patch_w
    patch_h spatial_operation_param { name kernel_size | kernel_w kernel_h stride | stride_w
    stride_h weight: 1 used: false } ... }``, one spatial_operation_param per convolution or
    pooling of the feature net, in order. Bottoms: ground-truth landmarks (N, 2L...), predicted
    landmarks (N, 2L...), then one feature map (N, C, H, W) per used operation; top: (N, L, 3, 1).
    """
    min_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.patch_semantic_param
        self.n_points = int(p.num_landmark)
        self.image = (int(p.image_w), int(p.image_h))
        self.patch = (int(p.patch_w), int(p.patch_h))
        ops = _spatial_operations(self, p.spatial_operation_param)
        self.used = [op for op in ops if op["used"]]
        if len(bottom) - 2 != len(self.used):
            raise self.error("%d feature bottoms for %d used spatial operations (each used one "
                             "takes a bottom)" % (len(bottom) - 2, len(self.used)))

    def reshape(self, bottom, top):
        _points(self, bottom, 0, self.n_points, "the ground-truth landmarks")
        _points(self, bottom, 1, self.n_points, "the predicted landmarks")
        top[0].reshape((bottom[0].shape[0], self.n_points, 3, 1))

    def _fiducial(self, landmark, op, grid):
        dt = grid["x1"].dtype.type
        img_w, img_h = dt(self.image[0]), dt(self.image[1])
        lx = np.clip(np.ceil(dt(landmark[0]) * img_w), 0, img_w)
        ly = np.clip(np.ceil(dt(landmark[1]) * img_h), 0, img_h)
        half_w, half_h = dt(self.patch[0]) / dt(2), dt(self.patch[1]) / dt(2)
        x1, x2 = np.clip(lx - half_w, 0, img_w), np.clip(lx + half_w, 0, img_w)
        y1, y2 = np.clip(ly - half_h, 0, img_h), np.clip(ly + half_h, 0, img_h)
        ow = np.minimum(grid["x2"], x2) - np.maximum(grid["x1"], x1)
        oh = np.minimum(grid["y2"], y2) - np.maximum(grid["y1"], y1)
        inter = np.where((oh < 0)[:, None] | (ow < 0)[None, :], dt(0), oh[:, None] * ow[None, :])
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (grid["area"] + (x2 - x1) * (y2 - y1) - inter)
        hit = iou > 0
        if not hit.any():
            return 0, 0
        best = hit & (iou == iou[hit].max())
        half_rw, half_rh = dt(op["field"][0]) / dt(2), dt(op["field"][1]) / dt(2)
        dist = (np.square(grid["y1"] + half_rh - ly)[:, None]
                + np.square(grid["x1"] + half_rw - lx)[None, :])
        h, w = np.unravel_index(np.argmin(np.where(best, dist, np.inf)), best.shape)
        return int(h), int(w)

    @staticmethod
    def _grid(op, shape, dt, image):
        """The clipped receptive boxes of an H x W map's cells."""
        (aw, ah), (rw, rh) = op["accum"], op["field"]
        img_w, img_h = dt(image[0]), dt(image[1])
        xs, ys = np.arange(shape[1], dtype=dt) * aw, np.arange(shape[0], dtype=dt) * ah
        g = {"x1": np.clip(xs, 0, img_w), "x2": np.clip(xs + rw, 0, img_w),
             "y1": np.clip(ys, 0, img_h), "y2": np.clip(ys + rh, 0, img_h)}
        g["area"] = (g["y2"] - g["y1"])[:, None] * (g["x2"] - g["x1"])[None, :]
        return g

    @staticmethod
    def _block_diffs(f, h, w):
        H, W = f.shape[1:]
        right, down = w + 1 < W, h + 1 < H
        wl, wr = (w, w + 1) if right else (w - 1, w)
        hu, hd = (h, h + 1) if down else (h - 1, h)
        h2, w2 = (h + 1 if down else h - 1), (w + 1 if right else w - 1)
        dx = f[:, h, wr] - f[:, h, wl] + f[:, h2, wr] - f[:, h2, wl]
        dy = f[:, hd, w] - f[:, hu, w] + f[:, hd, w2] - f[:, hu, w2]
        return dx, dy, (1 if down else -1), (1 if right else -1)

    def _derivatives(self, f, gt, pred, op, grid):
        hg, wg = self._fiducial(gt, op, grid)
        hp, wp = self._fiducial(pred, op, grid)
        dxg, dyg, shg, swg = self._block_diffs(f, hg, wg)
        dxp, dyp, shp, swp = self._block_diffs(f, hp, wp)
        c = f.shape[0]
        fx = (0.25 * (dxg + dxp)).sum() / c
        fy = (0.25 * (dyg + dyp)).sum() / c
        if swg != swp and wg != 0 and wp != 0:
            swg = swp = -1
        if shg != shp and hg != 0 and hp != 0:
            shg = shp = -1

        def block(h, w, sh, sw):
            return f[:, h, w] + f[:, h, w + sw] + f[:, h + sh, w] + f[:, h + sh, w + sw]
        ft = (0.25 * (block(hp, wp, shp, swp) - block(hg, wg, shg, swg))).sum() / c
        return fx, fy, ft

    def forward_cpu(self, bottom, top):
        gt = _points(self, bottom, 0, self.n_points, "the ground-truth landmarks")
        pred = _points(self, bottom, 1, self.n_points, "the predicted landmarks")
        n = gt.shape[0]
        maps, grids = [], []
        for j, op in enumerate(self.used):
            b = bottom[j + 2]
            f = b.data.reshape(b.num, b.channels, b.height, b.width)
            if f.shape[0] < n or f.shape[2] < 2 or f.shape[3] < 2:
                raise self.error("feature bottom %d has shape %s: it needs %d images of at "
                                 "least 2 x 2 cells (the fork reads 2 x 2 blocks of them)"
                                 % (j + 2, tuple(b.shape), n), ShapeError)
            maps.append(f)
            grids.append(self._grid(op, f.shape[2:], f.dtype.type, self.image))
        out = top[0].data.reshape(n, self.n_points, 3)
        for b in range(n):
            for lm in range(self.n_points):
                acc = np.zeros(3)
                for op, f, grid in zip(self.used, maps, grids):
                    acc += op["weight"] * np.array(
                        self._derivatives(f[b], gt[b, lm], pred[b, lm], op, grid))
                out[b, lm] = acc

    def backward_cpu(self, top, propagate_down, bottom):
        _zero_diffs(propagate_down, bottom)
