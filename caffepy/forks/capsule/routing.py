"""The capsule layers of chenzhenhua986/CAFFE-CapsNet that carry weights: CapsuleTransform,
CapsuleRouting, DynamicRouting (fully connected capsules), CapsuleConvTransform,
CapsuleConvRouting (convolutional capsules) and Tensor (matrix capsules convolved); the math of
src/caffe/layers/*_layer.cpp / .cu there (the .cu where the .cpp's CPU functions are empty).

Layers whose parameters give the input's geometry (CapsuleRouting, CapsuleConvTransform,
CapsuleConvRouting, Tensor) read the bottom as the fork does, as a flat buffer of N samples of
that many values: a bottom with fewer is an error, one with more (a net whose input_h / input_w
disagree with the blob: g_conv_capsule_multiLayer_train) is read from its first N x count values,
with one WARNING, and the rest gets no gradient.
"""
import logging

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer
from ...proto import caffe_pb2

log = logging.getLogger(__name__)


def _count_check(layer, blob, expected, what):
    """The fork indexes the bottom as a flat buffer of N samples of ``expected`` values, never
    checking its shape: fewer values would be read past its end (an error here); more are read
    as the fork reads them, the first N x expected values of the buffer (one WARNING)."""
    per = blob.count // blob.shape[0] if blob.num_axes and blob.shape[0] else -1
    if per < expected:
        raise layer.error("bottom shape %s: a sample must hold %s = %d values, it holds %d"
                          % (blob.shape, what, expected, per), ShapeError)
    if per > expected and not getattr(layer, "_warned", False):
        layer._warned = True
        log.warning("layer '%s' (%s): bottom shape %s holds %d values a sample, its parameters "
                    "%d (%s); as the fork, the first %d x %d values of the buffer are read",
                    layer.layer_param.name, layer.layer_param.type, blob.shape, per, expected,
                    what, blob.shape[0], expected)
    layer.used = blob.shape[0] * expected


def _used(layer, a):
    """The part of bottom array ``a`` the layer reads (see _count_check)."""
    return a.reshape(-1)[:layer.used]


def _set_diff(layer, blob, dx):
    blob.diff.reshape(-1)[:layer.used] = dx.reshape(-1)
    blob.diff.reshape(-1)[layer.used:] = 0


def _positive(layer, **values):
    for name, v in values.items():
        if v <= 0:
            raise layer.error("%s must be positive, got %d" % (name, v))


def _dims(layer, shape, n, what):
    if len(shape.dim) != n:
        raise layer.error("%s needs %d dims, got %d" % (what, n, len(shape.dim)))
    return tuple(int(d) for d in shape.dim)


def _windows(x, kh, kw, stride, oh, ow):
    """x (N, S, H, W, ...) -> its kh x kw windows (N, S, OH, OW, ..., kh, kw) at ``stride``."""
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    return win[:, :, ::stride, ::stride][:, :, :oh, :ow]


def _add_windows(dwin, shape, stride):
    """Adjoint of _windows: a (N, S, H, W, ...) array holding the sums of dwin's windows."""
    out = np.zeros(shape, dtype=dwin.dtype)
    oh, ow, kh, kw = dwin.shape[2], dwin.shape[3], dwin.shape[-2], dwin.shape[-1]
    for m in range(kh):
        for q in range(kw):
            out[:, :, m:m + stride * (oh - 1) + 1:stride,
                q:q + stride * (ow - 1) + 1:stride] += dwin[..., m, q]
    return out


class _ConvGeometry(object):
    """stride, kh, kw, input_h, input_w of a capsule-convolution message; OH = (H - kh) / stride
    + 1 (no padding)."""

    def read_geometry(self, p):
        self.stride, self.kh, self.kw = int(p.stride), int(p.kh), int(p.kw)
        self.h, self.w = int(p.input_h), int(p.input_w)
        _positive(self, stride=self.stride, kh=self.kh, kw=self.kw)
        self.oh, self.ow = (self.h - self.kh) // self.stride + 1, (self.w - self.kw) // self.stride + 1
        if self.oh <= 0 or self.ow <= 0:
            raise self.error("a %d x %d kernel does not fit the %d x %d input"
                             % (self.kh, self.kw, self.h, self.w), ShapeError)


