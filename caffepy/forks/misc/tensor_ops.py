"""Small tensor operations that several forks register under one type name each, with different
meanings: the broadcasting Maximum and the OneHot / MatMul of foss-for-synopsys-dwc-arc-
processors/synopsys-caffe (its TensorFlow-import layers), AminaGhrissi/caffe-simnets' OneHot and
SumLoss, 2bbb/caffe-fr-chairs' SumLoss, and varunjampani/video_prop_networks' MatMul. Where two
forks share a name, the one the prototxt's parameters or bottoms identify is built (each class
says when); caffe_rtpose's one-bottom Maximum is in :mod:`caffepy.forks.pose.switch`.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, fork_param, register_layer, register_variant


def _broadcast_shape(layer, a, b):
    try:
        return np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        raise layer.error("shapes %s and %s do not broadcast (each axis, from the last, equal or "
                          "1)" % (tuple(a), tuple(b)), ShapeError) from None


@register_layer("Maximum")
class BroadcastMaximumLayer(Layer):
    """synopsys-caffe's Maximum (src/caffe/layers/maximum_layer.cpp), for two bottoms: y = a > b ? a : b element-wise, with NumPy / TensorFlow broadcasting (axes matched
    from the last, each equal or 1; a 0-axis blob is a scalar). Top: the broadcast shape, not in
    place. Backward: NOT_IMPLEMENTED in the fork. No parameters. (The fork's one-bottom form reads
    its second operand from a weights-file blob; a one-bottom Maximum here is caffe_rtpose's,
    :class:`caffepy.forks.pose.switch.MaximumLayer`.)
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("Maximum does not allow in-place computation")
        top[0].reshape(_broadcast_shape(self, bottom[0].shape, bottom[1].shape))

    def forward_cpu(self, bottom, top):
        a, b = bottom[0].data, bottom[1].data
        top[0].data[...] = np.where(a > b, a, b)


@register_layer("OneHot")
class OneHotLayer(Layer):
    """synopsys-caffe's OneHot (src/caffe/layers/one_hot_layer.cpp): a new axis of ``depth``
    values at ``axis`` (-1: after the last), on_value at int(x) and off_value elsewhere; a value
    outside [0, depth) gives a row of off_value. Backward: NOT_IMPLEMENTED in the fork. prototxt:
    ``one_hot_param { depth axis: -1 on_value: 1 off_value: 0 }``. (With ``input_dim`` set, the
    layer is caffe-simnets', :class:`SimnetsOneHotLayer`.)
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "one_hot_param")
        self.depth, self.on, self.off = int(p.depth), float(p.on_value), float(p.off_value)
        n = bottom[0].num_axes
        self.axis = n if p.axis == -1 else int(p.axis)
        if not 0 <= self.axis <= n:
            raise self.error("axis must be -1 or in [0, %d], got %d" % (n, p.axis))

    def reshape(self, bottom, top):
        shape = list(bottom[0].shape)
        shape.insert(self.axis, self.depth)
        top[0].reshape(*shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if x.ndim == 0:              # the fork truncates a scalar before its range check
            x = np.trunc(x)
        hot = (x >= 0) & (x < self.depth)
        idx = np.where(hot, x, -1).astype(np.int64)
        classes = np.arange(self.depth).reshape((-1,) + (1,) * (x.ndim - self.axis))
        y = np.where(np.expand_dims(idx, self.axis) == classes, self.on, self.off)
        top[0].data[...] = y


@register_variant("OneHot", lambda lp: lp.one_hot_param.HasField("input_dim"))
class SimnetsOneHotLayer(Layer):
    """AminaGhrissi/caffe-simnets' OneHot (src/caffe/layers/one_hot_layer.cpp / .cu), chosen when
    ``one_hot_param.input_dim`` is set: bottom N x 1 x ... of indices, top N x input_dim x ...
    with 1 at channel round(x) (halves away from 0) and 0 elsewhere; ``to_log``: 0 and -inf
    instead. An index outside [0, input_dim) is refused (the fork writes outside the top). No
    gradient to the indices (the fork stops on a request). prototxt: ``one_hot_param { input_dim
    to_log: false }``.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "one_hot_param")
        self.m, self.to_log = int(p.input_dim), bool(p.to_log)
        if self.m <= 0:
            raise self.error("one_hot_param.input_dim must be positive")

    def reshape(self, bottom, top):
        b = bottom[0]
        if b.num_axes < 2 or b.shape[1] != 1:
            raise self.error("bottom must be N x 1 x ..., got %s" % (b.shape,), ShapeError)
        top[0].reshape(b.shape[0], self.m, *b.shape[2:])

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        idx = (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.m):
            raise self.error("index %d outside [0, %d)" % (idx.min() if idx.min() < 0
                                                           else idx.max(), self.m))
        hit = idx == np.arange(self.m).reshape((1, -1) + (1,) * (x.ndim - 2))
        one, zero = (0.0, -np.inf) if self.to_log else (1.0, 0.0)
        top[0].data[...] = np.where(hit, one, zero)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("cannot back-propagate to the OneHot input")

    def allow_force_backward(self, bottom_index):
        return False


