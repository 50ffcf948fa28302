"""Margins on cosine scores and their helpers: AM-Softmax / NormFace layers of
happynear/caffe-windows (LabelSpecificAdd, ChannelScale, Flip, the feature ``Normalize`` (a
variant of SSD's type name: happynear's when the layer has no SSD ``norm_param``), the
weight-normalised InnerProduct (``inner_product_param { normalize: true }``), a guard for its
softmax_param options) and ArcFace's CosinAddm (xialuxi/arcface-caffe).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from .losses import _labels
from ...layers.inner_product import InnerProductLayer
from ...layers.loss import SoftmaxWithLossLayer


@register_layer("LabelSpecificAdd")
class LabelSpecificAddLayer(Layer):
    """AM-Softmax's additive margin (happynear/caffe-windows): in TRAIN
        y = x;  y[i, label_i] += bias  where x[i, label_i] > -bias    (bias = -m, e.g. -0.35)
    with bias annealed when ``bias_base`` is set: bias = clip(bias_base + (1 + bias_gamma
    iteration)^bias_power - 1, bias_min, bias_max), iteration += 1 per forward. TEST: y = x.
    dx = dy (the fork's backward: a plain copy).

    prototxt: ``label_specific_add_param { bias: 0 transform_test: false bias_base: 0
    bias_gamma: 0 bias_power: 1 bias_min: 0 bias_max: 0 iteration: 0 }``.
    Bottoms: x (M, D) scores, label (M). Tops: y (M, D) [, bias (1)].
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.label_specific_add_param
        self.bias = p.bias
        self.iteration = int(p.iteration)
        self.active = self.phase == self._caffe_pb2.TRAIN

    def reshape(self, bottom, top):
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)
        if len(top) > 1:
            top[1].reshape(1)

    def forward_cpu(self, bottom, top):
        if top[0] is not bottom[0]:
            top[0].data[...] = bottom[0].data
        if not self.active:
            return
        p = self.layer_param.label_specific_add_param
        if p.HasField("bias_base"):
            b = p.bias_base + (1.0 + p.bias_gamma * self.iteration) ** p.bias_power - 1.0
            self.bias = min(max(b, p.bias_min), p.bias_max)
            self.iteration += 1
        if len(top) > 1:
            top[1].data[...] = self.bias
        y = top[0].data.reshape(top[0].shape[0], -1)
        lab = _labels(self, bottom[1], y.shape[0], y.shape[1])
        rows = np.arange(y.shape[0])
        hit = y[rows, lab] > -self.bias
        y[rows[hit], lab[hit]] += self.bias

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0] and top[0] is not bottom[0]:
            bottom[0].diff[...] = top[0].diff

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_variant("InnerProduct", lambda lp: lp.inner_product_param.normalize)
class NormalizedInnerProductLayer(InnerProductLayer):
    """happynear's InnerProduct with ``inner_product_param { normalize: true }``: every forward
    first rescales each weight row in place, w_j <- w_j / sqrt(|w_j|^2 + 1e-6), then computes the
    plain inner product; backward is the plain inner product's (the fork's)."""

    def layer_setup(self, bottom, top):
        super(NormalizedInnerProductLayer, self).layer_setup(bottom, top)
        if self.transpose:
            raise self.error("normalize: true with transpose: true is not supported")

    def forward_cpu(self, bottom, top):
        w = self.blobs[0].data
        w /= np.sqrt(np.square(w).sum(axis=1, keepdims=True) + 1e-6)
        super(NormalizedInnerProductLayer, self).forward_cpu(bottom, top)

    def forward_gpu(self, bottom, top):  # the parent's GPU kernel would skip this variant's step
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)


