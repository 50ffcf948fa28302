"""Cysu/dgd_person_reid's ``GuidedDropout`` (Domain Guided Dropout, Xiao et al. 2016).

Source: the fork of BVLC Caffe that dgd_person_reid builds (also in minhpvo/Caffe):
``src/caffe/layers/guided_dropout_layer.cpp`` and its ``GuidedDropoutParameter`` (field 138 of
LayerParameter).
"""
import numpy as np

from ... import common
from ...layers.base import Layer, fork_param, register_layer


@register_layer("GuidedDropout")
class GuidedDropoutLayer(Layer):
    """Dropout of whole channels chosen by a per-sample guidance vector.

    Bottoms: ``x`` ``N x C x ...`` and ``guidance`` ``N x C x 1 x 1`` (``N x C`` accepted); top:
    ``y``, the shape of ``x`` (in place allowed). ``guided_dropout_param { type: "deterministic"
    guidance_threshold: 0 sigmoid_scaler: 1 }``:

    * ``deterministic`` (both phases): mask ``m[n, c] = guidance[n, c] > guidance_threshold``,
      ``s[n] = sum_c m[n, c]``; ``y = x * m * C / s[n]`` (``y = x * m`` when ``s[n] = 0``);
    * ``stochastic``, TRAIN: ``p[n, c] = sigmoid(sigmoid_scaler * guidance[n, c])``, ``m[n, c] =
      u <= p[n, c]`` for ``u`` uniform in [0, 1) (``caffepy.common.rng``), ``s[n] = sum_c p[n, c]``;
      ``y = x * m * C / s[n]``; TEST: ``y = x``.

    Backward: ``dx = dy * m * C / s[n]`` with the forward's mask (``dx = dy`` in stochastic
    TEST); no gradient to the guidance. Without the fork's schema (``--proto``) the parameter's
    defaults are used.
    """

    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.kind, self.threshold, self.scaler = "deterministic", 0.0, 1.0
        p = fork_param(self.layer_param, "guided_dropout_param")
        if p is not None:
            self.kind, self.threshold, self.scaler = (
                str(p.type), float(p.guidance_threshold), float(p.sigmoid_scaler))
        if self.kind not in ("deterministic", "stochastic"):
            raise self.error('type must be "deterministic" or "stochastic", got "%s"' % self.kind)

    def reshape(self, bottom, top):
        x, g = bottom[0].shape, bottom[1].shape
        if len(x) < 2 or tuple(g[:2]) != tuple(x[:2]) or any(d != 1 for d in g[2:]):
            raise self.error("guidance must be N x C x 1 x 1 for input %s, got %s" % (x, g))
        if top[0] is not bottom[0]:
            top[0].reshape(*x)

    def _factor(self, bottom):
        """(N x C) per-channel multiplier m * C / s, or None for the identity."""
        g = bottom[1].data.reshape(bottom[1].shape[0], -1).astype(np.float64)
        c = g.shape[1]
        if self.kind == "deterministic":
            mask = (g > self.threshold).astype(np.float64)
            scale = mask.sum(axis=1, keepdims=True)
        else:
            if _is_train(self.phase):
                prob = 1.0 / (1.0 + np.exp(-g * self.scaler))
                mask = (common.rng().random(g.shape) <= prob).astype(np.float64)
                scale = prob.sum(axis=1, keepdims=True)
            else:
                return None
        return mask * np.where(scale > 0, c / np.where(scale > 0, scale, 1.0), 1.0)

    def forward_cpu(self, bottom, top):
        self.factor = self._factor(bottom)
        x = bottom[0].data
        if self.factor is None:
            if top[0] is not bottom[0]:
                top[0].data[...] = x
            return
        f = self.factor.reshape(self.factor.shape + (1,) * (x.ndim - 2))
        top[0].data[...] = x * f

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff
        if self.factor is None:
            if top[0] is not bottom[0]:
                bottom[0].diff[...] = dy
            return
        f = self.factor.reshape(self.factor.shape + (1,) * (dy.ndim - 2))
        bottom[0].diff[...] = dy * f


def _is_train(phase):
    """Whether ``phase`` (enum value or string) is TRAIN."""
    if isinstance(phase, str):
        return phase.upper() == "TRAIN"
    return int(phase) == 0
