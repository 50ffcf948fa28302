"""The multi-kernel MMD loss of Deep Adaptation Networks (201528014227051/DAN,
src/caffe/layers/mmd_layer.cu; also BOBrown/JADF-caffe, He-Zhenwei/MAF). The fork computes it
only on the GPU (its Forward_cpu / Backward_cpu are empty); caffepy computes the kernels' math on
the host.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, fork_param, register_layer


def draw_quads(rng, ns, nt, count):
    """``count`` (s1, s2, t1, t2) draws as the fork makes them: uniform indices, the second of
    each pair moved to the next index (cyclically) when it equals the first."""
    out = []
    for _ in range(count):
        s1, s2, t1, t2 = (int(v) for v in rng.integers(0, (ns, ns, nt, nt)))
        s2 = s2 if s1 != s2 else (s2 + 1) % ns
        t2 = t2 if t1 != t2 else (t2 + 1) % nt
        out.append((s1, s2, t1, t2))
    return out


@register_layer("MMDLoss")
class MMDLossLayer(LossLayer):
    """Linear-time multi-kernel MMD between source rows x (bottom[0], S x D) and target rows y
    (bottom[1], T x D). Kernels k_i(a, b) = exp(-g_i |a - b|^2), g_i = gamma m^(i - K // 2)
    (m = kernel_mul, K = kernel_num), gamma = (n^2 - n) / sum of all pairwise squared distances
    of the n = S + T rows (with fix_gamma: the first forward's gamma, kept). With
    max(S, T) random draws (s1, s2, t1, t2) (:func:`draw_quads`):

        loss = sum_draws sum_i [k_i(x_s1, x_s2) + k_i(y_t1, y_t2) - k_i(x_s1, y_t2)
                                - k_i(x_s2, y_t1)]

    Backward as the fork: NEW draws, each adding the gradient of its four terms divided by the
    number of draws (the loss is not divided), times loss_weight; 0 when S or T is 1. Draws come
    from caffepy's random generator (the fork uses C ``rand()``). prototxt: ``mmd_param {
    kernel_num: 5 kernel_mul: 2 fix_gamma: false }``. Bottoms: source, target (and up to two
    more, unread). Top: the loss.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 4
    exact_num_top_blobs = None
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "mmd_param")
        self.k, self.mul, self.fix = int(p.kernel_num), float(p.kernel_mul), bool(p.fix_gamma)
        self.gamma = -1.0

    def reshape(self, bottom, top):
        s, t = bottom[0], bottom[1]
        if s.num_axes < 1 or t.num_axes < 1 or s.shape[0] == 0 or t.shape[0] == 0 or \
                s.count // s.shape[0] != t.count // t.shape[0]:
            raise self.error("source and target rows differ in size: %s and %s"
                             % (s.shape, t.shape), ShapeError)
        top[0].reshape(())

    def _rows(self, bottom):
        s, t = bottom[0], bottom[1]
        return (s.data.reshape(s.shape[0], -1).astype(np.float64),
                t.data.reshape(t.shape[0], -1).astype(np.float64))

    def _gammas(self):
        return self.gamma / self.mul ** (self.k // 2) * self.mul ** np.arange(self.k)

    def forward_cpu(self, bottom, top):
        x, y = self._rows(bottom)
        z = np.concatenate([x, y])
        n = len(z)
        d2 = np.sum((z[:, None, :] - z[None, :, :]) ** 2, axis=2)
        if not (self.fix and self.gamma >= 0):
            with np.errstate(divide="ignore"):
                self.gamma = (n * n - n) / np.sum(d2)
        kern = np.exp(-self._gammas()[:, None, None] * d2).sum(axis=0)
        ns = len(x)
        loss = 0.0
        for s1, s2, t1, t2 in draw_quads(self.rng(), ns, len(y), max(ns, len(y))):
            loss += (kern[s1, s2] + kern[ns + t1, ns + t2] - kern[s1, ns + t2]
                     - kern[s2, ns + t1])
        top[0].data[...] = loss

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[2:]):
            raise self.error("only the source and target bottoms take a gradient")
        x, y = self._rows(bottom)
        gx, gy = np.zeros_like(x), np.zeros_like(y)
        if len(x) > 1 and len(y) > 1:
            count = max(len(x), len(y))
            g = self._gammas()
            scale = float(top[0].diff) / count
            for s1, s2, t1, t2 in draw_quads(self.rng(), len(x), len(y), count):
                for (u, gu, i), (v, gv, j), coeff in (((x, gx, s1), (x, gx, s2), 1.0),
                                                      ((x, gx, s1), (y, gy, t2), -1.0),
                                                      ((y, gy, t1), (x, gx, s2), -1.0),
                                                      ((y, gy, t1), (y, gy, t2), 1.0)):
                    diff = u[i] - v[j]
                    f = np.sum(-2 * g * coeff * np.exp(-g * np.dot(diff, diff))) * scale
                    gu[i] += f * diff
                    gv[j] -= f * diff
        if propagate_down[0]:
            bottom[0].diff[...] = gx.reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = gy.reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2