@register_variant("Normalize", lambda lp: not lp.HasField("norm_param"))
class FeatureNormalizeLayer(Layer):
    """happynear's Normalize (NormFace / AM-Softmax nets), used when the layer has no SSD
    ``norm_param``: per example and position, over the channels,
        L2: n = sqrt(sum_c x^2 + 1e-6), y = x / n;   dx = (dy - y sum_c(y dy)) / n
        L1: n = sum_c |x| + 1e-6,       y = x / n;   dx = (dy - sign(x) sum_c(y dy)) / n
    with ``bp_norm`` and the norm top, its gradient is added: dx += dn y (L2) or dn sign(x) (L1)
    (without the second top the fork ignores bp_norm).
    No parameters. prototxt: ``normalize_param { normalize_type: "L2" fix_gradient: false
    bp_norm: false }`` (fix_gradient is read but unused by the fork). Bottom x (N, C, ...);
    tops: y (same shape) [, n (N, 1, ...)].
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.normalize_param
        self.kind = p.normalize_type
        if self.kind not in ("L1", "L2"):
            raise self.error("normalize_type must be L1 or L2, got %r" % self.kind)
        self.bp_norm = p.bp_norm and len(top) == 2   # the fork ignores bp_norm without the top

    def reshape(self, bottom, top):
        shape = bottom[0].shape
        if len(shape) < 2:
            raise self.error("bottom must have at least 2 axes", ShapeError)
        top[0].reshape(shape)
        if len(top) > 1:
            top[1].reshape((shape[0], 1) + tuple(shape[2:]))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(bottom[0].shape[0], bottom[0].shape[1], -1)
        if self.kind == "L2":
            self.n = np.sqrt(np.square(x).sum(axis=1, keepdims=True) + 1e-6)
        else:
            self.n = np.abs(x).sum(axis=1, keepdims=True) + 1e-6
        self.y = x / self.n
        top[0].data.reshape(self.y.shape)[...] = self.y
        if len(top) > 1:
            top[1].data.reshape(self.n.shape)[...] = self.n

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff.reshape(self.y.shape)
        a = (self.y * dy).sum(axis=1, keepdims=True)
        x = bottom[0].data.reshape(self.y.shape)
        proj = self.y if self.kind == "L2" else np.sign(x)
        dx = (dy - proj * a) / self.n
        if self.bp_norm:
            dx += top[1].diff.reshape(self.n.shape) * proj
        bottom[0].diff.reshape(self.y.shape)[...] = dx


@register_layer("Flip")
class FlipLayer(Layer):
    """happynear's Flip (test-time mirrored features): y = x reversed along W (``flip_width``)
    and / or H (``flip_height``); dx = dy flipped back.

    prototxt: ``flip_param { flip_width: true flip_height: false }``. Bottom (N, C, H, W);
    top the same shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 4:
            raise self.error("bottom must be N x C x H x W", ShapeError)
        top[0].reshape(bottom[0].shape)

    def _flip(self, a):
        p = self.layer_param.flip_param
        if p.flip_width:
            a = a[:, :, :, ::-1]
        if p.flip_height:
            a = a[:, :, ::-1, :]
        return a

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self._flip(bottom[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = self._flip(top[0].diff)


_HN_SOFTMAX = ("hard_ratio", "class_weight", "hard_mining_label", "cutting_point",
               "normalize_type", "label_smooth_factor")


def _hn_softmax_fields(lp):
    sp = lp.softmax_param
    if sp.HasField("label_smooth"):      # Kevinduan23/caffe's label smoothing (misc.softmax_variants)
        return False
    return any(sp.HasField(f) if f != "class_weight" else len(sp.class_weight) for f in _HN_SOFTMAX)


@register_variant("SoftmaxWithLoss", _hn_softmax_fields)
class CheckedSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """SoftmaxWithLoss carrying happynear's softmax_param fields: accepted while they keep their
    no-op values (``normalize_type: "Softmax"``, ``hard_ratio: 1``, ``label_smooth_factor: 0``, no
    ``class_weight``, no hard mining); any other value changes the math and is refused."""

    def layer_setup(self, bottom, top):
        sp = self.layer_param.softmax_param
        if (sp.normalize_type != "Softmax" or sp.hard_ratio != 1 or sp.label_smooth_factor
                or len(sp.class_weight) or sp.HasField("hard_mining_label")
                or sp.HasField("cutting_point")):
            raise self.error("happynear's softmax_param options (normalize_type other than "
                             "Softmax, hard_ratio, class_weight, hard mining, label smoothing) "
                             "are not supported")
        super(CheckedSoftmaxWithLossLayer, self).layer_setup(bottom, top)


@register_layer("ChannelScale")
class ChannelScaleLayer(Layer):
    """happynear's ChannelScale: scale every channel of each (example, position) by a per-position
    value, e.g. the feature norm kept by ``Normalize`` (NormFace's "feature normalisation off").

        y[n, c, s] = a[n, s] x[n, c, s];  dx = a dy;  da[n, s] = sum_c x dy
    (``do_forward: false``: y = x; ``do_backward_feature: false``: dx = dy;
    ``do_backward_scale: false``: da = 0.) ``global_scale`` (a learned-statistics scale) is
    refused.

    prototxt: ``channel_scale_param { do_forward: true do_backward_feature: true
    do_backward_scale: true global_scale: false }``. Bottoms: x (N, C, ...), a (N, 1, ...) with
    N x (spatial) values. Top: y (shape of x).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        if self.layer_param.channel_scale_param.global_scale:
            raise self.error("channel_scale_param.global_scale is not supported")

    def reshape(self, bottom, top):
        x, a = bottom
        if x.num_axes < 2 or a.count * x.shape[1] != x.count or a.shape[0] != x.shape[0]:
            raise self.error("scale %s must hold one value per example and position of %s"
                             % (a.shape, x.shape), ShapeError)
        top[0].reshape(x.shape)

    def _views(self, bottom):
        x = bottom[0].data.reshape(bottom[0].shape[0], bottom[0].shape[1], -1)
        return x, bottom[1].data.reshape(x.shape[0], 1, -1)

    def forward_cpu(self, bottom, top):
        p = self.layer_param.channel_scale_param
        x, a = self._views(bottom)
        top[0].data.reshape(x.shape)[...] = a * x if p.do_forward else x

    def backward_cpu(self, top, propagate_down, bottom):
        p = self.layer_param.channel_scale_param
        x, a = self._views(bottom)
        dy = top[0].diff.reshape(x.shape)
        if propagate_down[0]:
            bottom[0].diff.reshape(x.shape)[...] = a * dy if p.do_backward_feature else dy
        if propagate_down[1]:
            da = (x * dy).sum(axis=1, keepdims=True) if p.do_backward_scale else 0 * a
            bottom[1].diff.reshape(a.shape)[...] = da


@register_layer("CosinAddm")
class CosinAddmLayer(Layer):
    """ArcFace's additive angular margin on cosine scores (xialuxi/arcface-caffe), in every phase:
    for the label column, with c = min(x, 1) and theta = arccos c,
        y = cos(theta + m) = c cos m - sin(theta) sin m    if c > cos(pi - m)
        y = c - m sin(pi - m)                              otherwise;
    other columns y = x. dx = dy except on the label column: (cos m + sin m c / sin(theta)) dy,
    or dy on the second branch (and where sin(theta) = 0).

    prototxt: ``cosin_add_m_param { m: 0.5 transform_test: false }`` (transform_test is read but
    unused by the fork). Bottoms: cosines (M, D), label (M). Top: (M, D).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        m = self.layer_param.cosin_add_m_param.m
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        y = top[0].data.reshape(x.shape)
        y[...] = x
        self.lab = _labels(self, bottom[1], x.shape[0], x.shape[1])
        rows = np.arange(x.shape[0])
        c = np.minimum(x[rows, self.lab], 1.0)
        self.c, self.far = c, c <= np.cos(np.pi - m)
        sin = np.sqrt(1 - c * c)
        y[rows, self.lab] = np.where(self.far, c - np.sin(np.pi - m) * m,
                                     c * np.cos(m) - sin * np.sin(m))

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        m = self.layer_param.cosin_add_m_param.m
        dy = top[0].diff.reshape(bottom[0].shape[0], -1)
        dx = bottom[0].diff.reshape(dy.shape)
        dx[...] = dy
        rows = np.arange(dy.shape[0])
        sin = np.sqrt(1 - self.c * self.c)
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = np.where((sin == 0) | self.far, 1.0,
                            np.cos(m) + np.sin(m) * self.c / np.where(sin == 0, 1, sin))
        dx[rows, self.lab] = coef * dy[rows, self.lab]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
