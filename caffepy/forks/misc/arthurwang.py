"""ArthurWang123/caffe@3e28456 (a 2014 Caffe from before type strings): its V1 types SUBSPACEPOOLING
(``SubspacePooling``), IM2PERPIXEL (``Im2perPixel``), SOFTMAX_MULTILABEL_LOSS
(``SoftmaxMultilabelLoss``) and SOFTMAX_CONDITION_LOSS (``SoftmaxConditionWithLoss``). Its
InvertGradient, LabelToOnehot, SoftmaxKLLoss and SoftmaxEntropyLoss are in ``early_2014``."""
import math

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer

_LOG_THRESHOLD = 1e-20      # the fork's kLOG_THRESHOLD


@register_layer("SubspacePooling")
class SubspacePoolingLayer(Layer):
    """Pooling across channels at each pixel: window pc covers channels [pc s, min(pc s + k, C)),
    Cp = ceil((C - k) / s) + 1 windows (``pooling_param { pool kernel_size stride }``; pad must
    be 0). MAX: the largest (the first of equal ones), with an optional second top holding the
    winner's flat index into the bottom; AVE: the mean over the window's channels. STOCHASTIC is
    not implemented in the fork. Top N x Cp x H x W; backward routes dy to the winner (MAX) or
    spreads dy / window size (AVE)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.pooling_param
        self.method = p.pool
        if p.pad or p.pad_h or p.pad_w:
            raise self.error("padding is not implemented for subspace pooling")
        if self.method not in (p.MAX, p.AVE):
            raise self.error("pool %s is not implemented for subspace pooling"
                             % p.PoolMethod.Name(self.method))
        if len(top) > 1 and self.method != p.MAX:
            raise self.error("a second (mask) top needs pool: MAX")
        self.k, self.s = int(p.kernel_size), int(p.stride)
        if self.k < 1 or self.s < 1:
            raise self.error("kernel_size and stride must be positive")

    def reshape(self, bottom, top):
        n, c = bottom[0].shape[:2]
        if bottom[0].num_axes != 4 or self.k > c:
            raise self.error("expected N x C x H x W with C >= kernel_size %d, got %s"
                             % (self.k, bottom[0].shape), ShapeError)
        self.cp = int(math.ceil(float(c - self.k) / self.s)) + 1
        self.windows = [(pc * self.s, min(pc * self.s + self.k, c)) for pc in range(self.cp)]
        shape = (n, self.cp) + bottom[0].shape[2:]
        for t in top:
            t.reshape(shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        n, c, h, w = x.shape
        if self.method == self.layer_param.pooling_param.AVE:
            for pc, (a, b) in enumerate(self.windows):
                top[0].data[:, pc] = x[:, a:b].mean(axis=1)
            return
        self.arg = np.empty((n, self.cp, h, w), np.int64)
        for pc, (a, b) in enumerate(self.windows):
            self.arg[:, pc] = a + np.argmax(x[:, a:b], axis=1)
            top[0].data[:, pc] = np.take_along_axis(x, self.arg[:, pc:pc + 1], axis=1)[:, 0]
        if len(top) > 1:
            nn, hh, ww = np.meshgrid(np.arange(n), np.arange(h), np.arange(w), indexing="ij")
            flat = ((nn[:, None] * c + self.arg) * h + hh[:, None]) * w + ww[:, None]
            top[1].data[...] = flat

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff
        dx = np.zeros_like(bottom[0].diff)
        for pc, (a, b) in enumerate(self.windows):
            if self.method == self.layer_param.pooling_param.AVE:
                dx[:, a:b] += dy[:, pc:pc + 1] / float(b - a)
            else:
                np.put_along_axis(dx, self.arg[:, pc:pc + 1], np.take_along_axis(
                    dx, self.arg[:, pc:pc + 1], axis=1) + dy[:, pc:pc + 1], axis=1)
        bottom[0].diff[...] = dx


@register_layer("Im2perPixel")
class Im2perPixelLayer(Layer):
    """Each pixel's channel vector as an item: N x C x H x W to (N H W) x C x 1 x 1, items in
    (n, h, w) order. Backward: the inverse reordering."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("expected N x C x H x W, got %s" % (bottom[0].shape,), ShapeError)
        n, c, h, w = bottom[0].shape
        top[0].reshape((n * h * w, c, 1, 1))

    def forward_cpu(self, bottom, top):
        c = bottom[0].shape[1]
        top[0].data[...] = bottom[0].data.transpose(0, 2, 3, 1).reshape(-1, c, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n, c, h, w = bottom[0].shape
            bottom[0].diff[...] = top[0].diff.reshape(n, h, w, c).transpose(0, 3, 1, 2)


@register_layer("SoftmaxMultilabelLoss")
class SoftmaxMultilabelLossLayer(LossLayer):
    """Softmax cross-entropy against soft labels of the scores' shape: p = softmax over the
    channels of N x C (x 1 x 1) scores, loss = sum t (-log max(p, 1e-20)) / N. Backward as the
    fork: dL/dx = (p - t) / N (the derivative for label rows summing to 1) and dL/dt =
    -log max(p, 1e-20) / N."""

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.shape != bottom[1].shape or x.num_axes < 2 or x.count != x.shape[0] * x.shape[1]:
            raise self.error("expected scores and labels of one N x C (x 1 x 1) shape, got %s "
                             "and %s" % (x.shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.p = e / e.sum(axis=1, keepdims=True)
        self.nlog = -np.log(np.maximum(self.p, _LOG_THRESHOLD))
        self.t = bottom[1].data.reshape(n, -1).astype(np.float64)
        top[0].data[...] = np.sum(self.t * self.nlog) / n

    def backward_cpu(self, top, propagate_down, bottom):
        s = float(top[0].diff) / bottom[0].shape[0]
        if propagate_down[0]:
            bottom[0].diff[...] = (s * (self.p - self.t)).reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = (s * self.nlog).reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return True


@register_layer("SoftmaxConditionWithLoss")
class SoftmaxConditionWithLossLayer(LossLayer):
    """Softmax loss over the items whose label l satisfies ge_than <= l <= le_than
    (``condition_param``; without one every item counts; with one, its unset bounds are the fork's
    defaults 0 and -1, which no label meets): loss = coeff / N sum -log max(p[l], 1e-20), p the
    softmax of the item's C scores (N x C x 1 x 1), coeff = ``loss_param { coeff: 1 }``.
    dL/dx = coeff / N (p - onehot(l)) for those items, 0 for the others."""

    def layer_setup(self, bottom, top):
        self.coeff = float(self.layer_param.loss_param.coeff)
        if self.layer_param.HasField("condition_param"):
            p = self.layer_param.condition_param
            self.lo = float(p.ge_than) if p.HasField("ge_than") else 0.0
            self.hi = float(p.le_than) if p.HasField("le_than") else -1.0
        else:
            self.lo, self.hi = -np.inf, np.inf

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 2 or x.count != x.shape[0] * x.shape[1] or \
                bottom[1].count != x.shape[0]:
            raise self.error("expected scores N x C (x 1 x 1) and N labels, got %s and %s"
                             % (x.shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, c).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.p = e / e.sum(axis=1, keepdims=True)
        lab = bottom[1].data.reshape(n)
        self.on = (lab >= self.lo) & (lab <= self.hi)
        self.lab = lab.astype(np.int64)
        if np.any(self.on & ((self.lab < 0) | (self.lab >= c))):
            raise self.error("a counted label is outside [0, %d)" % c)
        idx = np.nonzero(self.on)[0]
        picked = self.p[idx, self.lab[idx]]
        top[0].data[...] = -np.log(np.maximum(picked, _LOG_THRESHOLD)).sum() * self.coeff / n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            n = bottom[0].shape[0]
            g = np.where(self.on[:, None], self.p, 0.0)
            idx = np.nonzero(self.on)[0]
            g[idx, self.lab[idx]] -= 1
            g *= float(top[0].diff) * self.coeff / n
            bottom[0].diff[...] = g.reshape(bottom[0].shape)