@register_layer("SumLoss")
class SumLossLayer(LossLayer):
    """2bbb/caffe-fr-chairs' SumLoss (src/caffe/layers/sum_loss_layer.cpp): the sum of all of the
    bottom's values over its num, L = sum(x) / N; dL/dx = loss_weight / N. One bottom, no
    parameters. (With ``sum_loss_param`` set or a second bottom, the layer is caffe-simnets',
    :class:`SumLossSimnetsLayer`, whose sign and divisor differ.)
    """
    exact_num_bottom_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes > 4:
            raise self.error("bottom needs at most 4 axes (the fork's legacy num), got %s"
                             % (bottom[0].shape,), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.sum(bottom[0].data, dtype=np.float64) / bottom[0].num

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.reshape(-1)[0] / bottom[0].num


@register_variant("SumLoss", lambda lp: lp.HasField("sum_loss_param") or len(lp.bottom) == 2)
class SumLossSimnetsLayer(LossLayer):
    """AminaGhrissi/caffe-simnets' SumLoss (src/caffe/layers/sum_loss_layer.cpp), chosen when
    ``sum_loss_param`` is set or the layer has a label bottom: the negated mean of an N-vector
    (N x 1 x ...). use_labeled_data (default): L = -sum(x) / N, dL/dx = -loss_weight / N.
    Otherwise over the items whose label (truncated to int) is negative, U of them:
    L = -sum_U x / U (0 when U = 0), and dL/dx = -loss_weight / N for those items, 0 for the
    others (the fork divides the gradient by N, not U: a scaled gradient, kept). prototxt:
    ``sum_loss_param { use_labeled_data: true }``. Bottoms: x[, labels].
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 1
    max_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "sum_loss_param")
        self.labeled = bool(p.use_labeled_data)
        if not self.labeled and len(bottom) < 2:
            raise self.error("use_labeled_data: false needs a label bottom")

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 1 or x.count != x.shape[0]:
            raise self.error("bottom[0] must hold one value per item (N x 1 ...), got %s"
                             % (x.shape,), ShapeError)
        if not self.labeled and bottom[1].count < x.count:
            raise self.error("labels %s hold fewer than %d values" % (bottom[1].shape, x.count),
                             ShapeError)
        top[0].reshape(())

    def _unlabeled(self, bottom):
        return np.trunc(bottom[1].data.reshape(-1)[:bottom[0].count]) < 0

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1)
        if self.labeled:
            top[0].data[...] = -np.sum(x, dtype=np.float64) / x.size
        else:
            u = self._unlabeled(bottom)
            top[0].data[...] = -np.sum(x[u], dtype=np.float64) / u.sum() if u.any() else 0.0

    def backward_cpu(self, top, propagate_down, bottom):
        if len(propagate_down) > 1 and propagate_down[1]:
            raise self.error("cannot back-propagate to label inputs")
        if not propagate_down[0]:
            return
        g = np.full(bottom[0].count, -top[0].diff.reshape(-1)[0] / bottom[0].count)
        if not self.labeled:
            g[~self._unlabeled(bottom)] = 0
        bottom[0].diff.reshape(-1)[...] = g


def _matrix(flat, rows, cols, transposed):
    """op(A) for a gemm operand stored row-major as rows x cols (cols x rows when transposed)."""
    return flat.reshape(cols, rows).T if transposed else flat.reshape(rows, cols)


@register_layer("MatMul")
class MatMulLayer(Layer):
    """MatMul of two forks, told apart by the prototxt and the bottoms' shapes.

    synopsys-caffe's (src/caffe/layers/matmul_layer.cpp; used with ``matmul_param``, or one
    bottom, or two bottoms of one number of axes that agree except in the last two): y = op(a)
    op(b) per matrix of the leading axes (op: transpose with transpose_a / transpose_b); when a
    has more axes than b, a's rows (all but its last axis) times b's first K x N matrix. With one
    bottom, b is a parameter blob of ``blob_shape``, zero-filled (the fork's; a weights file
    gives it). Top: a's shape with the last axis N (and the last but one M when the ranks are
    equal). Backward: NOT_IMPLEMENTED in the fork. prototxt: ``matmul_param { transpose_a: false
    transpose_b: false blob_shape }``.

    varunjampani/video_prop_networks' (lib/caffe/src/caffe/layers/mat_mul_layer.cpp; used
    without matmul_param for 4-D bottoms x N x F x D x L, k_1 .. k_T N x C x L x K with C = 1 or
    C != F, or more than two bottoms): the k_t are concatenated along their last axis into
    k (N x C x L x TK) and per item P = x[n] (as F D x L) k[n, 0] (F D x TK) fills the first
    F D T K values of top[n]; top N x C F T x D x K (values past them, C > 1, are 0). dx[n] =
    P's gradient k[n, 0]^T; dk[n, 0] = x[n]^T P's gradient (k's other channels: 0), split back
    onto the k_t.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "matmul_param")
        shapes = [b.shape for b in bottom]
        self.vpn = (not self.layer_param.HasField("matmul_param") and len(bottom) >= 2
                    and all(len(s) == 4 for s in shapes)
                    and (len(bottom) > 2 or shapes[1][1] == 1 or shapes[1][1] != shapes[0][1]))
        if self.vpn:
            return
        self.ta, self.tb = bool(p.transpose_a), bool(p.transpose_b)
        if len(bottom) > 2:
            raise self.error("takes one or two bottoms with matmul_param, got %d" % len(bottom))
        if len(bottom) == 1 and not self.blobs:
            if not p.blob_shape:
                raise self.error("one bottom needs matmul_param.blob_shape (the second operand)")
            self.blobs = [self.new_blob(tuple(p.blob_shape))]

    def _b(self, bottom):
        return bottom[1] if len(bottom) > 1 else self.blobs[0]

    def reshape(self, bottom, top):
        if self.vpn:
            return self._reshape_vpn(bottom, top)
        a, b = bottom[0].shape, self._b(bottom).shape
        r = len(a)
        if r < len(b) or len(b) < 2:
            raise self.error("a %s needs at least as many axes as b %s, and b two or more"
                             % (a, b), ShapeError)
        if r == len(b):
            self.m, self.k = (a[-1], a[-2]) if self.ta else (a[-2], a[-1])
            kb, self.n = (b[-1], b[-2]) if self.tb else (b[-2], b[-1])
            if a[:-2] != b[:-2]:
                raise self.error("a %s and b %s must agree except in the last two axes"
                                 % (a, b), ShapeError)
        else:
            self.k, self.n, kb = a[-1], b[-1], b[-2]
            self.m = bottom[0].count // max(self.k, 1)
        if kb != self.k:
            raise self.error("a %s and b %s have incompatible shapes" % (a, b), ShapeError)
        shape = list(a)
        shape[-1] = self.n
        if r == len(b):
            shape[-2] = self.m
        top[0].reshape(*shape)

    def _reshape_vpn(self, bottom, top):
        x, k = bottom[0].shape, bottom[1].shape
        if x[0] != k[0] or x[3] != k[2]:
            raise self.error("x %s and k %s: need x = N x F x D x L, k = N x C x L x K"
                             % (x, k), ShapeError)
        for i, b in enumerate(bottom[2:], 2):
            if b.shape != k:
                raise self.error("bottom[%d] %s must have bottom[1]'s shape %s"
                                 % (i, b.shape, k), ShapeError)
        top[0].reshape(x[0], k[1] * x[1] * (len(bottom) - 1), x[2], k[3])

    def forward_cpu(self, bottom, top):
        if self.vpn:
            x, kk, y = self._vpn_operands(bottom)
            p = np.einsum("nrl,nlk->nrk", x, kk)
            top[0].data.reshape(x.shape[0], -1)[...] = 0
            top[0].data.reshape(x.shape[0], -1)[:, :p[0].size] = p.reshape(x.shape[0], -1)
            return
        a, b = bottom[0].data.reshape(-1), self._b(bottom).data.reshape(-1)
        m, n, k = self.m, self.n, self.k
        out = top[0].data.reshape(-1)
        for i in range(bottom[0].count // max(m * k, 1)):
            out[i * m * n:(i + 1) * m * n] = (
                _matrix(a[i * m * k:(i + 1) * m * k], m, k, self.ta)
                @ _matrix(b[i * k * n:(i + 1) * k * n], k, n, self.tb)).reshape(-1)

    def _vpn_operands(self, bottom):
        """x[n] as F D x L, k[n, 0] as L x T K, and the count of P per item."""
        n, f, d, l = bottom[0].shape
        kk = np.concatenate([b.data for b in bottom[1:]], axis=3)[:, 0]
        return bottom[0].data.reshape(n, f * d, l), kk, f * d * kk.shape[2]

    def backward_cpu(self, top, propagate_down, bottom):
        if not self.vpn:
            return super().backward_cpu(top, propagate_down, bottom)
        x, kk, size = self._vpn_operands(bottom)
        dp = top[0].diff.reshape(x.shape[0], -1)[:, :size].reshape(x.shape[0], x.shape[1], -1)
        if propagate_down[0]:
            bottom[0].diff.reshape(x.shape)[...] = np.einsum("nrk,nlk->nrl", dp, kk)
        if any(propagate_down[1:]):
            dk = np.einsum("nrl,nrk->nlk", x, dp)
            width = bottom[1].shape[3]
            for t, b in enumerate(bottom[1:]):
                b.diff[...] = 0
                b.diff[:, 0] = dk[:, :, t * width:(t + 1) * width]
