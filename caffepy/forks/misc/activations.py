"""Element-wise activations and per-sample normalisations registered by several small forks: Mish
(darknet2caffe forks), HardSwish and HardSigmoid (synopsys-caffe), SignedSqrt and L2Normalize (the
compact-bilinear-pooling forks), L2Normalization (AlfredXiangWu/caffe, 1095560081/caffe),
Normalization (vllab/discovery, BeSlower/caffe), NormalizationL2 (liu-xb/RAM), Scalar (the scale-by-a-second-bottom layer of the video / saliency
forks), MinReLU (ALISCIFP/caffe: min(x, 0) + nu max(x, 0)).
"""
import numpy as np

from ...layers.base import Layer, fork_param, register_layer, register_variant
from ...layers.neuron import ElementwiseLayer
from ...layers.scale import _broadcast_dims
from ...errors import ShapeError


def _sigmoid(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


@register_layer("Mish")
class MishLayer(ElementwiseLayer):
    """Mish: y = x tanh(softplus(x)),  softplus(x) = log(1 + exp(x)).

        dL/dx = dL/dy * (tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)),  sp = softplus(x)

    As the Mish layers of the darknet2caffe / caffe-yolov3 forks (e.g. Adrian-Yan16/
    darknet2caffe_yolov3, synopsys-caffe register the type; their Forward_cpu computes
    x - 2x / ((1 + e^x)^2 + 1), the same function). No parameters. Bottom / top: any shape
    (in place allowed).
    """

    def f(self, x):
        return x * np.tanh(np.logaddexp(0, x))

    def df(self, x, y):
        t = np.tanh(np.logaddexp(0, x))
        return t + x * (1 - t * t) * _sigmoid(x)


@register_layer("HardSwish")
class HardSwishLayer(ElementwiseLayer):
    """Hard swish (MobileNetV3): y = x * min(max(x + 3, 0), 6) / 6.

    Follows foss-for-synopsys-dwc-arc-processors/synopsys-caffe, src/caffe/layers/
    hard_swish_layer.cpp (forward only there); caffepy's backward is the piecewise derivative
    dL/dx = dL/dy * (0 if x < -3; (2x + 3) / 6 if -3 <= x <= 3; 1 if x > 3).
    No parameters. Bottom / top: any shape (in place allowed).
    """

    def f(self, x):
        return x * np.clip(x + 3, 0, 6) / 6

    def df(self, x, y):
        return np.where(x < -3, 0, np.where(x > 3, 1, (2 * x + 3) / 6))


@register_layer("HardSigmoid")
class HardSigmoidLayer(ElementwiseLayer):
    """Hard sigmoid: y = min(max(alpha x + beta, 0), 1).

    Follows synopsys-caffe's src/caffe/layers/hard_sigmoid_layer.cpp (forward only there); caffepy's
    backward: dL/dx = dL/dy * alpha where 0 < alpha x + beta <= 1, else 0.
    prototxt: ``hard_sigmoid_param { alpha: 0.2 beta: 0.5 }``. Bottom / top: any shape.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.hard_sigmoid_param
        self.alpha, self.beta = float(p.alpha), float(p.beta)

    def f(self, x):
        return np.clip(self.alpha * x + self.beta, 0, 1)

    def df(self, x, y):
        r = self.alpha * x + self.beta
        return np.where((r > 0) & (r <= 1), self.alpha, 0)


@register_layer("SignedSqrt")
class SignedSqrtLayer(ElementwiseLayer):
    """Signed square root (bilinear pooling): y = sign(x) sqrt(|x|).

    Backward as the fork computes it, with a fixed epsilon = 0.03 in the denominator (so it is
    the derivative 1 / (2 sqrt|x|) only away from 0):

        dL/dx = 0.5 dL/dy / (|y| + 0.03)

    The compact-bilinear layer (Yang Gao, UC Berkeley; signed_sqrt_layer.cpp / .hpp) carried by
    ChaojianYu/Hierarchical-Bilinear-Pooling, XiangChenchao/DDPN and shizenglin/Deep-NCL.
    No parameters. Bottom / top: any shape.
    """
    needs_input = False
    epsilon = 0.03

    def f(self, x):
        return np.sign(x) * np.sqrt(np.abs(x))

    def df(self, x, y):
        return 0.5 / (np.abs(y) + self.epsilon)


@register_layer("L2Normalize")
class L2NormalizeLayer(Layer):
    """Per-sample L2 normalisation over all of a sample's values (C x H x W together):

        y_n = x_n / sqrt(|x_n|^2 + 1e-7)
        dL/dx_n = (dL/dy_n - y_n (y_n . dL/dy_n)) / sqrt(|x_n|^2 + 1e-7)

    The compact-bilinear layer (Yang Gao, UC Berkeley; l2_normalize_layer.cpp) of the bilinear-
    pooling forks (ChaojianYu/Hierarchical-Bilinear-Pooling, XiangChenchao/DDPN,
    shizenglin/Deep-NCL). No parameters. Bottom: N x ... (at least one axis); top: same shape
    (not in place, as the fork).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    epsilon = 1e-7

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("L2Normalize cannot run in place")
        if bottom[0].num_axes < 1:
            raise self.error("bottom[0] needs a num axis, got shape %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        self._inv = 1.0 / np.sqrt(np.sum(x * x, axis=1, keepdims=True) + self.epsilon)
        top[0].data[...] = (x * self._inv).reshape(bottom[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        n = bottom[0].shape[0]
        y, dy = top[0].data.reshape(n, -1), top[0].diff.reshape(n, -1)
        dx = (dy - y * np.sum(y * dy, axis=1, keepdims=True)) * self._inv
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("NormalizationL2")
class NormalizationL2Layer(L2NormalizeLayer):
    """L2Normalize with the epsilon of liu-xb/RAM's fork (Longhui Wei's normalization_l2_layer
    .cpp / .cu in RAM's caffe/):

        y_n = x_n / sqrt(|x_n|^2 + 1e-10)
        dL/dx_n = (dL/dy_n - y_n (y_n . dL/dy_n)) / sqrt(|x_n|^2 + 1e-10)

    n runs over axis 0; each sample's values are normalised together. No parameters. Bottom:
    N x ...; top: same shape. In place is allowed (a NeuronLayer there): the norm is kept from
    forward, where the fork's backward would read the normalised top as x and skip the division.
    """
    type = "NormalizationL2"
    epsilon = 1e-10

    def reshape(self, bottom, top):
        if top[0] is not bottom[0]:
            super().reshape(bottom, top)
        elif bottom[0].num_axes < 1:
            raise self.error("bottom[0] needs a num axis, got shape %s" % (bottom[0].shape,),
                             ShapeError)


@register_layer("L2Normalization")
class L2NormalizationLayer(L2NormalizeLayer):
    """AlfredXiangWu/caffe's L2Normalization (src/caffe/layers/l2_normalization_layer.cpp; its
    GPU functions call the CPU ones): L2Normalize with no epsilon,

        y_n = x_n / |x_n|,   dL/dx_n = (dL/dy_n - y_n (y_n . dL/dy_n)) / |x_n|

    (an all-zero item gives inf / nan, as the fork). The top is the bottom's legacy 4-D shape
    num x channels x height x width. No parameters (with ``l2n_param`` set, the layer is
    1095560081/caffe's, :class:`L2NormalizationWithParamLayer`). Not in place.
    """
    type = "L2Normalization"
    epsilon = 0.0

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if bottom[0].num_axes > 4:
            raise self.error("bottom[0] needs at most 4 axes (the fork's legacy num x channels x "
                             "height x width), got %s" % (bottom[0].shape,), ShapeError)
        b = bottom[0]
        top[0].reshape(b.num, b.channels, b.height, b.width)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(bottom[0].shape[0], -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._inv = 1.0 / np.sqrt(np.sum(x * x, axis=1, keepdims=True))
        top[0].data.reshape(x.shape)[...] = x * self._inv


@register_layer("Normalization")
class NormalizationLayer(L2NormalizationLayer):
    """Binbin Xu's Normalization of vllab/discovery (external/caffe/src/caffe/layers/
    normalization_layer.cpp / .cu) and BeSlower/caffe: AlfredXiangWu's L2Normalization (y_n =
    x_n / |x_n|, no epsilon) with the top in the bottom's shape. No parameters; not in place.
    """
    type = "Normalization"

    def reshape(self, bottom, top):
        L2NormalizeLayer.reshape(self, bottom, top)


@register_variant("L2Normalization", lambda lp: lp.HasField("l2n_param"))
class L2NormalizationWithParamLayer(Layer):
    """1095560081/caffe's L2Normalization (src/caffe/layers/l2_normalization_layer.cpp), chosen
    when ``l2n_param`` is set. With ``is_global`` the whole blob (all items together) is one
    vector, else each vector along ``axis`` (one per position of the other axes):

        m = |x|^2;  y = x / sqrt(m),  dL/dx = (dL/dy - y (y . dL/dy)) / sqrt(m)   if m > |eps|
                    y = x,            dL/dx = dL/dy                               otherwise

    prototxt: ``l2n_param { is_global: true axis: 0 eps: 1e-10 }``. Top: the bottom's shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "l2n_param")
        self.is_global, self.eps = bool(p.is_global), abs(float(p.eps))
        if not self.is_global:
            self.axis = bottom[0].canonical_axis_index(p.axis)

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("L2Normalization cannot run in place")
        top[0].reshape(bottom[0].shape)

    def _vectors(self, a):
        """``a`` with the normalised vectors along its last axis."""
        return a.reshape(1, -1) if self.is_global else np.moveaxis(a, self.axis, -1)

    def forward_cpu(self, bottom, top):
        x = self._vectors(bottom[0].data)
        m = np.sum(x * x, axis=-1, keepdims=True, dtype=np.float64)
        self.big = m > self.eps
        self.inv = np.where(self.big, 1.0 / np.sqrt(np.where(self.big, m, 1.0)), 1.0)
        self._vectors(top[0].data)[...] = x * self.inv

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        y, dy = self._vectors(top[0].data), self._vectors(top[0].diff)
        proj = np.where(self.big, np.sum(y * dy, axis=-1, keepdims=True), 0.0)
        self._vectors(bottom[0].diff)[...] = (dy - y * proj) * self.inv


@register_layer("Scalar")
class ScalarLayer(Layer):
    """y = x * s, s = bottom[1] broadcast over bottom[0]'s axes [axis, axis + s.ndim)
    (the ScalarLayer that preceded BVLC's Scale, kept by varunjampani/video_prop_networks,
    nian-liu/DSCLRCN and Yuliang-Liu/Curve-Text-Detector; scalar_layer.cpp):

        dL/dx = dL/dy * s;  dL/ds = sum over the outer and inner axes of dL/dy * x

    prototxt: ``scalar_param { axis: 0 }`` (negative counts from the end).
    Bottoms: x, s (s.shape == x.shape[axis : axis + s.ndim]). Top: shape of x (not in place).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("Scalar cannot run in place")
        axis = self.layer_param.scalar_param.axis
        self.dims = _broadcast_dims(self, bottom[0], bottom[1], axis, "bottom[1]")
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        outer, dim, inner = self.dims
        x = bottom[0].data.reshape(outer, dim, inner)
        s = bottom[1].data.reshape(1, dim, 1)
        top[0].data[...] = (x * s).reshape(bottom[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        outer, dim, inner = self.dims
        dy = top[0].diff.reshape(outer, dim, inner)
        if propagate_down[1]:
            x = bottom[0].data.reshape(outer, dim, inner)
            bottom[1].diff[...] = np.sum(dy * x, axis=(0, 2)).reshape(bottom[1].shape)
        if propagate_down[0]:
            s = bottom[1].data.reshape(1, dim, 1)
            bottom[0].diff[...] = (dy * s).reshape(bottom[0].shape)


@register_layer("MinReLU")
class MinReLULayer(ElementwiseLayer):
    """MinReLU: y = min(x, 0) + nu max(x, 0), ReLU's mirror image (nu = 0: y = min(x, 0)).

        dL/dx = dL/dy * (1 if x < 0 else nu)     (nu at x = 0, as the fork's backward)

    As ALISCIFP/caffe's src/caffe/layers/minrelu_layer.cpp. prototxt:
    ``minrelu_param { positive_slope: 0 }`` (``engine`` picks CAFFE or CUDNN there; one
    computation here). Bottom / top: any shape (in place allowed).
    """

    def layer_setup(self, bottom, top):
        self.nu = float(self.layer_param.minrelu_param.positive_slope)

    def f(self, x):
        return np.minimum(x, 0) + self.nu * np.maximum(x, 0)

    def df(self, x, y):
        return np.where(x < 0, 1.0, self.nu)
