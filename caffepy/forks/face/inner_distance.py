"""happynear's caffe-windows: ``InnerDistance`` (distances to learned or given centres)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("InnerDistance")
class InnerDistanceLayer(Layer):
    """y[m, n] = sum_k (x[m, k] - w[n, k])^2 (``distance_type: "L2"``) or sum_k |x - w| ("L1").

    x is bottom 0 flattened from ``axis`` (M x K); w (N x K) is the layer's weight blob
    (N = ``num_output``, filled by ``weight_filler``; ``normalize: true`` rescales each row in
    place to w_n / sqrt(|w_n|^2 + 1e-6) before every forward) or, with a second bottom, the
    centres it gives (N = its num). Backward: dx = sum_n dy 2 (x - w) (L1: sign(x - w));
    dw = sum_m dy 2 (w - x) (L1: sign(w - x)); with ``update_center_only`` only the centre of
    each row's label (the last bottom) gets a gradient.

    prototxt: ``inner_distance_param { num_output distance_type: "L2" weight_filler axis: 1
    normalize: false update_center_only: false bias_term: true bias_filler transpose: false }``;
    the fork makes no bias blob and its forward ignores ``transpose`` (refused here).
    Bottoms: x [, centres (N x K)] [, label (M) with update_center_only]: as the fork reads them,
    x alone, x + centres, or x + centres + label with update_center_only. Top: x's shape up to
    ``axis``, then N.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.inner_distance_param
        self.kind = p.distance_type
        if self.kind not in ("L2", "L1"):
            raise self.error('distance_type must be "L2" or "L1" (as the fork), got %r' % self.kind)
        if p.transpose:
            raise self.error("transpose: true is not supported (the fork's forward ignores it)")
        self.update_center_only = bool(p.update_center_only)
        n_bottom = len(bottom)
        if (n_bottom == 3) != self.update_center_only:
            raise self.error("update_center_only takes three bottoms (x, centres, label); "
                             "without it give x alone or x and centres (got %d bottoms)"
                             % n_bottom)
        self.normalize = bool(p.normalize) and n_bottom == 1
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.K = int(np.prod(bottom[0].shape[self.axis:], dtype=np.int64))
        if n_bottom == 1:
            if not p.num_output:
                raise self.error("inner_distance_param needs num_output")
            self.init_param_blobs([(int(p.num_output), self.K)], p.weight_filler)

    def reshape(self, bottom, top):
        x = bottom[0]
        if int(np.prod(x.shape[self.axis:], dtype=np.int64)) != self.K:
            raise self.error("input size %s incompatible with the layer's K = %d"
                             % (x.shape, self.K), ShapeError)
        self.M = int(np.prod(x.shape[:self.axis], dtype=np.int64))
        if len(bottom) >= 2:
            if bottom[1].count != bottom[1].shape[0] * self.K:
                raise self.error("centres %s must be N x K (K = %d)" % (bottom[1].shape, self.K),
                                 ShapeError)
            self.N = bottom[1].shape[0]
        else:
            self.N = self.blobs[0].shape[0]
        if len(bottom) == 3 and bottom[2].count != self.M:
            raise self.error("label %s must hold one value per row (M = %d)"
                             % (bottom[2].shape, self.M), ShapeError)
        top[0].reshape(tuple(x.shape[:self.axis]) + (self.N,))

    def _weight(self, bottom):
        return (bottom[1].data if len(bottom) >= 2 else self.blobs[0].data).reshape(self.N, self.K)

    def forward_cpu(self, bottom, top):
        if self.normalize:
            w = self.blobs[0].data
            w /= np.sqrt(np.sum(w.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-6)
        x = bottom[0].data.reshape(self.M, self.K).astype(np.float64)
        diff = x[:, None, :] - self._weight(bottom).astype(np.float64)[None]
        y = np.sum(diff * diff, axis=2) if self.kind == "L2" else np.sum(np.abs(diff), axis=2)
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        x = bottom[0].data.reshape(self.M, self.K).astype(np.float64)
        w = self._weight(bottom).astype(np.float64)
        dy = top[0].diff.reshape(self.M, self.N).astype(np.float64)
        diff = x[:, None, :] - w[None]                                     # M x N x K
        g = 2.0 * diff if self.kind == "L2" else np.sign(diff)
        if propagate_down[0]:
            bottom[0].diff[...] = np.einsum("mn,mnk->mk", dy, g).reshape(bottom[0].shape)
        if len(bottom) == 3 and propagate_down[2]:
            raise self.error("cannot backpropagate to the label")
        want_w = propagate_down[1] if len(bottom) >= 2 else (
            not self.param_propagate_down or self.param_propagate_down[0])
        if not want_w:
            return
        mask = dy
        if self.update_center_only:
            label = bottom[2].data.reshape(self.M).astype(np.int64)
            mask = dy * (label[:, None] == np.arange(self.N)[None, :])
        dw = -np.einsum("mn,mnk->nk", mask, g)
        if len(bottom) >= 2:
            bottom[1].diff[...] = dw.reshape(bottom[1].shape)
        else:
            self.blobs[0].diff[...] += dw.reshape(self.blobs[0].shape)
