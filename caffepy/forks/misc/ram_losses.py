"""liu-xb/RAM's metric losses (commit fb92aab3; liu-xb/GGL ships the same layers): HashingLoss
(caffe/src/caffe/layers/hashing_loss_layer.cpp, Deep Supervised Hashing), SetLoss2
(set_loss2_layer.cpp) and VarLoss (var_loss_layer.cpp; its GPU functions call the CPU ones).

SetLoss2 and VarLoss read the batch as consecutive blocks of one identity each: the block size m
is the position of the first label that differs from the first one (the whole batch when none
does). The forks index past the batch when m does not divide it; that is refused here.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer
from ...layers.loss import reject_label_gradient


def _block_size(layer, bottom):
    """m: the index of the first label unequal to label 0 (compared as floats, as the forks do),
    checked to divide the batch."""
    labels = bottom[1].data.reshape(-1)
    n = bottom[0].shape[0]
    differ = np.flatnonzero(labels[:n] != labels[0])
    m = int(differ[0]) if differ.size else n
    if n % m:
        raise layer.error("the batch of %d is not made of blocks of %d items of one label each "
                          "(the first label changes at item %d)" % (n, m, m))
    return m


@register_layer("HashingLoss")
class HashingLossLayer(LossLayer):
    """Deep Supervised Hashing loss (Liu et al., CVPR 2016) over all pairs of a batch of N codes
    x_i (N x C; height and width 1):

        L = 1/(N(N-1)) sum_{i<j} [ s_ij d_ij^2 + (1 - s_ij) max(margin - d_ij^2, 0) ]
            + tradeoff / N * sum_{i,k} | |x_ik| - 1 |,      d_ij = ||x_i - x_j||

    s_ij: with one label per item, int(y_i) == int(y_j); with L > 1 label values per item
    (multi-label), <y_i, y_j> > 0. ``hashing_loss_param { bi_margin (margin, default 1)
    tradeoff (default 0.01) }``.

    Gradient, as the fork writes it (in its forward, from the top diff w set before it runs; here
    in backward from the top diff), a = w / (N(N-1)), b = w / N:

        similar pair:             dx_i += a (x_i - x_j),  dx_j -= a (x_i - x_j)
        dissimilar, d^2 < margin: dx_i -= a (x_i - x_j),  dx_j += a (x_i - x_j)
        regulariser:              dx_ik += b tradeoff (1 if x_ik >= 1 or -1 <= x_ik <= 0, else -1)

    The pair terms are half the derivative of L (the derivative of L with its pair sum halved);
    the regulariser's is its derivative. N = 1 (a division by zero in the fork) is refused at
    compute time. Bottoms: codes (N x C), labels (N x L). Top: loss.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        for i in (0, 1):
            shape = tuple(bottom[i].shape)
            if len(shape) > 4 or any(d != 1 for d in shape[2:]):
                raise self.error("bottom %d must be N x C (x 1 x 1), got %s" % (i, shape),
                                 ShapeError)

    def _pairs(self, bottom):
        n = bottom[0].shape[0]
        if n < 2:
            raise self.error("needs at least two items: the fork divides by N(N-1) = 0")
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        y = bottom[1].data.reshape(n, -1)
        if y.shape[1] > 1:
            sim = (y.astype(np.float64) @ y.T.astype(np.float64)) > 0
        else:
            yi = y[:, 0].astype(np.int64)
            sim = yi[:, None] == yi[None, :]
        sq = np.einsum("ij,ij->i", x, x)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * x @ x.T, 0.0)
        return x, sim, d2

    def forward_cpu(self, bottom, top):
        p = self.layer_param.hashing_loss_param
        x, sim, d2 = self._pairs(bottom)
        n = x.shape[0]
        upper = np.triu(np.ones((n, n), dtype=bool), 1)
        per = np.where(sim, d2, np.maximum(float(p.bi_margin) - d2, 0.0))
        self.pair_loss = per[upper].sum() / (n * (n - 1))
        reg = np.abs(np.abs(x) - 1.0).sum()
        top[0].data[...] = self.pair_loss + float(p.tradeoff) * reg / n

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        p = self.layer_param.hashing_loss_param
        x, sim, d2 = self._pairs(bottom)
        n = x.shape[0]
        w = float(top[0].diff)
        coef = np.where(sim, 1.0, np.where(float(p.bi_margin) - d2 > 0, -1.0, 0.0))
        np.fill_diagonal(coef, 0.0)
        grad = w / (n * (n - 1)) * (coef.sum(axis=1)[:, None] * x - coef @ x)
        sign = np.where((x >= 1) | ((x <= 0) & (x >= -1)), 1.0, -1.0)
        grad += w / n * float(p.tradeoff) * sign
        bottom[0].diff[...] = grad.reshape(bottom[0].shape)