@register_layer("CapsuleTransform")
class CapsuleTransformLayer(Layer):
    """Prediction vectors of every input capsule for every output capsule:

        u_hat[n, i] = x[n, i] W[i] + b[i]      x[n, i]: 1 x Din,  W[i]: Din x (J Dout)

    dW[i] += sum_n x[n, i]^T du[n, i];  db += sum_n du[n];  dx[n, i] = du[n, i] W[i]^T
    (capsule_transform_layer.cu). prototxt: ``capsule_transform_param { input_capsule_dim
    output_capsule_dim output_capsule_num bias_term weight_filler bias_filler }``. Bottom: N x ...
    (I = a sample's count / Din input capsules); top: N x I x (J Dout). Blobs: W (I, Din, J Dout),
    b (I J Dout,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_transform_param")
        self.din, self.dout, self.j = (int(p.input_capsule_dim), int(p.output_capsule_dim),
                                       int(p.output_capsule_num))
        _positive(self, input_capsule_dim=self.din, output_capsule_dim=self.dout,
                  output_capsule_num=self.j)
        per = bottom[0].count_range(1)
        if per % self.din:
            raise self.error("a sample's %d values are not a whole number of %d-d capsules"
                             % (per, self.din), ShapeError)
        self.i = per // self.din
        out = self.j * self.dout
        shapes = [(self.i, self.din, out)] + ([(self.i * out,)] if p.bias_term else [])
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        _count_check(self, bottom[0], self.i * self.din, "input capsules x input_capsule_dim")
        top[0].reshape(bottom[0].shape[0], self.i, self.j * self.dout)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1, self.i, self.din)
        y = np.einsum("nid,ido->nio", x, self.blobs[0].data)
        if len(self.blobs) > 1:
            y += self.blobs[1].data.reshape(self.i, -1)
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        x = bottom[0].data.reshape(-1, self.i, self.din)
        if self.param_propagate_down[0]:
            self.blobs[0].diff += np.einsum("nid,nio->ido", x, dy)
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff += dy.sum(axis=0).reshape(-1)
        if propagate_down[0]:
            dx = np.einsum("nio,ido->nid", dy, self.blobs[0].data)
            bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("CapsuleRouting")
class CapsuleRoutingLayer(Layer):
    """Output capsules as learned combinations of the prediction vectors (the coupling
    coefficients are a parameter blob, no routing iterations; capsule_routing_layer.cu):

        v[n, j, d] = sum_i c[j, i] u_hat[n, i, j D + d]
        dc[j, i] += sum_{n,d} dv[n, j, d] u_hat[n, i, j D + d];  du_hat[n, i, j D + d] = c[j, i] dv[n, j, d]

    prototxt: ``capsule_routing_param { input_capsule_num output_capsule_dim output_capsule_num
    weight_filler }``. Bottom: N x I x (J D) (any shape of that count); top: N x J x D.
    Blob: c (J, I).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_routing_param")
        self.i, self.d, self.j = (int(p.input_capsule_num), int(p.output_capsule_dim),
                                  int(p.output_capsule_num))
        _positive(self, input_capsule_num=self.i, output_capsule_dim=self.d,
                  output_capsule_num=self.j)
        self.init_param_blobs([(self.j, self.i)], p.weight_filler)
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        _count_check(self, bottom[0], self.i * self.j * self.d,
                     "input_capsule_num x output_capsule_num x output_capsule_dim")
        top[0].reshape(bottom[0].shape[0], self.j, self.d)

    def _u(self, bottom):
        return _used(self, bottom[0].data).reshape(-1, self.i, self.j, self.d)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.einsum("ji,nijd->njd", self.blobs[0].data, self._u(bottom))

    def backward_cpu(self, top, propagate_down, bottom):
        dv = top[0].diff
        if self.param_propagate_down[0]:
            self.blobs[0].diff += np.einsum("njd,nijd->ji", dv, self._u(bottom))
        if propagate_down[0]:
            _set_diff(self, bottom[0], np.einsum("ji,njd->nijd", self.blobs[0].data, dv))


