"""Layers of xiaolonw/caffe-video_triplet (Wang & Gupta, "Unsupervised Learning of Visual
Representations using Videos"): RankHardLoss, the ranking loss with hard-negative mining (its V1
type RANK_HARD_LOSS), and Norm, the L2 normalisation over channels (its V1 NORM, number 41; in
caffepy's schema NORM holds Cambricon's number and upgrades to Normalize).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, NeuronLayer, register_layer


@register_layer("RankHardLoss")
class RankHardLossLayer(LossLayer):
    """Triplet ranking loss on dot-product distances with hard-negative mining
    (xiaolonw/caffe-video_triplet, src/caffe/layers/rank_hard_loss_layer.cpp).

    Samples come in groups of ``pair_size``: sample i (i = 0, pair_size, 2 pair_size, ...) is an
    anchor and i + 1 its positive. With d(a, b) = -<f_a, f_b> and m the margin, for each anchor
    and each negative j (label_j != label_i) kept by the mask:

        l1 = max(0, d(i, i+1) - d(i, j) + m);    l2 = max(0, d(i, i+1) - d(i+1, j) + m)
        loss = sum (l1 + l2) / cnt,  cnt = (neg_num * N / pair_size, integer division) * 2

    The mask, per anchor: the negatives with l1 > 0; when more than neg_num, sorted by d
    (hardest first), the first neg_num shuffled, hard_num = int(neg_num * hard_ratio) of them
    kept, the rest joined to the others, shuffled, and rand_num = int(neg_num * rand_ratio) more
    kept (caffepy's random generator; the fork uses std::random_shuffle). Gradients, where a term
    is positive: l1: f_i += f_j - f_{i+1}, f_{i+1} -= f_i, f_j += f_i; l2: f_i -= f_{i+1},
    f_{i+1} += f_j - f_i, f_j += f_{i+1}; all divided by cnt and scaled by the top's diff (the
    fork does not scale by the loss weight; at loss_weight 1 they agree).

    prototxt: ``rank_param { neg_num: 1 pair_size: 1 hard_ratio rand_ratio margin: 0.5 }``.
    Bottoms: features (N x ...), labels (N). Top: loss.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        p = self.layer_param.rank_param
        if p.pair_size < 2:
            raise self.error("rank_param: pair_size must be at least 2 (anchor and positive)")
        if bottom[0].shape[0] % p.pair_size:
            raise self.error("batch %d is not a multiple of pair_size %d"
                             % (bottom[0].shape[0], p.pair_size), ShapeError)

    def _mask(self, dis, label):
        p = self.layer_param.rank_param
        num = dis.shape[0]
        hard_num, rand_num = int(p.neg_num * p.hard_ratio), int(p.neg_num * p.rand_ratio)
        mask = np.zeros((num, num), bool)
        rng = self.rng()
        for i in range(0, num, p.pair_size):
            neg = [(dis[i, j], j) for j in range(num) if label[j] != label[i]
                   and max(0.0, dis[i, i + 1] - dis[i, j] + p.margin) != 0]
            if len(neg) <= p.neg_num:
                mask[i, [j for _, j in neg]] = True
                continue
            order = [j for _, j in sorted(neg)]
            hard, rest = order[:p.neg_num], order[p.neg_num:]
            hard = [hard[k] for k in rng.permutation(len(hard))]
            mask[i, hard[:hard_num]] = True
            rest = rest + hard[hard_num:]
            rest = [rest[k] for k in rng.permutation(len(rest))]
            mask[i, rest[:rand_num]] = True
        return mask

    def forward_cpu(self, bottom, top):
        p = self.layer_param.rank_param
        num = bottom[0].shape[0]
        f = bottom[0].data.reshape(num, -1).astype(np.float64)
        dis = -(f @ f.T)
        np.fill_diagonal(dis, 0)
        label = bottom[1].data.reshape(-1)
        self.mask = self._mask(dis, label)
        self.cnt = (p.neg_num * num // p.pair_size) * 2
        self.terms = []
        loss = 0.0
        for i in range(0, num, p.pair_size):
            for j in np.nonzero(self.mask[i])[0]:
                l1 = max(0.0, dis[i, i + 1] - dis[i, j] + p.margin)
                l2 = max(0.0, dis[i, i + 1] - dis[i + 1, j] + p.margin)
                loss += l1 + l2
                self.terms.append((i, j, l1 > 0, l2 > 0))
        self.f = f
        top[0].data[...] = loss / self.cnt if self.cnt else 0.0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if not propagate_down[0]:
            return
        f, g = self.f, np.zeros_like(self.f)
        for i, j, a1, a2 in self.terms:
            if a1:
                g[i] += f[j] - f[i + 1]
                g[i + 1] -= f[i]
                g[j] += f[i]
            if a2:
                g[i] -= f[i + 1]
                g[i + 1] += f[j] - f[i]
                g[j] += f[i + 1]
        scale = float(top[0].diff) / self.cnt if self.cnt else 0.0
        bottom[0].diff[...] = (g * scale).reshape(bottom[0].shape)


@register_layer("Norm")
class NormLayer(NeuronLayer):
    """L2 normalisation over the channels at every position (xiaolonw/caffe-video_triplet,
    src/caffe/layers/norm_layer.cpp). With s = sum_c x_c^2 at a position (n, h, w):

        y_c = x_c / (sqrt(s) + 1e-6)
        dL/dx_c = (s dL/dy_c - x_c sum_k x_k dL/dy_k) / (s^(3/2) + 1e-6)

    No parameters. Bottom: N x C x H x W (or N x C); top: the same shape.
    """

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("Norm does not run in place (its backward reads the input)")
        super().reshape(bottom, top)

    def _view(self, a):
        return a.reshape(a.shape[0], a.shape[1] if a.ndim > 1 else 1, -1)

    def forward_cpu(self, bottom, top):
        x = self._view(bottom[0].data)
        norm = np.sqrt((x * x).sum(1, keepdims=True)) + 1e-6
        top[0].data[...] = (x / norm).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        x, dy = self._view(bottom[0].data), self._view(top[0].diff)
        s = (x * x).sum(1, keepdims=True)
        dot = (x * dy).sum(1, keepdims=True)
        dx = (s * dy - x * dot) / (s * np.sqrt(s) + 1e-6)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)
