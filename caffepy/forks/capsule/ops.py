"""The per-capsule layers of chenzhenhua986/CAFFE-CapsNet: Squash, CapsuleLen, CapsuleMask,
CapsuleRelu, CapsuleReshape and MarginLoss (src/caffe/layers/*_layer.cpp / .cu there).

A capsule is a run of consecutive values of a sample (its ``capsule_dim`` / ``dim`` values); its
length is |s| = sqrt(sum s^2 + 1e-7), as the fork computes it everywhere.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer
from ...layers.base import fork_param

EPS = 1e-7


def _capsules(layer, blob, dim, what):
    """``blob`` viewed as (N, capsules, dim); an error when a sample's count is not a multiple."""
    if dim <= 0:
        raise layer.error("%s must be positive, got %d" % (what, dim))
    per = blob.count // blob.shape[0] if blob.num_axes else 0
    if blob.num_axes < 1 or per % dim:
        raise layer.error("bottom shape %s: a sample's %d values are not a whole number of "
                          "capsules of %s %d" % (blob.shape, per, what, dim), ShapeError)
    return per // dim


@register_layer("Squash")
class SquashLayer(NeuronLayer):
    """The fork's squash (after "Capsule Network Performance on Complex Data"), per capsule s:

        L = sum s^2 + 1e-7,  r = sqrt(L + 1e-7),  f(r) = (1 - exp(-r)) / r,  y = f(r) s
        dL/ds = f dy + s (f'(r) / r) (s . dy),   f'(r) = exp(-r) / r - (1 - exp(-r)) / r^2

    The fork's backward keeps only the diagonal of that Jacobian (d y_k / d s_k; the s (s . dy)
    term is replaced by s_k^2 dy_k); caffepy back-propagates the whole derivative. prototxt:
    ``squash_param { capsule_dim }`` (``a`` is read by nothing there). Bottom: N x ... with a
    sample's count a multiple of capsule_dim; top: the same shape (not in place).
    """

    def layer_setup(self, bottom, top):
        self.dim = int(fork_param(self.layer_param, "squash_param").capsule_dim)

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("Squash cannot run in place")
        self.num = _capsules(self, bottom[0], self.dim, "capsule_dim")
        top[0].reshape(bottom[0].shape)

    def _factors(self, s):
        r = np.sqrt(np.sum(s * s, axis=-1, keepdims=True) + 2 * EPS)
        e = np.exp(-r)
        return r, (1 - e) / r, e / r - (1 - e) / (r * r)

    def forward_cpu(self, bottom, top):
        s = bottom[0].data.reshape(bottom[0].shape[0], self.num, self.dim)
        top[0].data[...] = (self._factors(s)[1] * s).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        shape = (bottom[0].shape[0], self.num, self.dim)
        s, dy = bottom[0].data.reshape(shape), top[0].diff.reshape(shape)
        r, f, df = self._factors(s)
        dx = f * dy + s * (df / r) * np.sum(s * dy, axis=-1, keepdims=True)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("CapsuleLen")
