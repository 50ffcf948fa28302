"""PSANet's point-wise spatial attention (hszhao/PSANet's caffe: ``PointwiseSpatialAttention``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("PointwiseSpatialAttention")
class PointwiseSpatialAttentionLayer(Layer):
    """Aggregate features with a per-position attention mask over an over-complete window.

    Bottoms: features X (N x C x H x W) and masks M (N x (Mh * Mw) x H x W, the window row-major
    in the channels). Top: Y (N x C x H x W). With half sizes a = (Mh - 1) / 2, b = (Mw - 1) / 2,
    every window cell (i, j) of position q = (h, w) names the position p = (h + i - a, w + j - b);
    cells outside the map are dropped. A buffer A (N x HW x HW, zeros elsewhere) gets
        COLLECT:    A[n, p, q] = M[n, (i, j), h, w]
        DISTRIBUTE: A[n, q, p] = M[n, (i, j), h, w]
    with ``is_softmax`` A is replaced by its softmax over axis 1 (all HW entries, the zeros too);
        Y[n] = X[n] A[n] / normalization_factor      (X[n] as C x HW)
    Backward: dX[n] = dY[n] A[n]^T / f; dA[n] = X[n]^T dY[n] / f (through the softmax), read
    back at the cells M filled (M gets 0 at cells outside the map).

    prototxt: ``pointwise_spatial_attention_param { psa_type: COLLECT (or DISTRIBUTE)
    is_softmax: false normalization_factor (default Mh * Mw) attention_mask_height
    attention_mask_width (both or neither, odd and > 1; default 2H - 1 and 2W - 1) }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.pointwise_spatial_attention_param
        if p.HasField("attention_mask_height") != p.HasField("attention_mask_width"):
            raise self.error("attention_mask_height and attention_mask_width must be set together")
        if p.HasField("attention_mask_height"):
            self.mh, self.mw = int(p.attention_mask_height), int(p.attention_mask_width)
            if self.mh <= 1 or self.mw <= 1 or self.mh % 2 == 0 or self.mw % 2 == 0:
                raise self.error("attention_mask_height / width must be odd and larger than 1")
        else:
            self.mh, self.mw = 2 * bottom[0].shape[2] - 1, 2 * bottom[0].shape[3] - 1
        self.norm = float(p.normalization_factor if p.HasField("normalization_factor")
                          else self.mh * self.mw)
        self.softmax = bool(p.is_softmax)
        self.distribute = p.psa_type == type(p).DISTRIBUTE
        self._key = None

    def reshape(self, bottom, top):
        x, m = bottom
        if x.num_axes != 4 or m.num_axes != 4:
            raise self.error("bottoms must be 4-D, got %s and %s" % (x.shape, m.shape), ShapeError)
        N, _, H, W = x.shape
        if m.shape[0] != N or m.shape[2:] != x.shape[2:]:
            raise self.error("mask %s and features %s differ in num, height or width"
                             % (m.shape, x.shape), ShapeError)
        if m.shape[1] != self.mh * self.mw:
            raise self.error("mask has %d channels; expected attention_mask_height * width = %d"
                             % (m.shape[1], self.mh * self.mw), ShapeError)
        top[0].reshape(x.shape)
        if self._key != (H, W):
            self._key = (H, W)
            self._index(H, W)

    def _index(self, H, W):
        """Flat indices of the filled cells: into M[n] (Mh Mw H W) and into A[n] (HW x HW)."""
        a, b = (self.mh - 1) // 2, (self.mw - 1) // 2
        i, j, h, w = np.meshgrid(np.arange(self.mh), np.arange(self.mw), np.arange(H),
                                 np.arange(W), indexing="ij")
        ph, pw = h + i - a, w + j - b
        ok = (ph >= 0) & (ph < H) & (pw >= 0) & (pw < W)
        self.mask_idx = np.flatnonzero(ok)
        p, q = (ph * W + pw)[ok], (h * W + w)[ok]
        self.buf_idx = (q * H * W + p) if self.distribute else (p * H * W + q)

    def forward_cpu(self, bottom, top):
        x, m = bottom
        N, C, H, W = x.shape
        hw = H * W
        A = np.zeros((N, hw * hw), dtype=np.float64)
        A[:, self.buf_idx] = m.data.reshape(N, -1)[:, self.mask_idx]
        A = A.reshape(N, hw, hw)
        if self.softmax:
            A = np.exp(A - A.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
        self.A = A
        y = np.matmul(x.data.reshape(N, C, hw).astype(np.float64), A) / self.norm
        top[0].data[...] = y.reshape(x.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        x, m = bottom
        N, C, H, W = x.shape
        hw = H * W
        dy = top[0].diff.reshape(N, C, hw).astype(np.float64)
        if propagate_down[0]:
            x.diff[...] = (np.matmul(dy, self.A.transpose(0, 2, 1)) / self.norm).reshape(x.shape)
        if propagate_down[1]:
            dA = np.matmul(x.data.reshape(N, C, hw).transpose(0, 2, 1).astype(np.float64),
                           dy) / self.norm
            if self.softmax:
                dA = self.A * (dA - np.sum(dA * self.A, axis=1, keepdims=True))
            dm = np.zeros((N, m.count // N))
            dm[:, self.mask_idx] = dA.reshape(N, -1)[:, self.buf_idx]
            m.diff[...] = dm.reshape(m.shape)
