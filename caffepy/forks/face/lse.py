"""happynear/caffe-windows' GlobalLSEMargin (AM-Softmax's "auto" nets: a margin estimated from the
batch, a learned scale) and its Scale with ``min_value`` / ``max_value``.
"""
import numpy as np

from ...fillers import get_filler
from ...layers.base import Layer, register_layer, register_variant
from .losses import _labels
from ...layers.scale import ScaleLayer


def mean_shift(margins, mu, loop):
    """The fork's MeanShift: average the margins within 0.1 of mu, up to ``loop`` rounds (stop
    when mu moves < 0.001); none within 0.1 restarts from the mean of all once (the fork would
    restart for ever if none is within 0.1 of that mean either: caffepy returns that mean)."""
    last, restarted = mu, False
    while loop > 0:
        loop -= 1
        near = margins[np.abs(margins - mu) < 0.1]
        if near.size == 0:
            mu = last = float(margins.mean())
            if restarted:
                break
            restarted, loop = True, loop + 1
            continue
        mu = float(near.mean())
        if abs(last - mu) < 0.001:
            break
        last = mu
    return mu


@register_layer("GlobalLSEMargin")
class GlobalLSEMarginLayer(Layer):
    """happynear's GlobalLSEMargin (its GPU code; the CPU one is NOT_IMPLEMENTED), every phase.

    With cosines x (M, D), labels, scale s (param 0, clipped in place to [scale_param.min_value,
    max_value]; or per-row norms r_i from a third bottom, "original norm"):
        t_i = x[i, label_i];  n_i = max(-1, max_{j != label_i} x_ij)
        LSE_i = log(sum_{j != label_i} exp(s (x_ij - n_i))) / s + n_i;   g_i = t_i - LSE_i
    The margin m (param 1, 0 = not yet set) follows the mean-shift mode of the g_i: first
    m = mean_shift(g, mean(g), 20 rounds), then m = 0.9 m + 0.1 mean_shift(g, m, 1 round) (NaN
    leaves m). Top: y = s x, with y[i, label_i] = s (t_i - m) when m > 0 (r_i instead of s for the
    third bottom); second top [s (or mean r), mean t, mean LSE, mean n, m]. Backward (the fork's:
    m held): dx = s dy (r_i dy); ds = sum(dy y) / s, written (not accumulated), as the fork;
    dr_i = sum_j dy_ij y_ij / r_i.

    prototxt: ``scale_param { filler (default: the value 30) min_value max_value }``; the param
    specs default to [lr_mult 1 (0 with a third bottom), decay 0] and [lr_mult 0, decay 0].
    Bottoms: cosines (M, D), labels (M) [, norms (M)]. Tops: (M, D) [, statistics (5)].
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.scale_param
        self.original_norm = len(bottom) == 3
        if not self.blobs:
            self.blobs = [self.new_blob((1,)), self.new_blob((1,))]
            if p.HasField("filler"):
                get_filler(p.filler).fill(self.blobs[0])
            else:
                self.blobs[0].data[...] = 30
        elif [b.count for b in self.blobs] != [1, 1]:
            raise self.error("expected 2 parameter blobs of 1 value (scale, margin)")
        specs = self.layer_param.param
        if not specs:
            s = specs.add()
            s.lr_mult, s.decay_mult = (0.0 if self.original_norm else 1.0), 0.0
        if len(specs) == 1:
            s = specs.add()
            s.lr_mult, s.decay_mult = 0.0, 0.0
        self.lo = p.min_value if p.HasField("min_value") else 0.0
        self.hi = p.max_value if p.HasField("max_value") else float(np.finfo(np.float32).max)
        self.param_propagate_down = [not self.original_norm, False]

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 2 or bottom[0].shape[0] != bottom[1].count:
            raise self.error("cosines %s and labels %s: one label per row"
                             % (bottom[0].shape, bottom[1].shape))
        if self.original_norm and bottom[2].count != bottom[0].shape[0]:
            raise self.error("the norms must hold one value per row")
        top[0].reshape(bottom[0].shape)
        if len(top) > 1:
            top[1].reshape((5,))

    def _update_margin(self, g):
        m = self.blobs[1].data
        if m[0] == 0:
            batch = mean_shift(g, float(g.mean()), 20)
            if not np.isnan(batch):
                m[0] = batch
        else:
            batch = mean_shift(g, float(m[0]), 1)
            if not np.isnan(batch):
                m[0] = 0.9 * m[0] + 0.1 * batch

    def forward_cpu(self, bottom, top):
        s = self.blobs[0].data
        s[0] = min(max(s[0], self.lo), self.hi)
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        lab = _labels(self, bottom[1], x.shape[0], x.shape[1])
        rows = np.arange(x.shape[0])
        scale = (bottom[2].data.reshape(-1, 1) if self.original_norm
                 else np.full((x.shape[0], 1), s[0]))
        others = np.ones(x.shape, bool)
        others[rows, lab] = False
        t = x[rows, lab]
        n = np.maximum(np.where(others, x, -np.inf).max(axis=1), -1.0)
        e = np.where(others, np.exp(scale * (x - n[:, None])), 0.0).sum(axis=1)
        lse = np.log(e) / scale[:, 0] + n
        self._update_margin(t - lse)
        m = float(self.blobs[1].data[0])
        y = top[0].data.reshape(x.shape)
        y[...] = x
        if m > 0:
            y[rows, lab] = t - m
        y *= scale
        if len(top) > 1:
            first = scale.mean() if self.original_norm else s[0]
            top[1].data[...] = [first, t.mean(), lse.mean(), n.mean(), m]

    def backward_cpu(self, top, propagate_down, bottom):
        shape = (bottom[0].shape[0], -1)
        dy, y = top[0].diff.reshape(shape), top[0].data.reshape(shape)
        s = float(self.blobs[0].data[0])
        if self.original_norm:
            r = bottom[2].data.reshape(-1, 1)
            if propagate_down[2]:
                bottom[2].diff.reshape(-1)[...] = (dy * y).sum(axis=1) / r[:, 0]
        else:
            r = s
            if self.param_propagate_down[0]:
                self.blobs[0].diff[...] = (dy * y).sum() / s
        if propagate_down[0]:
            bottom[0].diff.reshape(shape)[...] = r * dy

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1


@register_variant("Scale", lambda lp: lp.scale_param.HasField("min_value")
                  or lp.scale_param.HasField("max_value"))
class BoundedScaleLayer(ScaleLayer):
    """happynear's Scale with ``scale_param { min_value max_value }``: every forward first clips
    the scale (the parameter, or bottom[1]) in place to [min_value, max_value]; the rest is
    BVLC's Scale (the backward too)."""

    def _clip(self, bottom):
        p = self.layer_param.scale_param
        s = (bottom[1] if len(bottom) > 1 else self.blobs[0]).data
        if p.HasField("min_value"):
            np.maximum(s, p.min_value, out=s)
        if p.HasField("max_value"):
            np.minimum(s, p.max_value, out=s)

    def forward_cpu(self, bottom, top):
        self._clip(bottom)
        super(BoundedScaleLayer, self).forward_cpu(bottom, top)
