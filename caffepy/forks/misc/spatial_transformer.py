"""SpatialTransformer: Jaderberg et al.'s grid generator and bilinear sampler, as the e2e_face Caffe
layer (mikuhatsune/e2e_face, caffe_modification/spatial_transformer_layer.cu) computes it."""
import numpy as np

from ...layers.base import Layer, register_layer

_THETA_COUNT = {"affine": 6, "projective": 8}


@register_layer("SpatialTransformer")
class SpatialTransformerLayer(Layer):
    """Warps bottom 0 (U, N x C x H x W) by per-sample parameters theta (bottom 1, N x k).

    The fork is the spatial transformer of mikuhatsune/e2e_face (caffe_modification/: caffe.proto's
    ``st_param``, spatial_transformer_layer.cu). For the output pixel (h, w) of Ho x Wo:

        xt = 2 w / (Wo - 1) - 1,  yt = 2 h / (Ho - 1) - 1
        affine (k = 6):      xs = t0 xt + t1 yt + t2,   ys = t3 xt + t4 yt + t5
        projective (k = 8):  z = 1 / (t6 xt + t7 yt + 1),  xs = (t0 xt + t1 yt + t2) z,
                             ys = (t3 xt + t4 yt + t5) z
        px = clamp((xs + 1)(W - 1) / 2, 0, W - 1),  py = clamp((ys + 1)(H - 1) / 2, 0, H - 1)
        V[n, c, h, w] = sum over the (up to) four pixels (i, j) around (py, px) of
                        U[n, c, i, j] (1 - |px - j|)(1 - |py - i|)

    Points outside the image take the border's value (the clamp). The backward is the exact
    derivative of this forward: U gets the bilinear weights, theta the chain rule through px, py
    (zero where a coordinate is clamped). The fork's theta gradient ignores the clamp and its
    projective kernel gives U no gradient; caffepy's gives both, gradient-checked.

    prototxt: ``st_param { transform_type: "affine" | "projective" (default "affine")
    sampler_type: "bilinear" (the only one) output_H: Ho output_W: Wo }`` (0 or unset: the
    input's H, W). The fork's other types (translation, translation_scaling, grid, similarity)
    are refused. A layer whose ``st_param`` sets ``to_compute_dU`` or a fixed ``theta_i_j`` is
    daerduoCarey's (caffepy.forks.misc.st_carey). Top: V, N x C x Ho x Wo.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.st_param
        self.kind = p.transform_type
        if self.kind not in _THETA_COUNT:
            raise self.error("transform_type '%s' is not supported (affine, projective)"
                             % self.kind)
        if p.sampler_type != "bilinear":
            raise self.error("sampler_type '%s' is not supported (bilinear)" % p.sampler_type)
        self.out_h, self.out_w = p.output_H, p.output_W

    def reshape(self, bottom, top):
        if len(bottom[0].shape) != 4:
            raise self.error("bottom 0 must be N x C x H x W (got %s)" % (bottom[0].shape,))
        n, c, h, w = bottom[0].shape
        k = _THETA_COUNT[self.kind]
        if bottom[1].shape[0] != n or bottom[1].count != n * k:
            raise self.error("bottom 1 must hold %d %s parameters per sample: N x %d (got %s)"
                             % (k, self.kind, k, bottom[1].shape))
        self.ho, self.wo = self.out_h or h, self.out_w or w
        top[0].reshape((n, c, self.ho, self.wo))
        yt, xt = np.meshgrid(self._norm(self.ho), self._norm(self.wo), indexing="ij")
        self.xt, self.yt = xt.ravel(), yt.ravel()

    @staticmethod
    def _norm(size):
        return np.arange(size) * 2.0 / (size - 1) - 1.0 if size > 1 else np.full(1, -1.0)

    def _source(self, theta):
        """Normalised source points (xs, ys, z), each N x P."""
        t = theta.astype(np.float64)
        xt, yt = self.xt[None], self.yt[None]
        a = t[:, 0:1] * xt + t[:, 1:2] * yt + t[:, 2:3]
        b = t[:, 3:4] * xt + t[:, 4:5] * yt + t[:, 5:6]
        if self.kind == "affine":
            return a, b, None
        z = 1.0 / (t[:, 6:7] * xt + t[:, 7:8] * yt + 1.0)
        return a * z, b * z, z

    def _corners(self, xs, ys, h, w):
        px = np.clip((xs + 1.0) * (w - 1) / 2.0, 0, w - 1)
        py = np.clip((ys + 1.0) * (h - 1) / 2.0, 0, h - 1)
        x0 = np.floor(px).astype(np.int64)
        y0 = np.floor(py).astype(np.int64)
        x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
        return px - x0, py - y0, x0, x1, y0, y1

    def forward_cpu(self, bottom, top):
        n, c, h, w = bottom[0].shape
        u = bottom[0].data.reshape(n, c, h * w)
        xs, ys, _ = self._source(bottom[1].data.reshape(n, -1))
        fx, fy, x0, x1, y0, y1 = self._corners(xs, ys, h, w)
        v = np.zeros((n, c, xs.shape[1]))
        for yi, xi, wt in ((y0, x0, (1 - fx) * (1 - fy)), (y0, x1, fx * (1 - fy)),
                           (y1, x0, (1 - fx) * fy), (y1, x1, fx * fy)):
            v += np.take_along_axis(u, (yi * w + xi)[:, None, :], axis=2) * wt[:, None, :]
        top[0].data[...] = v.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        n, c, h, w = bottom[0].shape
        u = bottom[0].data.reshape(n, c, h * w).astype(np.float64)
        g = top[0].diff.reshape(n, c, -1).astype(np.float64)
        theta = bottom[1].data.reshape(n, -1)
        xs, ys, z = self._source(theta)
        fx, fy, x0, x1, y0, y1 = self._corners(xs, ys, h, w)
        corners = ((y0, x0, (1 - fx) * (1 - fy)), (y0, x1, fx * (1 - fy)),
                   (y1, x0, (1 - fx) * fy), (y1, x1, fx * fy))
        if propagate_down[0]:
            du = np.zeros((n, c, h * w))
            base = (np.arange(n * c) * (h * w)).reshape(n, c, 1)
            for yi, xi, wt in corners:
                idx = (base + (yi * w + xi)[:, None, :]).ravel()
                du.ravel()[:] += np.bincount(idx, (g * wt[:, None, :]).ravel(), n * c * h * w)
            bottom[0].diff[...] = du.reshape(bottom[0].shape)
        if not propagate_down[1]:
            return
        val = {}
        for key, (yi, xi, _) in zip(("00", "01", "10", "11"), corners):
            val[key] = np.sum(g * np.take_along_axis(u, (yi * w + xi)[:, None, :], axis=2), axis=1)
        d_px = (1 - fy) * (val["01"] - val["00"]) + fy * (val["11"] - val["10"])
        d_py = (1 - fx) * (val["10"] - val["00"]) + fx * (val["11"] - val["01"])
        rx = (xs + 1.0) * (w - 1) / 2.0
        ry = (ys + 1.0) * (h - 1) / 2.0
        gx = np.where((rx >= 0) & (rx <= w - 1), d_px, 0.0) * (w - 1) / 2.0
        gy = np.where((ry >= 0) & (ry <= h - 1), d_py, 0.0) * (h - 1) / 2.0
        xt, yt = self.xt[None], self.yt[None]
        zz = 1.0 if z is None else z
        dt = [gx * xt * zz, gx * yt * zz, gx * zz, gy * xt * zz, gy * yt * zz, gy * zz]
        if z is not None:
            s = -(gx * xs + gy * ys) * z
            dt += [s * xt, s * yt]
        bottom[1].diff[...] = np.stack([d.sum(axis=1) for d in dt], axis=1).reshape(
            bottom[1].shape)
