"""InsightFace-style margins on Caffe: xialuxi/arcface-caffe's CombinedMargin, AdaCosAddmScale and
NormL2. The same fork's CosinAddm is in ``amsoftmax.py``; happynear's angular margins in
``margin.py``.
"""
import numpy as np

from ...layers.base import NeuronLayer, register_layer
from .margin import _LabelColumn


def _label_cells(layer, bottom):
    """The cosines as (M, D); sets layer.rows (examples with a label >= 0, the others pass
    through) and layer.lab (their labels, each checked < D)."""
    x = bottom[0].data.reshape(bottom[0].shape[0], -1)
    lab = bottom[1].data.reshape(-1).astype(np.int64)
    if lab.size and lab.max() >= x.shape[1]:
        raise layer.error("label %d outside [0, %d)" % (lab.max(), x.shape[1]))
    layer.rows = np.flatnonzero(lab >= 0)
    layer.lab = lab[layer.rows]
    return x


@register_layer("CombinedMargin")
class CombinedMarginLayer(_LabelColumn):
    """InsightFace's combined margin (xialuxi/arcface-caffe), in every phase: for the label
    column (rows with a negative label are left alone)
        y = cos(m1 arccos(x) + m2) - m3;   dx = dy m1 sin(m1 arccos(x) + m2) / sqrt(1 - x^2)
    other columns y = x, dx = dy (SphereFace m1, ArcFace m2, CosFace m3). x outside [-1, 1] gives
    NaN, as the fork's acos.

    prototxt: ``combined_margin_param { m1: 1 m2: 0 m3: 0 transform_test: false }`` (the fork
    reads these but publishes no schema: caffepy's message, field number 10751; transform_test is
    unused, as the fork). Bottoms: cosines (M, D), labels (M). Top: (M, D).
    """
    exact_num_bottom_blobs = 2
    max_top_blobs = 1

    def forward_cpu(self, bottom, top):
        p = self.layer_param.combined_margin_param
        x = _label_cells(self, bottom)
        y = top[0].data.reshape(x.shape)
        y[...] = x
        with np.errstate(invalid="ignore"):
            self.arg = p.m1 * np.arccos(x[self.rows, self.lab]) + p.m2
        y[self.rows, self.lab] = np.cos(self.arg) - p.m3

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        m1 = self.layer_param.combined_margin_param.m1
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        dy = top[0].diff.reshape(x.shape)
        dx = bottom[0].diff.reshape(x.shape)
        dx[...] = dy
        c = x[self.rows, self.lab]
        with np.errstate(divide="ignore", invalid="ignore"):
            dx[self.rows, self.lab] *= m1 * np.sin(self.arg) / np.sqrt(1 - c * c)


@register_layer("AdaCosAddmScale")
class AdaCosAddmScaleLayer(_LabelColumn):
    """AdaCos with ArcFace's margin (xialuxi/arcface-caffe's AdaCosAddmScale), in every phase.

    Margin (label column of rows with a label >= 0, c = min(x, 1)): cos(theta + m) = c cos m -
    sin(theta) sin m, or c - m sin(pi - m) where c <= cos(pi - m) (CosinAddm's rule). Scale: the
    layer keeps s (first s = sqrt(2) log(num_classes - 1)); each forward, with
        B = sum_{i, j} exp(s x_ij [j != label_i]) / M     (label entries count exp(0) = 1)
        theta_med = min(mean of arccos over every entry, pi / 4)
    s <- log(B) / cos(theta_med), then y = s * (margin output). Backward is the fork's, s held:
    dx = s dy, times cos m + sin m c / sin(theta) on the label column (1 on the linear branch or
    where sin(theta) = 0).

    prototxt: ``adacos_add_m_scale_param { m: 0.5 num_classes: 8750 transform_test: false }``
    (transform_test is read and unused, as the fork; field number 10754, the fork's 211 being
    taken). Bottoms: cosines (M, D), labels (M). Top: (M, D).
    """
    exact_num_bottom_blobs = 2
    max_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.adacos_add_m_scale_param
        if p.num_classes <= 2:
            raise self.error("adacos_add_m_scale_param.num_classes must be > 2")
        self.s = np.sqrt(2) * np.log(p.num_classes - 1)

    def _update_scale(self, x, rows, lab):
        keep = np.ones(x.shape)
        keep[rows, lab] = 0
        b = np.exp(self.s * x * keep).sum() / x.shape[0]
        with np.errstate(invalid="ignore"):
            med = min(float(np.arccos(x).mean()), np.pi / 4)
        self.s = np.log(b) / np.cos(med)

    def forward_cpu(self, bottom, top):
        m = self.layer_param.adacos_add_m_scale_param.m
        x = _label_cells(self, bottom)
        c = np.minimum(x[self.rows, self.lab], 1.0)
        self.c, self.far = c, c <= np.cos(np.pi - m)
        y = top[0].data.reshape(x.shape)
        y[...] = x
        y[self.rows, self.lab] = np.where(self.far, c - np.sin(np.pi - m) * m,
                                          c * np.cos(m) - np.sqrt(1 - c * c) * np.sin(m))
        self._update_scale(x, self.rows, self.lab)
        y *= self.s

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        m = self.layer_param.adacos_add_m_scale_param.m
        dy = top[0].diff.reshape(bottom[0].shape[0], -1)
        dx = bottom[0].diff.reshape(dy.shape)
        dx[...] = self.s * dy
        sin = np.sqrt(1 - self.c * self.c)
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = np.where((sin == 0) | self.far, 1.0,
                            np.cos(m) + np.sin(m) * self.c / np.where(sin == 0, 1, sin))
        dx[self.rows, self.lab] *= coef


@register_layer("NormL2")
class NormL2Layer(NeuronLayer):
    """xialuxi's NormL2 (AdaCos nets): each example (all its N-th values) scaled to unit L2 norm,
        n = sqrt(sum x^2 + 1e-7), y = x / n;   dx = (dy - y sum(y dy)) / n
    No parameters. Bottom (N, ...); top the same shape.
    """

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        self.n = np.sqrt(np.square(x).sum(axis=1, keepdims=True) + 1e-7)
        top[0].data.reshape(x.shape)[...] = x / self.n

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            shape = (bottom[0].shape[0], -1)
            y, dy = top[0].data.reshape(shape), top[0].diff.reshape(shape)
            dx = (dy - y * (y * dy).sum(axis=1, keepdims=True)) / self.n
            bottom[0].diff.reshape(shape)[...] = dx
