"""InsightFace's combined margin on Caffe (xialuxi/arcface-caffe's CombinedMargin). The same
fork's CosinAddm is in ``fork_amsoftmax.py``; happynear's angular margins in ``fork_margin.py``.
"""
import numpy as np

from .base import register_layer
from .fork_margin import _LabelColumn


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
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        lab = bottom[1].data.reshape(-1).astype(np.int64)
        if lab.size and lab.max() >= x.shape[1]:
            raise self.error("label %d outside [0, %d)" % (lab.max(), x.shape[1]))
        self.rows = np.flatnonzero(lab >= 0)
        self.lab = lab[self.rows]
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
