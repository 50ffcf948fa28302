"""madiken/skaffe_private_old's ``BilinearPatch``: bilinear pooling (the outer product of two
feature maps' channel vectors) summed over each cell of a grid of patches."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("BilinearPatch")
class BilinearPatchLayer(Layer):
    """src/caffe/layers/bilinear_patch_layer.cu of madiken/skaffe_private_old (its CPU Forward
    and Backward are empty stubs; the CUDA code is the layer). Bottoms a (N, C1, H, W) and b
    (N, C2, ...) with H*W positions each; ``bilinear_patch_param { patch_h: 1 patch_w: 1 }``
    cuts a's H x W grid into ceil(H / patch_h) x ceil(W / patch_w) cells (the last row and
    column of cells may be smaller). For cell (u, v) with positions P_uv (b's positions taken in
    the same flat order):

        top[n, c1 * C2 + c2, u, v] = sum_{p in P_uv} a[n, c1, p] b[n, c2, p]
        da[n, c1, p] = sum_{c2} dtop[n, c1 * C2 + c2, cell(p)] b[n, c2, p]
        db[n, c2, p] = sum_{c1} dtop[n, c1 * C2 + c2, cell(p)] a[n, c1, p]

    Top: (N, C1 * C2, ceil(H / patch_h), ceil(W / patch_w)).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.bilinear_patch_param
        self.ph, self.pw = int(p.patch_h), int(p.patch_w)
        if self.ph < 1 or self.pw < 1:
            raise self.error("bilinear_patch_param.patch_h and patch_w must be positive")

    def reshape(self, bottom, top):
        a, b = bottom
        if a.num_axes != 4:
            raise self.error("bottom 0 must be N x C x H x W, got %s" % (a.shape,), ShapeError)
        n, self.c1, h, w = a.shape
        if b.shape[0] != n or b.num_axes < 2 or b.count_range(2) != h * w:
            raise self.shape_mismatch("bottom 1 needs bottom 0's num and H*W positions (%s vs %s)"
                                      % (b.shape, a.shape), 1, 0, bottom)
        self.c2 = b.shape[1]
        self.gh, self.gw = -(-h // self.ph), -(-w // self.pw)
        rows, cols = np.divmod(np.arange(h * w), w)
        self.cell = (rows // self.ph) * self.gw + cols // self.pw
        self.members = [np.nonzero(self.cell == i)[0] for i in range(self.gh * self.gw)]
        top[0].reshape((n, self.c1 * self.c2, self.gh, self.gw))

    def _flat(self, bottom):
        n = bottom[0].shape[0]
        return bottom[0].data.reshape(n, self.c1, -1), bottom[1].data.reshape(n, self.c2, -1)

    def forward_cpu(self, bottom, top):
        a, b = self._flat(bottom)
        n = a.shape[0]
        out = top[0].data.reshape(n, self.c1, self.c2, -1)
        for i, sel in enumerate(self.members):
            out[..., i] = np.matmul(a[:, :, sel], b[:, :, sel].transpose(0, 2, 1))

    def backward_cpu(self, top, propagate_down, bottom):
        a, b = self._flat(bottom)
        n = a.shape[0]
        g = top[0].diff.reshape(n, self.c1, self.c2, -1)
        da = np.zeros_like(a) if propagate_down[0] else None
        db = np.zeros_like(b) if propagate_down[1] else None
        for i, sel in enumerate(self.members):
            if da is not None:
                da[:, :, sel] = np.matmul(g[..., i], b[:, :, sel])
            if db is not None:
                db[:, :, sel] = np.matmul(g[..., i].transpose(0, 2, 1), a[:, :, sel])
        if da is not None:
            bottom[0].diff[...] = da.reshape(bottom[0].shape)
        if db is not None:
            bottom[1].diff[...] = db.reshape(bottom[1].shape)