@register_layer("DynamicRouting")
class DynamicRoutingLayer(Layer):
    """The fork's DynamicRouting computes nothing: its Forward_cpu and Backward_cpu bodies are
    commented out (routing by agreement was left unwritten) and it has no GPU code, so its top
    keeps the zeros it was allocated with and no gradient flows. caffepy computes the same:
    y = 0, dL/dx = 0. Its one blob, (100, J, I), is created and never filled or read, as there
    (so the fork's .caffemodels load). prototxt: ``dr_param { routing_num input_capsule_num
    output_capsule_dim output_capsule_num }``. Bottom: N x ...; top: N x J x D.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "dr_param")
        self.i, self.d, self.j = (int(p.input_capsule_num), int(p.output_capsule_dim),
                                  int(p.output_capsule_num))
        self.init_param_blobs([(100, self.j, self.i)], caffe_pb2.FillerParameter())
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].shape[0], self.j, self.d)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = 0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0


@register_layer("CapsuleConvTransform")
class CapsuleConvTransformLayer(_ConvGeometry, Layer):
    """Convolutional capsules, first step: every input capsule of every kh x kw window (no
    padding) times its window position's matrix (capsule_conv_transform_layer.cpp):

        y[n, i OW + j, s kh kw + m kw + q] = X[n, s, i st + m, j st + q] W[s, m, q]   (+ b)

    X[...]: d0 x d1_in (an input capsule), W[s, m, q]: d1_in x (J d1_out) (all J output capsule
    types at once). dW += X^T dy; dX adds every window's dy W^T (the fork's gradient overwrites
    instead, so where windows overlap (stride < kernel) only the last window's term is kept).
    prototxt: ``capsule_conv_transform_param { stride kh kw input_capsule_num (S)
    input_capsule_shape { dim: d0 dim: d1_in } output_capsule_num (J) output_capsule_shape
    { dim: d0 dim: d1_out } input_h input_w bias_term weight_filler bias_filler }``.
    Bottom: N x S H W d0 d1_in values; top: N x OH OW x S kh kw x J d0 d1_out (each last-axis row
    d0 x (J d1_out)). Blobs: W (kh kw S J, d1_in, d1_out), read as (S, kh, kw, d1_in, J d1_out);
    b (J OH OW kh kw S d0 d1_out,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_conv_transform_param")
        self.read_geometry(p)
        self.s, self.j = int(p.input_capsule_num), int(p.output_capsule_num)
        _positive(self, input_capsule_num=self.s, output_capsule_num=self.j)
        self.d0, self.d1 = _dims(self, p.input_capsule_shape, 2, "input_capsule_shape")
        d0, self.e1 = _dims(self, p.output_capsule_shape, 2, "output_capsule_shape")
        if d0 != self.d0:
            raise self.error("capsule matrix mismatch: input %d x %d, output %d x %d"
                             % (self.d0, self.d1, d0, self.e1))
        k = self.kh * self.kw * self.s
        shapes = [(k * self.j, self.d1, self.e1)]
        if p.bias_term:
            shapes.append((self.j * self.oh * self.ow * k * self.d0 * self.e1,))
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        _count_check(self, bottom[0], self.s * self.h * self.w * self.d0 * self.d1,
                     "input_capsule_num x input_h x input_w x the input capsule's size")
        top[0].reshape(bottom[0].shape[0], self.oh * self.ow, self.kh * self.kw * self.s,
                       self.j * self.d0 * self.e1)

    def _x(self, blob):
        return _used(self, blob).reshape(-1, self.s, self.h, self.w, self.d0, self.d1)

    def _w(self):
        return self.blobs[0].data.reshape(self.s, self.kh, self.kw, self.d1, self.j * self.e1)

    def _top(self, blob):
        n = blob.shape[0]
        return blob.reshape(n, self.oh, self.ow, self.s, self.kh, self.kw, self.d0, -1)

    def forward_cpu(self, bottom, top):
        win = _windows(self._x(bottom[0].data), self.kh, self.kw, self.stride, self.oh, self.ow)
        y = np.einsum("nsijaemq,smqec->nijsmqac", win, self._w(), optimize=True)
        top[0].data[...] = y.reshape(top[0].shape)
        if len(self.blobs) > 1:
            top[0].data.reshape(top[0].shape[0], -1)[...] += self.blobs[1].data

    def backward_cpu(self, top, propagate_down, bottom):
        dy = self._top(top[0].diff)
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff += top[0].diff.reshape(top[0].shape[0], -1).sum(axis=0)
        x = self._x(bottom[0].data)
        if self.param_propagate_down[0]:
            win = _windows(x, self.kh, self.kw, self.stride, self.oh, self.ow)
            dw = np.einsum("nsijaemq,nijsmqac->smqec", win, dy, optimize=True)
            self.blobs[0].diff += dw.reshape(self.blobs[0].shape)
        if propagate_down[0]:
            dwin = np.einsum("smqec,nijsmqac->nsijaemq", self._w(), dy, optimize=True)
            _set_diff(self, bottom[0], _add_windows(dwin, x.shape, self.stride))


@register_layer("CapsuleConvRouting")
class CapsuleConvRoutingLayer(_ConvGeometry, Layer):
    """Convolutional capsules, second step: each of the P = J OH OW output capsules is a learned
    combination of its K = kh kw S predictions (capsule_conv_routing_layer.cpp):

        y[n, p] = sum_k c[p, k] u[n, p, k]      u[n, p, k]: D = d0 d1 values
        dc[p, k] += sum_n u[n, p, k] . dy[n, p];  du[n, p, k] = c[p, k] dy[n, p]

    The bottom is read in that (P, K, D) order whatever its shape. prototxt:
    ``capsule_conv_routing_param { stride kh kw input_capsule_num output_capsule_num
    output_capsule_shape { dim: d0 dim: d1 } input_h input_w weight_filler }``. Bottom: N x
    P K D values; top: N x P x D. Blob: c (P, K).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_conv_routing_param")
        self.read_geometry(p)
        s, j = int(p.input_capsule_num), int(p.output_capsule_num)
        _positive(self, input_capsule_num=s, output_capsule_num=j)
        d0, d1 = _dims(self, p.output_capsule_shape, 2, "output_capsule_shape")
        self.p, self.k, self.d = j * self.oh * self.ow, self.kh * self.kw * s, d0 * d1
        self.init_param_blobs([(self.p, self.k)], p.weight_filler)
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        _count_check(self, bottom[0], self.p * self.k * self.d,
                     "(output capsules) x (kh kw input_capsule_num) x (output capsule size)")
        top[0].reshape(bottom[0].shape[0], self.p, self.d)

    def _u(self, bottom):
        return _used(self, bottom[0].data).reshape(-1, self.p, self.k, self.d)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.einsum("pk,npkd->npd", self.blobs[0].data, self._u(bottom))

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if self.param_propagate_down[0]:
            self.blobs[0].diff += np.einsum("npd,npkd->pk", dy, self._u(bottom))
        if propagate_down[0]:
            _set_diff(self, bottom[0], np.einsum("pk,npd->npkd", self.blobs[0].data, dy))


@register_layer("Tensor")
class TensorLayer(_ConvGeometry, Layer):
    """A convolution of matrix capsules (tensor_layer.cpp): each input capsule is d0 matrices of
    d1 x d2_in; an output capsule of type p at (i, j) sums over input types s and window
    positions (m, q), for every c < d0:

        Y[n, p, i, j, c] = sum_{s,m,q} X[n, s, i st + m, j st + q, c] W[p, s, m, q, c]  (+ b)

    X[..., c]: d1 x d2_in, W[p, s, m, q, c]: d2_in x d2_out, Y[..., c]: d1 x d2_out. No padding.
    Backward: dW += X^T dY, dX += dY W^T over every window. The fork adds its bias through a
    multiplier it never sizes (bias_term true reads past it); here b is added to every sample.
    prototxt: ``capsule_conv_param { stride kh kw input_capsule_num (S) output_capsule_num (J)
    input_h input_w input_capsule_shape { dim: d0 dim: d1 dim: d2_in } output_capsule_shape
    { dim: d0 dim: d1 dim: d2_out } bias_term weight_filler bias_filler }`` (``group`` unused).
    Bottom: N x S H W d0 d1 d2_in values; top: N x J x OH x OW x d0 x d1 x d2_out. Blobs:
    W (S, J, kh, kw, d0, d2_in d2_out) in the fork's shape, read as (J, S, kh, kw, d0, d2_in,
    d2_out) as it indexes it; b (J OH OW d0 d1 d2_out,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_conv_param")
        self.read_geometry(p)
        self.s, self.j = int(p.input_capsule_num), int(p.output_capsule_num)
        _positive(self, input_capsule_num=self.s, output_capsule_num=self.j)
        self.d0, self.d1, self.d2 = _dims(self, p.input_capsule_shape, 3, "input_capsule_shape")
        e0, e1, self.e2 = _dims(self, p.output_capsule_shape, 3, "output_capsule_shape")
        if (e0, e1) != (self.d0, self.d1):
            raise self.error("capsule matrix mismatch: input %s, output %s"
                             % ((self.d0, self.d1, self.d2), (e0, e1, self.e2)))
        shapes = [(self.s, self.j, self.kh, self.kw, self.d0, self.d2 * self.e2)]
        if p.bias_term:
            shapes.append((self.j * self.oh * self.ow * self.d0 * self.d1 * self.e2,))
        self.init_param_blobs(shapes, p.weight_filler, p.bias_filler)
        self.param_propagate_down = [True] * len(self.blobs)

    def reshape(self, bottom, top):
        _count_check(self, bottom[0],
                     self.s * self.h * self.w * self.d0 * self.d1 * self.d2,
                     "input_capsule_num x input_h x input_w x the input capsule's size")
        top[0].reshape(bottom[0].shape[0], self.j, self.oh, self.ow, self.d0, self.d1, self.e2)

    def _x(self, blob):
        return _used(self, blob).reshape(-1, self.s, self.h, self.w, self.d0, self.d1, self.d2)

    def _w(self):
        return self.blobs[0].data.reshape(self.j, self.s, self.kh, self.kw, self.d0, self.d2,
                                          self.e2)

    def forward_cpu(self, bottom, top):
        win = _windows(self._x(bottom[0].data), self.kh, self.kw, self.stride, self.oh, self.ow)
        top[0].data[...] = np.einsum("nsijcrumq,psmqcuv->npijcrv", win, self._w(), optimize=True)
        if len(self.blobs) > 1:
            top[0].data.reshape(top[0].shape[0], -1)[...] += self.blobs[1].data

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        if len(self.blobs) > 1 and self.param_propagate_down[1]:
            self.blobs[1].diff += dy.reshape(dy.shape[0], -1).sum(axis=0)
        x = self._x(bottom[0].data)
        if self.param_propagate_down[0]:
            win = _windows(x, self.kh, self.kw, self.stride, self.oh, self.ow)
            dw = np.einsum("nsijcrumq,npijcrv->psmqcuv", win, dy, optimize=True)
            self.blobs[0].diff += dw.reshape(self.blobs[0].shape)
        if propagate_down[0]:
            dwin = np.einsum("psmqcuv,npijcrv->nsijcrumq", self._w(), dy, optimize=True)
            _set_diff(self, bottom[0], _add_windows(dwin, x.shape, self.stride))
