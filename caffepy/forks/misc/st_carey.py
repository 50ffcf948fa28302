"""daerduoCarey/SpatialTransformerLayer's ``SpatialTransformer`` (src/caffe/layers/st_layer.cu, its
GPU code: the CPU one refuses to run), the spatial transformer that MVIG-SJTU/RMPE,
ALISCIFP's segmentation fork and others copy; chosen over e2e_face's layer
(caffepy.forks.misc.spatial_transformer) when ``st_param`` sets ``to_compute_dU`` or a
``theta_i_j``, fields only this one declares.

Theta: the six affine values per sample, the ``theta_i_j`` the file sets fixed and the others
taken from bottom 1 (N x (6 - fixed)) in order t11 t12 t13 t21 t22 t23. For the output pixel
(s, t) of Ho x Wo (rows s, columns t):

    gs = 2 s / Ho - 1,  gt = 2 t / Wo - 1            (not the aligned corners of e2e_face)
    px = t11 gs + t12 gt + t13,  py = t21 gs + t22 gt + t23
    x = (px + 1) H / 2 (a row),  y = (py + 1) W / 2 (a column)
    V[n, c, s, t] = sum over m in {floor x, floor x + 1}, k in {floor y, floor y + 1} inside the
                    image of U[n, c, m, k] (1 - |x - m|) (1 - |y - k|)

(outside the image a neighbour adds nothing). Backward: theta's gradient is the chain rule
through px, py (the fork's kernel computes the same sums), the fixed values get none; U's gradient
is the bilinear weights' adjoint when ``to_compute_dU`` (default true), else the layer leaves
bottom 0's gradient alone, as the fork does.

prototxt: ``st_param { transform_type: "affine" (the only one) sampler_type: "bilinear"
output_H output_W (default: the input's H, W) to_compute_dU: true theta_1_1 ... theta_2_3 }``.
"""
import numpy as np

from ...layers.base import Layer
from ...layers.registry import register_variant

THETAS = ("theta_1_1", "theta_1_2", "theta_1_3", "theta_2_1", "theta_2_2", "theta_2_3")


def _is_carey(lp):
    p = lp.st_param
    return any(p.HasField(f) for f in ("to_compute_dU",) + THETAS)


@register_variant("SpatialTransformer", _is_carey)
class CareySpatialTransformerLayer(Layer):
    """daerduoCarey's SpatialTransformer: see the module doc."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.st_param
        if p.transform_type != "affine" or p.sampler_type != "bilinear":
            raise self.error("daerduoCarey's SpatialTransformer takes transform_type \"affine\" "
                             "and sampler_type \"bilinear\" only, got \"%s\" / \"%s\""
                             % (p.transform_type, p.sampler_type))
        self.fixed = {i: float(getattr(p, f)) for i, f in enumerate(THETAS) if p.HasField(f)}
        self.free = [i for i in range(6) if i not in self.fixed]
        self.to_compute_du = bool(p.to_compute_dU)
        self.out_h = int(p.output_H) if p.HasField("output_H") else None
        self.out_w = int(p.output_W) if p.HasField("output_W") else None

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom 0 must be N x C x H x W, got %s" % (bottom[0].shape,))
        n, c, h, w = bottom[0].shape
        if bottom[1].shape[0] != n or bottom[1].count != n * len(self.free):
            raise self.error("bottom 1 must hold the %d theta values the file does not fix, per "
                             "sample: N x %d (got %s)" % (len(self.free), len(self.free),
                                                          bottom[1].shape))
        self.ho, self.wo = self.out_h or h, self.out_w or w
        if self.ho < 1 or self.wo < 1:
            raise self.error("output_H and output_W must be positive, got %d x %d"
                             % (self.ho, self.wo))
        top[0].reshape((n, c, self.ho, self.wo))
        gs, gt = np.meshgrid(np.arange(self.ho) * 1.0 / self.ho * 2 - 1,
                             np.arange(self.wo) * 1.0 / self.wo * 2 - 1, indexing="ij")
        self.grid = np.stack([gs.ravel(), gt.ravel(), np.ones(gs.size)]).astype(self.dtype)

    def _theta(self, given):
        full = np.empty((given.shape[0], 6), dtype=self.dtype)
        for i, v in self.fixed.items():
            full[:, i] = v
        full[:, self.free] = given.reshape(given.shape[0], -1)
        return full

    def _points(self, bottom):
        """x, y (N x P, image rows and columns) and the four neighbours: (m, k, weight, inside)."""
        n, c, h, w = bottom[0].shape
        theta = self._theta(bottom[1].data).reshape(n, 2, 3)
        p = np.matmul(theta, self.grid)                    # N x 2 x P
        x = (p[:, 0] + 1) / 2 * h
        y = (p[:, 1] + 1) / 2 * w
        m0, k0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
        out = []
        for dm in (0, 1):
            for dk in (0, 1):
                m, k = m0 + dm, k0 + dk
                inside = (m >= 0) & (m < h) & (k >= 0) & (k < w)
                wgt = (1 - np.abs(x - m)) * (1 - np.abs(y - k))
                out.append((np.clip(m, 0, h - 1), np.clip(k, 0, w - 1), wgt, inside))
        return x, y, out

    def forward_cpu(self, bottom, top):
        n, c, h, w = bottom[0].shape
        u = bottom[0].data.reshape(n, c, h * w)
        self.points = self._points(bottom)          # the backward's too
        corners = self.points[2]
        v = np.zeros((n, c, self.ho * self.wo), dtype=self.dtype)
        for m, k, wgt, inside in corners:
            vals = np.take_along_axis(u, (m * w + k)[:, None, :], axis=2)
            v += vals * np.where(inside, wgt, 0)[:, None, :]
        top[0].data[...] = v.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        n, c, h, w = bottom[0].shape
        u = bottom[0].data.reshape(n, c, h * w)
        g = top[0].diff.reshape(n, c, -1)
        x, y, corners = self.points
        if propagate_down[1]:
            dpx = np.zeros_like(x)
            dpy = np.zeros_like(y)
            for m, k, wgt, inside in corners:
                s = np.sum(g * np.take_along_axis(u, (m * w + k)[:, None, :], axis=2), axis=1)
                s = np.where(inside, s, 0)
                # d/dx of (1 - |x - m|) on [m - 1, m + 1] is +1 for x < m, -1 for x >= m
                dpx += s * np.where(x < m, 1, -1) * (1 - np.abs(y - k)) * (h / 2.0)
                dpy += s * np.where(y < k, 1, -1) * (1 - np.abs(x - m)) * (w / 2.0)
            full = np.concatenate([np.matmul(dpx, self.grid.T), np.matmul(dpy, self.grid.T)],
                                  axis=1)
            bottom[1].diff[...] = full[:, self.free].reshape(bottom[1].shape)
        if propagate_down[0] and self.to_compute_du:
            du = np.zeros((n * c * h * w,), dtype=np.float64)
            base = (np.arange(n * c) * (h * w)).reshape(n, c, 1)
            for m, k, wgt, inside in corners:
                idx = (base + (m * w + k)[:, None, :]).ravel()
                contrib = g * np.where(inside, wgt, 0)[:, None, :]
                du += np.bincount(idx, contrib.ravel(), du.size)
            bottom[0].diff[...] = du.reshape(bottom[0].shape)
