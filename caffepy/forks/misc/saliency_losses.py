"""Saliency-map losses of nian-liu/DSCLRCN (commit fbbd35f1, caffe-master/src/caffe/layers/
kldiv_loss_layer.cpp / .cu and nss_loss_layer.cpp): ``KLDivLoss`` and ``NSSLoss``, which
sunnycia/scripts' saliency nets also use. Both compare a one-channel saliency map with a
one-channel fixation map, image by image."""
import numpy as np

from ...layers.base import LossLayer, register_layer

EPS = 1e-6


class _SaliencyLoss(LossLayer):
    """Bottoms: saliency map x (N, 1, H, W), fixation map t (N, 1, H, W). Top: the loss ()."""

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        s0, s1 = tuple(bottom[0].shape), tuple(bottom[1].shape)
        if len(s0) != 4 or s0[1] != 1:
            raise self.error("the saliency map must be N x 1 x H x W (got %s)" % (s0,))
        if s1 != s0:
            raise self.needs("the fixation map must be N x 1 x H x W as the saliency map (got %s "
                             "and %s)" % (s0, s1), [(1, s0, 0)])

    def _maps(self, bottom):
        n = bottom[0].shape[0]
        return (bottom[0].data.reshape(n, -1).astype(np.float64),
                bottom[1].data.reshape(n, -1).astype(np.float64))

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the fixation map (bottom 1)")
        if propagate_down[0]:
            w = float(top[0].diff.reshape(()))
            g = self._unit_grad(bottom) * (w / bottom[0].shape[0])
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("KLDivLoss")
class KLDivLossLayer(_SaliencyLoss):
    """DSCLRCN's KL divergence between the normalised fixation and saliency maps. Per image n,
    with eps = 1e-6, S = sum_i |x_i|, F = sum_i |t_i|:

        q_i = t_i / (F + eps),   p_i = x_i / (S + eps)
        loss = 1/N sum_n sum_i q_i log(q_i / (p_i + eps) + eps)

    (the fork's Forward_cpu; its GPU kernel adds the terms' absolute values instead, which
    differs where some q_i < p_i.) Backward is the fork's (CPU and GPU alike), w the loss weight:

        dL/dx_i = -w/N q_i (S - x_i) / (S x_i + eps)

    For positive maps that is -q_i / x_i + q_i / S, while the derivative of the loss is about
    -q_i / x_i + 1 / S (sum_j q_j = 1): the fork's gradient leaves out the normalisation's
    coupling of the pixels. The fixation map gets no gradient (the fork stops if asked).

    prototxt: no parameters of its own (``loss_weight`` as every loss).
    """

    def forward_cpu(self, bottom, top):
        x, t = self._maps(bottom)
        s = np.sum(np.abs(x), axis=1, keepdims=True)
        q = t / (np.sum(np.abs(t), axis=1, keepdims=True) + EPS)
        p = x / (s + EPS)
        self._s, self._q = s, q
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = q * np.log(q / (p + EPS) + EPS)
        top[0].data[...] = np.sum(terms) / x.shape[0]

    def _unit_grad(self, bottom):
        x = self._maps(bottom)[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return -self._q * (self._s - x) / (self._s * x + EPS)


@register_layer("NSSLoss")
class NSSLossLayer(_SaliencyLoss):
    """DSCLRCN's negative normalised-scanpath-saliency loss (the saliency map is expected to be
    mean / variance normalised by an MVN layer before it). Per image n, F = sum_i |t_i|:

        loss = -1/N sum_n sum_i x_i t_i / F
        dL/dx_i = -w/N t_i / F   (w: the loss weight; the fork's backward, the exact derivative)

    An all-zero fixation map divides by zero, as in the fork. The fixation map gets no gradient
    (the fork stops if asked). prototxt: no parameters of its own (sunnycia's nets give it
    ``loss_weight: -1``).
    """

    def forward_cpu(self, bottom, top):
        x = self._maps(bottom)[0]
        g = self._unit_grad(bottom)
        top[0].data[...] = np.sum(x * g) / x.shape[0]

    def _unit_grad(self, bottom):
        t = self._maps(bottom)[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            return -t / np.sum(np.abs(t), axis=1, keepdims=True)
