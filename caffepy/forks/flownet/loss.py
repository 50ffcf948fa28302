"""FlowNet 2's L1Loss (lmb-freiburg/flownet2) and the masked-difference frame it shares with
LpqLoss (extra.py)."""
import numpy as np

from ...layers.base import LossLayer, register_layer


class _FlowDifferenceLoss(LossLayer):
    """L1Loss's and LpqLoss's frame: bottoms x [, y], d = x - y (or x) with NaN entries masked
    to 0 (:meth:`_difference`); the gradient g, 0 where ``self.mask`` is not, goes to x and -g
    to y (:meth:`_put_diff`)."""
    exact_num_bottom_blobs = None
    min_bottom_blobs = 1
    max_bottom_blobs = 2

    @staticmethod
    def _difference(bottom):
        d = bottom[0].data - bottom[1].data if len(bottom) == 2 else bottom[0].data
        mask = ~np.isnan(d)
        return np.where(mask, d, 0.0), mask

    def _put_diff(self, g, propagate_down, bottom):
        g = np.where(self.mask, g, 0.0)
        if propagate_down[0]:
            bottom[0].diff[...] = g
        if len(bottom) == 2 and propagate_down[1]:
            bottom[1].diff[...] = -g

    def allow_force_backward(self, bottom_index):
        return True


@register_layer("L1Loss")
class L1LossLayer(_FlowDifferenceLoss):
    """FlowNet 2's L1Loss (its EPE loss with ``l2_per_location``).

    d = x (one bottom) or x - y (two); NaN entries of d are masked out. normalizer = N, or with
    ``normalize_by_num_entries`` the number of non-NaN entries / C.
    Plain:            L = sum |d| / normalizer (entries with |d| < plateau masked);
                      dx = sign(d) / normalizer (sign(0) = -1, as the fork).
    l2_per_location:  s = sum_c d^2 (/ C with l2_prescale_by_channels) per position, set to 0
                      where s < plateau^2; L = sum sqrt(s + epsilon) / normalizer;
                      dx = d / sqrt(s + epsilon) (/ C) / normalizer (0 where masked).
    The second bottom gets -dx.

    prototxt: ``l1_loss_param { l2_per_location: false l2_prescale_by_channels: false
    normalize_by_num_entries: false epsilon: 0.01 plateau: 0 }``. Bottoms: x [, y] (N, C, H, W).
    Top: the loss ().
    """

    def reshape(self, bottom, top):
        if len(bottom) == 2 and bottom[0].shape != bottom[1].shape:
            raise self.shape_mismatch("bottoms %s and %s must have equal shapes"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        p = self.layer_param.l1_loss_param
        d, mask = self._difference(bottom)
        c = d.shape[1] if d.ndim > 1 else 1
        self.norm = mask.sum() / c if p.normalize_by_num_entries else d.shape[0]
        if p.l2_per_location:
            s = np.square(d).sum(axis=1, keepdims=True) / (c if p.l2_prescale_by_channels else 1)
            self.keep = s >= p.plateau ** 2 if p.plateau > 0 else np.ones_like(s, dtype=bool)
            s = np.where(self.keep, s, 0)
            self.root = np.sqrt(s + p.epsilon)
            loss = self.root.sum()
        else:
            if p.plateau > 0:
                mask &= np.abs(d) >= p.plateau
            d = np.where(mask, d, 0)
            loss = np.abs(d).sum()
        self.d, self.mask, self.c = d, mask, c
        top[0].data[...] = loss / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        p = self.layer_param.l1_loss_param
        alpha = float(top[0].diff) / self.norm
        if p.l2_per_location:
            g = alpha * self.d / self.root * self.keep
            if p.l2_prescale_by_channels:
                g = g / self.c
        else:
            g = alpha * np.where(self.d > 0, 1.0, -1.0)
        self._put_diff(g, propagate_down, bottom)
