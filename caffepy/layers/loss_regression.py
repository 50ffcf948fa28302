"""Regression and metric losses: EuclideanLoss, ContrastiveLoss, SmoothL1Loss (Faster R-CNN fork).

Unlike the classification losses, these can backpropagate to both of their first two bottoms
(prediction and target); the scalar top diff holds the loss weight.
"""
import numpy as np

from .base import LossLayer, fork_param, register_layer


def check_same_dimension(layer, bottom):
    """Caffe's EuclideanLoss check: bottoms 0 and 1 hold the same count per sample."""
    if bottom[0].count_range(1) != bottom[1].count_range(1):
        raise layer.shape_mismatch("inputs must have the same dimension (%s vs %s)"
                                   % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)


@register_layer("EuclideanLoss")
class EuclideanLossLayer(LossLayer):
    """Half the mean (over N) squared L2 distance.

    loss = sum (a - b)^2 / (2 N);  dL/da = (a - b) * top_diff / N;  dL/db = -(a - b) * top_diff / N

    prototxt: no parameters. Blobs: bottoms a (N, ...), b (N, ...) with equal count per example;
    top loss (scalar). Both bottoms may receive a gradient (force_backward included).
    """

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        check_same_dimension(self, bottom)

    def allow_force_backward(self, bottom_index):
        return True

    def forward_cpu(self, bottom, top):
        self.diff = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        top[0].data[...] = np.sum(self.diff * self.diff) / bottom[0].shape[0] / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                alpha = sign * float(top[0].diff) / bottom[i].shape[0]
                bottom[i].diff[...] = (alpha * self.diff).reshape(bottom[i].shape)


@register_layer("ContrastiveLoss")
class ContrastiveLossLayer(LossLayer):
    """Contrastive loss on pairs of feature vectors a_n, b_n with similarity labels y_n (Hadsell et al.).

    d_n = ||a_n - b_n||_2
    loss = sum_n [ y_n d_n^2 + (1 - y_n) max(margin - d_n, 0)^2 ] / (2 N)
    legacy_version: the dissimilar term is max(margin - d_n^2, 0) instead.
    dL/da_n = top_diff / N * (a_n - b_n) * (y_n ? 1 : -(margin - d_n) / (d_n + 1e-4), 0 when the
    hinge is inactive; legacy: -1);  dL/db_n = -dL/da_n.  (Caffe's 1e-4 guard is kept.)

    prototxt: ``contrastive_loss_param { margin: 1.0 legacy_version: false }``.
    Blobs: bottom a (N, C[, 1, 1]), bottom b (N, C[, 1, 1]), bottom y (N values, nonzero =
    similar); top loss (scalar). a and b receive gradients; y does not.
    """
    exact_num_bottom_blobs = 3

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        n = bottom[0].shape[0]
        if bottom[0].count_range(1) != bottom[1].count_range(1):
            raise self.shape_mismatch("the two feature bottoms must have the same size (%s vs %s)"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)
        if bottom[2].count != n:
            raise self.needs("the similarity bottom must hold one value per pair (%d), got shape %s"
                             % (n, bottom[2].shape), [(2, (n,), None)])

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2

    def legacy_form(self):
        """Whether the dissimilar term puts the margin on d^2 (``legacy_version``)."""
        return self.layer_param.contrastive_loss_param.legacy_version

    def forward_cpu(self, bottom, top):
        p = self.layer_param.contrastive_loss_param
        n = bottom[0].shape[0]
        self.diff = bottom[0].data.reshape(n, -1) - bottom[1].data.reshape(n, -1)
        self.dist_sq = np.sum(self.diff * self.diff, axis=1)
        self.similar = bottom[2].data.reshape(-1).astype(np.int64) != 0
        if self.legacy_form():
            dissimilar = np.maximum(p.margin - self.dist_sq, 0)
        else:
            dissimilar = np.maximum(p.margin - np.sqrt(self.dist_sq), 0) ** 2
        loss = np.sum(np.where(self.similar, self.dist_sq, dissimilar))
        top[0].data[...] = loss / n / 2.0

    def backward_cpu(self, top, propagate_down, bottom):
        p = self.layer_param.contrastive_loss_param
        if self.legacy_form():
            mdist = p.margin - self.dist_sq
            beta = np.full_like(self.dist_sq, -1.0)
        else:
            dist = np.sqrt(self.dist_sq)
            mdist = p.margin - dist
            beta = -mdist / (dist + 1e-4)
        coef = np.where(self.similar, 1.0, np.where(mdist > 0, beta, 0.0))
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                alpha = sign * float(top[0].diff) / bottom[i].shape[0]
                bottom[i].diff[...] = (alpha * coef[:, None] * self.diff).reshape(bottom[i].shape)


@register_layer("SmoothL1Loss")
class SmoothL1LossLayer(LossLayer):
    """Smooth L1 (Huber) loss of Fast/Faster R-CNN (fork layer; rbgirshick/caffe-fast-rcnn).

    d = w_in * (a - b);  f(d) = 0.5 (sigma d)^2 if |d| < 1 / sigma^2 else |d| - 0.5 / sigma^2
    loss = sum w_out * f(d) / N
    dL/da = top_diff / N * w_in * w_out * f'(d),  f'(d) = sigma^2 d if |d| < 1/sigma^2 else sign(d);
    dL/db = -dL/da.  Without weight bottoms w_in = w_out = 1.

    prototxt: ``smooth_l1_loss_param { sigma: 1 }`` (fork field; defaults apply when the schema
    lacks it). Blobs: bottoms a (N, ...), b, and optionally inside weights w_in and outside
    weights w_out (both or neither), all with the same per-example size; top loss (scalar).
    a and b may receive gradients; the weights do not.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 4

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "smooth_l1_loss_param")
        sigma = p.sigma if p is not None else 1.0
        self.sigma2 = float(sigma) * float(sigma)
        self.has_weights = len(bottom) >= 3
        if self.has_weights and len(bottom) != 4:
            raise self.error("if weights are used, both inside and outside weights must be given "
                             "(4 bottoms), got %d bottoms" % len(bottom))

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        for i in range(1, len(bottom)):
            if bottom[i].count_range(1) != bottom[0].count_range(1):
                raise self.needs("bottom %d has shape %s; expected the per-example size of "
                                 "bottom 0 %s" % (i, bottom[i].shape, bottom[0].shape),
                                 [(i, bottom[0].shape, 0)])

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2

    def _weight(self, bottom, i):
        return bottom[i].data.reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        d = bottom[0].data - bottom[1].data.reshape(bottom[0].shape)
        if self.has_weights:
            d = d * self._weight(bottom, 2)
        self.d = d
        ad = np.abs(d)
        err = np.where(ad < 1.0 / self.sigma2, 0.5 * self.sigma2 * d * d, ad - 0.5 / self.sigma2)
        if self.has_weights:
            err = err * self._weight(bottom, 3)
        top[0].data[...] = np.sum(err) / bottom[0].shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        d = self.d
        grad = np.where(np.abs(d) < 1.0 / self.sigma2, self.sigma2 * d, np.sign(d))
        if self.has_weights:
            grad = grad * self._weight(bottom, 2) * self._weight(bottom, 3)
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                alpha = sign * float(top[0].diff) / bottom[i].shape[0]
                bottom[i].diff[...] = (alpha * grad).reshape(bottom[i].shape)
