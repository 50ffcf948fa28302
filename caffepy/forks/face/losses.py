"""Face-recognition losses of the forks: CenterLoss (ydwen/caffe-face), SphereFace's A-Softmax
MarginInnerProduct (wy1iu/sphereface) and L-Softmax's LargeMarginInnerProduct
(wy1iu/LargeMargin_Softmax_Loss). AM-Softmax / NormFace pieces are in ``amsoftmax.py``.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


def _labels(layer, blob, m, n):
    y = blob.data.reshape(-1).astype(np.int64)
    if y.size != m:
        raise layer.error("%d labels for %d rows" % (y.size, m), ShapeError)
    if y.size and (y.min() < 0 or y.max() >= n):
        raise layer.error("label %d outside [0, %d)" % (y.max() if y.max() >= n else y.min(), n))
    return y


class CentresLoss(LossLayer):
    """A loss against one learned centre per class: ``<param_field> { num_output <filler_field>
    axis }``; x (M, K...) is flattened from ``axis``; param: the centres (num_output, K); top: the
    loss (). Subclasses give the two names and the loss (CenterLoss here; CenterCosLoss)."""
    param_field = filler_field = None

    def layer_setup(self, bottom, top):
        p = getattr(self.layer_param, self.param_field)
        if not p.num_output:
            raise self.error("%s.num_output is required" % self.param_field)
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.k = bottom[0].count_range(self.axis)
        self.init_param_blobs([(p.num_output, self.k)], getattr(p, self.filler_field))
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        if bottom[0].count_range(self.axis) != self.k:
            raise self.error("the bottom has %d features per row, the centres %d"
                             % (bottom[0].count_range(self.axis), self.k), ShapeError)
        self.m = bottom[0].count_range(0, self.axis)
        top[0].reshape(())


@register_layer("CenterLoss")
class CenterLossLayer(CentresLoss):
    """Center loss (Wen et al. 2016, caffe-face).

        L = sum_i ||x_i - c_{y_i}||^2 / (2 M);   dx_i = dL * (x_i - c_{y_i}) / M
    The centre "gradient" is the fork's update rule, not dL/dc, and ignores the loss weight:
        dc_j += sum_{i: y_i = j} (c_j - x_i) / (1 + #{i: y_i = j})
    (the solver then moves c_j by lr * lr_mult times it: alpha of the paper).

    prototxt: ``center_loss_param { num_output center_filler axis: 1 }``.
    Bottoms: x (M, K...) flattened from ``axis``, label (M). Top: the loss ().
    Param: centres (num_output, K).
    """

    param_field, filler_field = "center_loss_param", "center_filler"

    def forward_cpu(self, bottom, top):
        c = self.blobs[0].data
        self.y = _labels(self, bottom[1], self.m, c.shape[0])
        self.dist = bottom[0].data.reshape(self.m, self.k) - c[self.y]
        top[0].data[...] = np.square(self.dist).sum() / self.m / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if self.param_propagate_down[0]:
            n = self.blobs[0].shape[0]
            count = np.bincount(self.y, minlength=n).astype(self.dtype)
            total = np.zeros((n, self.k), dtype=self.dtype)
            np.add.at(total, self.y, -self.dist)
            self.blobs[0].diff[...] += total / (1 + count)[:, None]
        if propagate_down[0]:
            bottom[0].diff.reshape(self.m, self.k)[...] = self.dist * (top[0].diff / self.m)


def _psi(kind, c):
    """SphereFace's psi(cos) with its sign constants, and psi'(cos), for m = kind + 1."""
    s0 = np.sign(c)
    if kind == 1:
        return 2 * s0 * c ** 2 - 1, 4 * s0 * c
    if kind == 2:
        s1 = np.sign(np.abs(c) - 0.5)
        s2 = s0 * (1 + s1) - 2
        return s1 * (4 * c ** 3 - 3 * c) + s2, s1 * (12 * c ** 2 - 3)
    s3 = s0 * np.sign(2 * c ** 2 - 1)
    s4 = 2 * s0 + s3 - 3
    return s3 * (8 * c ** 4 - 8 * c ** 2 + 1) + s4, s3 * (32 * c ** 3 - 16 * c)


@register_layer("MarginInnerProduct")
class MarginInnerProductLayer(Layer):
    """SphereFace's A-Softmax inner product (type SINGLE..QUADRUPLE: margin m = 1..4).

    Every forward first rescales each weight row to unit norm (in place, as the fork), counts
    ``iter += 1`` (from ``iteration``) and sets lambda = max(base (1 + gamma iter)^-power,
    lambda_min). With c = cos(theta) = x.w_j / |x|:
        y_ij = x.w_j                                      (j != label_i, and every j for SINGLE)
        y_ij = (|x| psi(c) + lambda x.w_j) / (1 + lambda) (j == label_i)
        psi: m=2: 2 s0 c^2 - 1;  m=3: s1 (4c^3 - 3c) + s2;  m=4: s3 (8c^4 - 8c^2 + 1) + s4
        s0 = sign(c), s1 = sign(|c| - 1/2), s2 = s0 (1 + s1) - 2, s3 = s0 sign(2c^2 - 1),
        s4 = 2 s0 + s3 - 3   (psi(theta) = (-1)^k cos(m theta) - 2k).
    Backward is the fork's: dW += dy^T x (the plain inner-product rule); dx = dy W for the other
    columns; for the label column the direction (a w_j + b x) with a = psi'(c),
    b = (psi(c) - c psi'(c)) / |x| is rescaled to unit (a, b) norm before it is scaled by
    dy / (1 + lambda), plus lambda / (1 + lambda) dy w_j: not the exact gradient for m > 1.

    prototxt: ``margin_inner_product_param { num_output type: SINGLE weight_filler axis: 1
    base: 1 gamma: 0 power: 1 iteration: 0 lambda_min: 0 }``.
    Bottoms: x (M, K...) flattened from ``axis``, label (M). Tops: y (M, num_output)
    [, lambda (1)]. Param: weight (num_output, K).
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2
    param_field = "margin_inner_product_param"
    unit_weights = True          # W's rows rescaled to unit norm every forward (|w_label| = 1)

    def layer_setup(self, bottom, top):
        p = getattr(self.layer_param, self.param_field)
        if not p.num_output:
            raise self.error("%s.num_output is required" % self.param_field)
        self.kind = int(p.type)
        self.iter = float(p.iteration)
        self.lam = 0.0
        self.axis = bottom[0].canonical_axis_index(p.axis)
        self.k = bottom[0].count_range(self.axis)
        self.init_param_blobs([(p.num_output, self.k)], p.weight_filler)
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        if bottom[0].count_range(self.axis) != self.k:
            raise self.error("input size incompatible with the weights", ShapeError)
        self.m = bottom[0].count_range(0, self.axis)
        top[0].reshape(tuple(bottom[0].shape[:self.axis]) + (self.blobs[0].shape[0],))
        if len(top) > 1:
            top[1].reshape(1)

    def _next_lambda(self, top):
        """One step of the lambda schedule, max(base (1 + gamma iter)^-power, lambda_min), shown
        on the optional second top."""
        p = getattr(self.layer_param, self.param_field)
        self.iter += 1
        self.lam = max(p.base * (1 + p.gamma * self.iter) ** -p.power, p.lambda_min)
        if len(top) > 1:
            top[1].data[...] = self.lam

    def forward_cpu(self, bottom, top):
        self._next_lambda(top)
        w = self.blobs[0].data
        if self.unit_weights:
            w /= np.sqrt(np.square(w).sum(axis=1, keepdims=True))
        x = bottom[0].data.reshape(self.m, self.k)
        y = top[0].data.reshape(self.m, -1)
        y[...] = x @ w.T
        if self.kind == 0:
            return
        self.y = _labels(self, bottom[1], self.m, w.shape[0])
        rows = np.arange(self.m)
        self.xn = np.sqrt(np.square(x).sum(axis=1))
        self.wn = 1.0 if self.unit_weights else np.sqrt(np.square(w[self.y]).sum(axis=1))
        self.c = y[rows, self.y] / (self.xn * self.wn)
        psi, _ = _psi(self.kind, self.c)
        y[rows, self.y] = (self.xn * self.wn * psi + self.lam * y[rows, self.y]) / (1 + self.lam)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.m, -1)
        x = bottom[0].data.reshape(self.m, self.k)
        w = self.blobs[0].data
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += dy.T @ x
        if not propagate_down[0]:
            return
        dx = dy @ w
        if self.kind:
            rows = np.arange(self.m)
            psi, dpsi = _psi(self.kind, self.c)
            a, b = dpsi, (psi - self.c * dpsi) / self.xn
            norm = np.sqrt(a * a + b * b)
            g = dy[rows, self.y] / (1 + self.lam)
            wy = w[self.y]
            dx += (g * a / norm)[:, None] * wy + (g * b / norm)[:, None] * x - g[:, None] * wy
        bottom[0].diff.reshape(self.m, self.k)[...] = dx

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("LargeMarginInnerProduct")
class LargeMarginInnerProductLayer(MarginInnerProductLayer):
    """L-Softmax's inner product (wy1iu/LargeMargin_Softmax_Loss): SphereFace's margin without
    the weight normalisation. With c = x.w_j / (|x| |w_j|) and psi as in MarginInnerProduct:
        y_ij = x.w_j (j != label_i, and every j for SINGLE)
        y_ij = (|x| |w_j| psi(c) + lambda x.w_j) / (1 + lambda) (j == label_i)
    Backward is the exact gradient (the fork's): for the label column,
        d/dx = (psi'(c) w_j + |w_j| (psi(c) - c psi'(c)) x / |x| + lambda w_j) / (1 + lambda),
    and symmetrically for w_j; plain inner-product gradients elsewhere.

    prototxt: ``largemargin_inner_product_param { num_output type: SINGLE weight_filler axis: 1
    base: 1 gamma: 0 power: 1 iteration: 0 lambda_min: 0 }``. Bottoms: x (M, K...), label (M).
    Tops: y (M, num_output) [, lambda (1)]. Param: weight (num_output, K).
    """
    param_field = "largemargin_inner_product_param"
    unit_weights = False

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff.reshape(self.m, -1)
        x = bottom[0].data.reshape(self.m, self.k)
        w = self.blobs[0].data
        if self.kind:
            rows = np.arange(self.m)
            psi, dpsi = _psi(self.kind, self.c)
            g = dy[rows, self.y] / (1 + self.lam)
            rest = psi - self.c * dpsi
            wy = w[self.y]
            # the label entries' own terms, minus what the plain products below add for them
            gx = g[:, None] * (dpsi[:, None] * wy + (self.wn * rest / self.xn)[:, None] * x - wy)
            gw = g[:, None] * (dpsi[:, None] * x + (self.xn * rest / self.wn)[:, None] * wy - x)
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += dy.T @ x
            if self.kind:
                np.add.at(self.blobs[0].diff, self.y, gw)
        if propagate_down[0]:
            dx = dy @ w
            if self.kind:
                dx += gx
            bottom[0].diff.reshape(self.m, self.k)[...] = dx
