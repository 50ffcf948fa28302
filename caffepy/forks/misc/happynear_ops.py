"""Small layers of happynear/caffe-windows (also in Centerus/caffe-windows and
Aliang-SEU/MTCNN-on-caffe-window): Transformer (an affine spatial transformer,
src/caffe/layers/transformer_layer.cpp / .cu), SubRegion (crops around points,
subregion_layer.cpp / .cu), Pairwise (all pairs of two row sets, pairwise_layer.cpp), Gram
(gram_layer.cpp), Cosine (cosine_layer.cpp / .cu) and Hotspot (Gaussian heat maps at points,
hotspot_layer.cpp).

Where the fork's CPU and GPU code differ, the docstring says which one caffepy follows.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, NeuronLayer, fork_param, register_layer


def transformer_target(h, w):
    """The fork's 3 x HW target grid, built with its index ``i * H + j`` (not ``i * W + j``):
    written in the fork's order, later writes win; writes past the 3 HW values are dropped."""
    hw = h * w
    t = np.zeros(3 * hw + h * h + w)
    for i in range(h):
        for j in range(w):
            k = i * h + j
            t[k], t[k + hw], t[k + 2 * hw] = i / h * 2 - 1, j / w * 2 - 1, 1
    return t[:3 * hw].reshape(3, hw)