class CapsuleLenLayer(Layer):
    """Capsule lengths: y[n, j] = sqrt(sum_d x[n, j, d]^2 + 1e-7), the sample's values split into
    num_class capsules (capsule_len_layer.cpp; its .cu leaves out the square root, which changes
    no ranking: the class scores an Accuracy layer reads). dL/dx = dL/dy x / y (the fork refuses a
    backward: the layer is there for accuracy). prototxt: ``capsule_len_param { num_class }``.
    Bottom: N x ...; top: N x num_class.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.classes = int(fork_param(self.layer_param, "capsule_len_param").num_class)

    def reshape(self, bottom, top):
        if self.classes <= 0:
            raise self.error("num_class must be positive")
        self.dim = _capsules(self, bottom[0], self.classes, "num_class")
        top[0].reshape(bottom[0].shape[0], self.classes)

    def _x(self, bottom):
        return bottom[0].data.reshape(bottom[0].shape[0], self.classes, self.dim)

    def forward_cpu(self, bottom, top):
        x = self._x(bottom)
        top[0].data[...] = np.sqrt(np.sum(x * x, axis=-1) + EPS)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dx = self._x(bottom) * (top[0].diff / top[0].data)[..., None]
            bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("CapsuleMask")
class CapsuleMaskLayer(Layer):
    """Keeps one of a sample's class_num capsules and zeroes the others (the decoder's input).

    The fork means to keep the longest capsule, but its loop compares each length with a running
    maximum it never updates (-FLT_MAX), so every capsule "wins" in turn and the last one
    (index class_num - 1) is the one kept; caffepy computes what the fork computes.
    dL/dx = dL/dy on the kept capsule, 0 elsewhere. prototxt: ``capsule_mask_param
    { class_num }``. Bottom: N x ...; top: the same shape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.classes = int(fork_param(self.layer_param, "capsule_mask_param").class_num)

    def reshape(self, bottom, top):
        self.dim = _capsules(self, bottom[0], self.classes, "class_num")
        top[0].reshape(bottom[0].shape)

    def _keep(self, a):
        out = np.zeros_like(a.reshape(a.shape[0], self.classes, self.dim))
        out[:, -1] = a.reshape(out.shape)[:, -1]
        return out.reshape(a.shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = self._keep(bottom[0].data)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = self._keep(top[0].diff)


@register_layer("CapsuleRelu")
class CapsuleReluLayer(Layer):
    """Zeroes every capsule (consecutive ``dim`` values of the whole blob) longer than ``thre``:
    y = x where |x| <= thre, 0 elsewhere; dL/dx = dL/dy there, 0 elsewhere. The fork writes only
    the zeros into the top (the layer is used in place); out of place caffepy copies the rest.
    prototxt: ``capsule_relu_param { dim thre }``. Bottom / top: any shape whose count is a
    multiple of dim (in place allowed).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "capsule_relu_param")
        self.dim, self.thre = int(p.dim), float(p.thre)
        if self.dim <= 0:
            raise self.error("dim must be positive")

    def reshape(self, bottom, top):
        if bottom[0].count % self.dim:
            raise self.error("count %d is not a multiple of dim %d" % (bottom[0].count, self.dim),
                             ShapeError)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1, self.dim)
        self.keep = np.sqrt(np.sum(x * x, axis=1, keepdims=True) + EPS) <= self.thre
        top[0].data[...] = (x * self.keep).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff.reshape(-1, self.dim)
            bottom[0].diff[...] = (dy * self.keep).reshape(bottom[0].shape)


@register_layer("CapsuleReshape")
class CapsuleReshapeLayer(Layer):
    """A convolution's maps as capsules: the C = G capsule_dim channels are G groups, each a
    capsule_dim x (H W) matrix, transposed (capsule_reshape_layer.cu; the .cpp's CPU functions
    are empty):

        y[n, g (H W) + p, d] = x[n, g capsule_dim + d, p]

    Backward transposes back. prototxt: ``capsule_reshape_param { capsule_dim }``. Bottom:
    N x C (x H x W), C a multiple of capsule_dim; top: N x (C / capsule_dim) H W x capsule_dim.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.dim = int(fork_param(self.layer_param, "capsule_reshape_param").capsule_dim)

    def reshape(self, bottom, top):
        b = bottom[0]
        if self.dim <= 0 or b.num_axes < 2 or b.shape[1] % self.dim:
            raise self.error("bottom shape %s: channels must be a multiple of capsule_dim %d"
                             % (b.shape, self.dim), ShapeError)
        self.groups, self.plane = b.shape[1] // self.dim, b.count_range(2)
        top[0].reshape(b.shape[0], self.groups * self.plane, self.dim)

    def _grouped(self, n):
        return (n, self.groups, self.dim, self.plane)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self._grouped(bottom[0].shape[0]))
        top[0].data[...] = x.transpose(0, 1, 3, 2).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            n = bottom[0].shape[0]
            dy = top[0].diff.reshape(n, self.groups, self.plane, self.dim)
            bottom[0].diff[...] = dy.transpose(0, 1, 3, 2).reshape(bottom[0].shape)


@register_layer("MarginLoss")
class MarginLossLayer(LossLayer):
    """CapsNet's margin loss over the class capsules' lengths |v_nj| (num_class capsules a sample):

        loss = 1/N sum_n sum_j [ T_nj max(0, m+ - |v_nj|)^2 + lambda (1 - T_nj) max(0, |v_nj| - m-)^2 ]
        T_nj = (label_n == j);   dL/dv_nj = w / N * c_nj v_nj / |v_nj|,
        c_nj = -2 T max(0, m+ - |v|) + 2 lambda (1 - T) max(0, |v| - m-)

    (w: the loss weight). The fork's backward leaves out w / N (its gradient is N times the
    derivative of the loss it reports, whatever the loss weight); caffepy back-propagates the
    derivative. prototxt: ``margin_param { num_class m_upper_bound m_lower_bound lambda }``
    (``axis`` unused there). Bottoms: capsules N x ..., labels N (x 1 ...). Top: the scalar loss.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "margin_param")
        self.classes = int(p.num_class)
        self.upper, self.lower = float(p.m_upper_bound), float(p.m_lower_bound)
        self.lam = float(getattr(p, "lambda"))

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        self.dim = _capsules(self, bottom[0], self.classes, "num_class")

    def _terms(self, bottom):
        n = bottom[0].shape[0]
        v = bottom[0].data.reshape(n, self.classes, self.dim)
        length = np.sqrt(np.sum(v * v, axis=-1) + EPS)
        t = bottom[1].data.reshape(n).astype(np.int64)[:, None] == np.arange(self.classes)
        over = np.maximum(0.0, self.upper - length)
        under = np.maximum(0.0, length - self.lower)
        return v, length, t, over, under

    def forward_cpu(self, bottom, top):
        v, length, t, over, under = self._terms(bottom)
        loss = np.sum(np.where(t, over * over, self.lam * under * under))
        top[0].data[...] = loss / v.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to the labels")
        if not propagate_down[0]:
            return
        v, length, t, over, under = self._terms(bottom)
        c = np.where(t, -2 * over, 2 * self.lam * under)
        scale = float(top[0].diff.reshape(-1)[0]) / v.shape[0]
        bottom[0].diff[...] = (scale * (c / length)[..., None] * v).reshape(bottom[0].shape)