@register_layer("SetLoss2")
class SetLoss2Layer(LossLayer):
    """A margin between identity centres: with the batch in K blocks of m items (module doc) and
    c_k the mean of block k's features (each item's count(1) values),

        L = 2 / (K(K-1)) sum_{k<l} max(alpha - ||c_k - c_l||^2 / 4, 0)
        dx_i = -w / (K(K-1) m) sum_{l: pair (k, l) active} (c_k - c_l),   k = i's block

    (w the top diff; a pair is active when its term is positive). The gradient is the derivative
    of L. K = 1 divides by zero in the fork; refused here.
    ``set_loss2_param { alpha (default 1) }``.
    Bottoms: features (N x ...), labels (N). Top: loss.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        self.n = bottom[0].shape[0]
        self.dim = bottom[0].count // max(self.n, 1)

    def _centres(self, bottom):
        m = _block_size(self, bottom)
        k = self.n // m
        if k < 2:
            raise self.error("all %d items carry one label: SetLoss2 needs two identities or "
                             "more (the fork divides by K - 1 = 0)" % self.n)
        x = bottom[0].data.reshape(k, m, self.dim).astype(np.float64)
        return m, k, x.mean(axis=1)

    def forward_cpu(self, bottom, top):
        alpha = float(self.layer_param.set_loss2_param.alpha)
        m, k, c = self._centres(bottom)
        diff = c[:, None, :] - c[None, :, :]
        term = alpha - 0.25 * np.einsum("kld,kld->kl", diff, diff)
        active = np.triu(term > 0, 1)
        self.block, self.k = m, k
        self.cat_grad = (diff * (active | active.T)[:, :, None]).sum(axis=1)
        top[0].data[...] = 2.0 * term[active].sum() / k / (k - 1)

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        scale = -float(top[0].diff) / self.k / (self.k - 1) / self.block
        grad = np.repeat(self.cat_grad * scale, self.block, axis=0)
        bottom[0].diff[...] = grad.reshape(bottom[0].shape)


@register_layer("VarLoss")
class VarLossLayer(LossLayer):
    """The spread of each identity around its centre: with the batch in blocks of m items
    (module doc) and c_k the mean of block k,

        L = 1 / (2N) sum_i ||x_i - c_{k(i)}||^2,   dx_i = w / N (x_i - c_{k(i)})

    (w the top diff, which the fork reads in its forward; the derivative of L, the centre's share
    summing to zero over a block). No parameter. Bottoms: features (N x ...), labels (N).
    Top: loss.
    """

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        m = _block_size(self, bottom)
        x = bottom[0].data.reshape(n // m, m, -1).astype(np.float64)
        self.centred = x - x.mean(axis=1, keepdims=True)
        top[0].data[...] = np.square(self.centred).sum() / 2.0 / n

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if propagate_down[0]:
            n = bottom[0].shape[0]
            bottom[0].diff[...] = (float(top[0].diff) / n * self.centred).reshape(bottom[0].shape)
