"""Arroosh/optical_flow_prediction (2014 Caffe, optical flow as classification over flow-cluster
codewords; before type strings): its V1 types MULTI_SOFTMAX (``MultiSoftmax``),
MULTI_SOFTMAX_LOSS (``MultiSoftmaxWithLoss``) and RESIZE (``Resize``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer
from ...proto.harvest_policy import unread_fields

_FLT_MIN = np.finfo(np.float32).tiny


def _multi_softmax(x, multiple):
    """m softmax(x) over the channels at each pixel (N x C x ...)."""
    n, c = x.shape[:2]
    x = x.reshape(n, c, -1).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return multiple * e / e.sum(axis=1, keepdims=True)


@register_layer("MultiSoftmax")
class MultiSoftmaxLayer(Layer):
    """y = m softmax(x) over the channels at each pixel, m = ``mult_softmax_param {
    max_multiple: 1 }``. Backward as the fork: dL/dx = y (g - sum_c g y) (g = dL/dy), the exact
    derivative for m = 1 (for other m the fork's gradient is that formula, not m's)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        m = float(self.layer_param.mult_softmax_param.max_multiple)
        top[0].data[...] = _multi_softmax(bottom[0].data, m).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n, c = top[0].shape[:2]
            y = top[0].data.reshape(n, c, -1)
            g = top[0].diff.reshape(n, c, -1)
            dx = (g - (g * y).sum(axis=1, keepdims=True)) * y
            bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("MultiSoftmaxWithLoss")
class MultiSoftmaxWithLossLayer(LossLayer):
    """Per-pixel softmax loss with 1-based labels: p = MultiSoftmax(x) (its ``mult_softmax_param``,
    default m = 1), loss = -sum over the pixels of log max(p[label - 1], FLT_MIN), divided by N.
    dL/dx = (p - onehot(label - 1)) l / N, l = ``mult_softmax_loss_param { learning_multiple: 1 }``
    (it scales the gradient only, as in the fork). Bottoms: scores N x C x H x W, labels
    N x 1 x H x W (1..C) [, a third the fork ignores]. Tops: loss [, p]."""
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        s, lab = bottom[0], bottom[1]
        if s.num_axes < 2 or lab.count != s.count // s.shape[1]:
            raise self.error("scores %s and labels %s: expected one label per pixel"
                             % (s.shape, lab.shape), ShapeError)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(s.shape)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        m = float(self.layer_param.mult_softmax_param.max_multiple)
        self.p = _multi_softmax(bottom[0].data, m)
        lab = bottom[1].data.reshape(n, -1).astype(np.int64) - 1
        if np.any((lab < 0) | (lab >= c)):
            raise self.error("a label is outside 1..%d (the labels are 1-based)" % c)
        self.lab = lab
        picked = np.take_along_axis(self.p, lab[:, None, :], axis=1)
        top[0].data[...] = -np.log(np.maximum(picked, _FLT_MIN)).sum() / n
        if len(top) > 1:
            top[1].data[...] = self.p.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            n = bottom[0].shape[0]
            g = self.p.copy()
            np.put_along_axis(g, self.lab[:, None, :],
                              np.take_along_axis(g, self.lab[:, None, :], axis=1) - 1, axis=1)
            mult = float(self.layer_param.mult_softmax_loss_param.learning_multiple)
            g *= float(top[0].diff) * mult / n
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


def _axis_taps(src, dst):
    """The fork's bilinear rule on one axis as a dst x src matrix: output o reads input
    f = o src / dst at floor(f) with weight 1 - frac(f) and floor(f) + 1 with frac(f), a tap past
    the input dropped (not renormalised)."""
    m = np.zeros((dst, src))
    f = np.arange(dst) * (src / float(dst))
    i0 = np.floor(f).astype(np.int64)
    frac = f - i0
    m[np.arange(dst), i0] = np.abs(1.0 - frac)
    inside = i0 + 1 < src
    m[np.arange(dst)[inside], i0[inside] + 1] = np.abs(frac[inside])
    return m


@register_layer("Resize")
class ResizeLayer(Layer):
    """Bilinear resize of each map to ``resize_param { height width }`` (or, with
    ``is_pyramid_test``, int(out_height_scale H) x int(out_width_scale W)), output o reading input
    o H / h (top-left aligned; a neighbour past the border drops out), then times
    ``multiple_scale`` (default 1). Backward as the fork: the transposed taps, without
    multiple_scale (the exact gradient for multiple_scale 1). Its ResizeParameter numbers height 1,
    width 2; caffepy's schema holds SSD's ResizeParameter (height 3, width 4): text files name
    them, so they read; binary ones do not. Any other ResizeParameter field (SSD's resize and
    interpolation modes, other forks' zoom) set to a value other than its default is refused."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    READ = ("height", "width", "is_pyramid_test", "out_height_scale", "out_width_scale",
            "multiple_scale")

    def layer_setup(self, bottom, top):
        unread = unread_fields(self.layer_param.resize_param, self.READ)
        if unread:
            raise self.error("resize_param.%s is not read by the caffe-windows forks' Resize "
                             "(it reads %s)" % (unread[0], ", ".join(self.READ)))

    def reshape(self, bottom, top):
        p = self.layer_param.resize_param
        n, c, H, W = bottom[0].shape
        if p.is_pyramid_test:
            h, w = int(p.out_height_scale * H), int(p.out_width_scale * W)
        else:
            h, w = int(p.height), int(p.width)
        if h < 1 or w < 1:
            raise self.error("the output size %d x %d must be positive" % (h, w))
        self.wh, self.ww = _axis_taps(H, h), _axis_taps(W, w)
        top[0].reshape((n, c, h, w))

    def forward_cpu(self, bottom, top):
        y = np.einsum("hH,ncHW,wW->nchw", self.wh, bottom[0].data.astype(np.float64), self.ww)
        top[0].data[...] = y * float(self.layer_param.resize_param.multiple_scale)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.einsum("hH,nchw,wW->ncHW", self.wh,
                                            top[0].diff.astype(np.float64), self.ww)