@register_layer("Transformer")
class TransformerLayer(Layer):
    """Affine warp of U (N x C x H x W) by theta (N x 6, a 2 x 3 matrix per item): the source
    grid S = theta T (T: :func:`transformer_target`, rows (2 i / H - 1, 2 j / W - 1, 1) for
    square maps) gives for output (i, j) the row x = S0 H / 2 + H / 2 and column
    y = S1 W / 2 + W / 2; where 0 <= x <= H - 1 and 0 <= y <= W - 1 the output is the bilinear
    sum over xx in floor(x)..ceil(x), yy in floor(y)..ceil(y) of U[xx, yy] (1 - |x - xx|)
    (1 - |y - yy|), else 0. Backward as the fork's CPU code: dU by the same weights;
    dS0 = sum dY U sign(xx - x) (1 - |y - yy|) H / 2 (likewise dS1), dtheta = dS T^T. For maps
    taller than wide the fork's grid writes also land past its buffer; the grid is what its
    buffer holds (those writes are dropped). The GPU forward's snapping of coordinates within
    1e-4 outside the map onto its border is not done.
    Bottoms: U, theta. Top: N x C x H x W.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        u, theta = bottom
        if u.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got %s" % (u.shape,), ShapeError)
        if theta.num_axes < 2 or theta.shape[1] != 6 or theta.count != 6 * u.shape[0]:
            raise self.error("theta must be N x 6, got %s" % (theta.shape,), ShapeError)
        h, w = u.shape[2:]
        if getattr(self, "_hw", None) != (h, w):
            self._hw, self.target = (h, w), transformer_target(h, w)
        top[0].reshape(u.shape)

    def _taps(self, bottom):
        n, _, h, w = bottom[0].shape
        src = bottom[1].data.reshape(n, 2, 3) @ self.target        # N x 2 x HW
        x, y = src[:, 0] * h / 2 + h / 2.0, src[:, 1] * w / 2 + w / 2.0
        inside = (x >= 0) & (x <= h - 1) & (y >= 0) & (y <= w - 1)
        # the fork loops xx = floor(x)..ceil(x): one term where x is an integer
        fx, cx, fy, cy = np.floor(x), np.ceil(x), np.floor(y), np.ceil(y)
        out = [(fx, fy, inside), (cx, fy, inside & (cx != fx)), (fx, cy, inside & (cy != fy)),
               (cx, cy, inside & (cx != fx) & (cy != fy))]
        return x, y, out

    def forward_cpu(self, bottom, top):
        u = bottom[0].data
        n, c, h, w = u.shape
        x, y, taps = self._taps(bottom)
        out = np.zeros((n, c, h * w))
        flat = u.reshape(n, c, h * w)
        for xx, yy, use in taps:
            wgt = np.where(use, (1 - np.abs(x - xx)) * (1 - np.abs(y - yy)), 0)
            idx = np.where(use, xx * w + yy, 0).astype(np.int64)
            out += np.take_along_axis(flat, idx[:, None, :].repeat(c, 1), 2) * wgt[:, None]
        top[0].data[...] = out.reshape(u.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        u = bottom[0].data
        n, c, h, w = u.shape
        x, y, taps = self._taps(bottom)
        dy = top[0].diff.reshape(n, c, h * w)
        flat = u.reshape(n, c, h * w)
        du = np.zeros((n, c, h * w))
        ds = np.zeros((n, 2, h * w))
        for xx, yy, use in taps:
            wx, wy = 1 - np.abs(x - xx), 1 - np.abs(y - yy)
            idx = np.where(use, xx * w + yy, 0).astype(np.int64)
            g = np.where(use[:, None], dy, 0)
            for b in range(n):
                np.add.at(du[b], (slice(None), idx[b]), g[b] * (wx * wy)[b])
            v = np.sum(g * np.take_along_axis(flat, idx[:, None, :].repeat(c, 1), 2), axis=1)
            ds[:, 0] += v * np.sign(xx - x) * wy * h / 2
            ds[:, 1] += v * wx * np.sign(yy - y) * w / 2
        if propagate_down[0]:
            bottom[0].diff[...] = du.reshape(u.shape)
        if propagate_down[1]:
            bottom[1].diff[...] = (ds @ self.target.T).reshape(bottom[1].shape)


@register_layer("SubRegion")
class SubRegionLayer(Layer):
    """Crops of region_height x region_width around points. Point p of item n, (px, py) in a
    data_width x data_height frame centred at 0, maps to the centre (px / data_width + 0.5) W,
    (py / data_height + 0.5) H of the H x W map; the crop starts at x0 = floor(cx -
    region_width // 2), y0 = floor(cy - region_height // 2); cells outside the map are 0.
    as_dim 1: top N x (P C) x rh x rw (point-major channels); as_dim 0: top (P N) x C x rh x rw
    (crop of point p, item n at p N + n). With three tops also, per coordinate, the crop's
    centre in the frame r = (x0 + rw / 2 + 0.5) / W data_width (top 2) and the ground truth's
    offset from it, g + data_width // 2 - r (top 1; y likewise with the heights).
    dL/dx adds each crop's gradient back (the GPU kernel; the fork's CPU backward writes into
    top's diff instead). prototxt: ``sub_region_param { region_height region_width
    data_height data_width as_dim: 1 }``. Bottoms: map N x C x H x W, points N x 2P, ground-truth
    points N x 2P. Tops: crops [, ground-truth offsets, crop centres].
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 3

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "sub_region_param")
        self.rh, self.rw = int(p.region_height), int(p.region_width)
        self.dh, self.dw, self.as_dim = int(p.data_height), int(p.data_width), int(p.as_dim)
        if len(top) == 2:
            raise self.error("SubRegion has 1 or 3 tops")
        if min(self.rh, self.rw, self.dh, self.dw) <= 0:
            raise self.error("sub_region_param: region_height, region_width, data_height and "
                             "data_width must be > 0")

    def reshape(self, bottom, top):
        x, pts, gt = bottom
        if x.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        if pts.num_axes < 2 or pts.shape[1] % 2 or pts.count != x.shape[0] * pts.shape[1]:
            raise self.error("points must be N x 2P, got %s" % (pts.shape,), ShapeError)
        if gt.count != pts.count:
            raise self.shape_mismatch("ground truth and points differ in size", 2, 1, bottom)
        n, c = x.shape[:2]
        self.p = pts.shape[1] // 2
        top[0].reshape((n * self.p, c, self.rh, self.rw) if self.as_dim == 0
                       else (n, c * self.p, self.rh, self.rw))
        for t in top[1:]:
            t.reshape(pts.shape)

    def _corners(self, bottom):
        n, _, h, w = bottom[0].shape
        pts = bottom[1].data.reshape(n, self.p, 2)
        cx = (pts[..., 0] / self.dw + 0.5) * w
        cy = (pts[..., 1] / self.dh + 0.5) * h
        return (np.floor(cx - self.rw // 2).astype(np.int64),
                np.floor(cy - self.rh // 2).astype(np.int64))

    def _windows(self, bottom):
        """Per (item, point): the top index of its crop, the item, and (top, bottom) slices of
        rows and columns where the crop lies inside the map."""
        num, c, h, w = bottom[0].shape
        x0, y0 = self._corners(bottom)
        for n in range(num):
            for i in range(self.p):
                slot = (i * num + n, slice(None)) if self.as_dim == 0 else (
                    n, slice(i * c, (i + 1) * c))
                spans = []
                for s, size, k in ((y0[n, i], h, self.rh), (x0[n, i], w, self.rw)):
                    lo, hi = max(s, 0), max(min(s + k, size), max(s, 0))
                    spans.append((slice(lo - s, hi - s), slice(lo, hi)))
                yield slot, n, spans

    def forward_cpu(self, bottom, top):
        out = top[0].data
        out[...] = 0
        for slot, n, ((ty, by), (tx, bx)) in self._windows(bottom):
            out[slot][..., ty, tx] = bottom[0].data[n, :, by, bx]
        if len(top) == 3:
            _, _, h, w = bottom[0].shape
            x0, y0 = self._corners(bottom)
            r = np.stack([(x0 + self.rw / 2 + 0.5) / w * self.dw,
                          (y0 + self.rh / 2 + 0.5) / h * self.dh], axis=-1)
            gt = bottom[2].data.reshape(r.shape)
            top[2].data[...] = r.reshape(top[2].shape)
            top[1].data[...] = (gt + [self.dw // 2, self.dh // 2] - r).reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1] or propagate_down[2]:
            raise self.error("cannot backpropagate to the points")
        if not propagate_down[0]:
            return
        dx = bottom[0].diff
        dx[...] = 0
        for slot, n, ((ty, by), (tx, bx)) in self._windows(bottom):
            dx[n, :, by, bx] += top[0].diff[slot][..., ty, tx]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("Pairwise")
class PairwiseLayer(Layer):
    """All pairs of the rows a_m (bottom[0], M x K) and b_n (bottom[1], N x K): top[m, n] =
    c0 a_m + c1 b_n (SUM, coefficients ``coeff``, default 1 each), a_m * b_n (PROD) or
    max(a_m, b_n) (MAX; b where equal). Backward as the fork: sums over the other index;
    MAX routes to the winner (the fork's CPU code adds a's MAX gradient to a diff it does not
    clear first; caffepy clears it). prototxt: ``pairwise_param { operation: SUM coeff }``
    (no coeff, or one per bottom; none with PROD). Top: M x N x K.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "pairwise_param")
        self.op = p.PairwiseOp.Name(p.operation)
        if len(p.coeff) not in (0, 2):
            raise self.error("pairwise_param takes one coeff per bottom (2), got %d"
                             % len(p.coeff))
        if self.op == "PROD" and len(p.coeff):
            raise self.error("pairwise_param: coefficients are for SUM only")
        self.coeff = [float(v) for v in p.coeff] or [1.0, 1.0]

    def reshape(self, bottom, top):
        a, b = bottom
        if a.num_axes < 2 or b.num_axes < 2 or a.shape[1] != b.shape[1]:
            raise self.shape_mismatch("the bottoms must have the same channels", 0, 1, bottom)
        self.k = a.shape[1]
        if a.count != a.shape[0] * self.k or b.count != b.shape[0] * self.k:
            raise self.error("bottoms must be M x K and N x K, got %s and %s"
                             % (a.shape, b.shape), ShapeError)
        top[0].reshape((a.shape[0], b.shape[0], self.k))

    def forward_cpu(self, bottom, top):
        a = bottom[0].data.reshape(-1, 1, self.k)
        b = bottom[1].data.reshape(1, -1, self.k)
        if self.op == "SUM":
            top[0].data[...] = self.coeff[0] * a + self.coeff[1] * b
        elif self.op == "PROD":
            top[0].data[...] = a * b
        else:
            self.a_wins = a > b
            top[0].data[...] = np.where(self.a_wins, a, b)

    def backward_cpu(self, top, propagate_down, bottom):
        d = top[0].diff
        a = bottom[0].data.reshape(-1, 1, self.k)
        b = bottom[1].data.reshape(1, -1, self.k)
        if self.op == "SUM":
            ga, gb = d * self.coeff[0], d * self.coeff[1]
        elif self.op == "PROD":
            ga, gb = d * b, d * a
        else:
            ga, gb = np.where(self.a_wins, d, 0), np.where(self.a_wins, 0, d)
        if propagate_down[0]:
            bottom[0].diff[...] = ga.sum(axis=1).reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = gb.sum(axis=0).reshape(bottom[1].shape)


@register_layer("Gram")
class GramLayer(Layer):
    """Per item the Gram matrix of its channels: X (C x HW) -> G = X X^T / (HW C), top
    N x C x C x 1; dL/dX = (dG + dG^T) X / (HW C). Bottom: N x C x H x W."""
    exact_num_bottom_blobs = 1
    min_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (bottom[0].shape,),
                             ShapeError)
        n, c, h, w = bottom[0].shape
        self.scale = 1.0 / (h * w) / c
        top[0].reshape(n, c, c, 1)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, c, -1)
        top[0].data[...] = (x @ x.transpose(0, 2, 1) * self.scale).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n, c = bottom[0].shape[:2]
            x = bottom[0].data.reshape(n, c, -1)
            d = top[0].diff.reshape(n, c, c)
            bottom[0].diff[...] = ((d + d.transpose(0, 2, 1)) @ x * self.scale).reshape(
                bottom[0].shape)


@register_layer("Cosine")
class CosineLayer(NeuronLayer):
    """y = cos(x); dL/dx = -dL/dy sin(x) (the GPU kernel; the fork's CPU backward leaves out
    dL/dy)."""

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.cos(bottom[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = -top[0].diff * np.sin(bottom[0].data)


@register_layer("Hotspot")
class HotspotLayer(Layer):
    """One Gaussian heat map per point (hotspot_layer.cpp): point p of item n, (px, py) in a
    data_width x data_height frame (centred at 0 when mean_removed), sits at
    u = (px / data_width + 0.5) W, v = (py / data_height + 0.5) H of the output (without
    mean_removed the 0.5 is left out); the map is

        exp(-((u - w)^2 + (v - h)^2) / (2 s^2)) / (2 pi s^2),  set to 0 where it is <= 1e-4

    (u, v rounded to float32 as in the fork). No backward: the fork's is NOT_IMPLEMENTED, and
    caffepy refuses to propagate too. prototxt: ``hotspot_param { gaussian_std: 1 output_height:
    0 output_width: 0 data_height data_width (required) mean_removed: true }``; an output size of
    0 takes bottom[1]'s height and width. Bottoms: points N x 2P [, a blob giving the size].
    Top: N x P x H x W.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "hotspot_param")
        self.h, self.w = int(p.output_height), int(p.output_width)
        self.std, self.mean_removed = float(p.gaussian_std), bool(p.mean_removed)
        self.dh, self.dw = int(p.data_height), int(p.data_width)
        if self.dh * self.dw <= 0:
            raise self.error("hotspot_param.data_height and data_width must be set")

    def reshape(self, bottom, top):
        pts = bottom[0]
        if pts.num_axes < 2 or pts.shape[1] % 2 or pts.count != pts.shape[0] * pts.shape[1]:
            raise self.error("points must be N x 2P, got %s" % (pts.shape,), ShapeError)
        if self.h * self.w == 0:
            if len(bottom) != 2 or bottom[1].num_axes != 4:
                raise self.error("without output_height and output_width a second, "
                                 "N x C x H x W bottom gives the size")
            self.h, self.w = bottom[1].shape[2:]
        top[0].reshape(pts.shape[0], pts.shape[1] // 2, self.h, self.w)

    def forward_cpu(self, bottom, top):
        n, p = top[0].shape[:2]
        pts = bottom[0].data.reshape(n, p, 2).astype(np.float64)
        off = 0.5 if self.mean_removed else 0.0
        u = np.float32((pts[..., 0] / self.dw + off) * self.w).astype(np.float64)
        v = np.float32((pts[..., 1] / self.dh + off) * self.h).astype(np.float64)
        hh, ww = np.meshgrid(np.arange(self.h), np.arange(self.w), indexing="ij")
        s2 = self.std * self.std
        g = 0.5 / s2 / np.pi * np.exp(-0.5 * ((u[..., None, None] - ww) ** 2
                                             + (v[..., None, None] - hh) ** 2) / s2)
        top[0].data[...] = np.where(g > 1e-4, g, 0)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("Hotspot has no backward (the fork's is NOT_IMPLEMENTED)")

    def allow_force_backward(self, bottom_index):
        return False
