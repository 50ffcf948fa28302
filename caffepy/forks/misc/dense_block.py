"""Tongcheng Li's ``DenseBlock`` (the memory-efficient DenseNet layer of Tongcheng/caffe, copied
into senlinuc/caffe_ocr, leonzfa/iResNet, zhubenfu's licence-plate recogniser and
GuohongWu/caffe-windows): a whole dense block of DenseNet in one layer.

With C0 the bottom's channels, G = ``growthRate`` and T = ``numTransition``, the layer keeps one
buffer X of C0 + T G channels whose first C0 are the bottom; transition i (i = 0 .. T-1) reads
its first C_i = C0 + i G channels and writes the next G:

    r = ReLU(BN_i(X[:, :C_i]))
    r = ReLU(BN'_i(conv1x1(r; V_i)))               (use_BC: the 4 G-channel bottleneck)
    X[:, C_i:C_i + G] = conv(r; W_i)               (TRAIN with use_dropout: then dropout)

and the top is X (N x (C0 + T G) x H x W). The convolutions have no bias; they are the fork's
cuDNN ``CUDNN_CONVOLUTION`` mode, a true convolution (the filter turned by 180 degrees against
Caffe's cross-correlation), ``filter_H`` x ``filter_W`` with ``pad_h`` / ``pad_w`` and the
two strides (the copies that hard-code 3 x 3, pad 1, stride 1 use exactly the defaults), which
must keep H x W. BN is cuDNN's spatial batch normalisation with its own scale and bias,
eps = 1e-5: TRAIN normalises with the batch mean and biased variance and moves the stored
statistics by d = ``moving_average_fraction`` (mean <- d mu + (1 - d) mean, var <- d
m/(m-1) var_batch + (1 - d) var, m = N H W); TEST uses the stored ones. Dropout keeps a value with
probability 1 - ``dropout_amount`` and scales it by 1 / (1 - dropout_amount). These are the fork's
GPU semantics, which trained every published model; the fork's CPU code is a debugging reference
that reads the statistics through the last (timer) blob, which its GPU code never moves.
The input width comes from the bottom (``initChannel`` is read, as senlinuc/caffe_ocr's copy
reads it, from the bottom's channels).

Backward: dropout's mask, the convolutions' adjoints, BN's batch-statistics gradient
dx = (dy' - mean(dy') - x_hat mean(x_hat dy')) / sqrt(var + eps), dy' = scale dy (TEST: dy' /
sqrt(var + eps)), ReLU's mask, each transition's input gradient added into the buffer's.

prototxt: ``denseblock_param { numTransition: 40 growthRate: 12 pad_h: 1 pad_w: 1
conv_verticalStride: 1 conv_horizentalStride: 1 filter_H: 3 filter_W: 3 Filter_Filler
BN_Scaler_Filler BN_Bias_Filler (constant 0 unless set) use_dropout: false dropout_amount: 0
use_BC: false moving_average_fraction: 0.1 }`` (``initChannel``, ``gpuIdx``, ``workspace_MB``,
``BC_ultra_space_efficient`` change nothing on the CPU).
Params, in the fork's order (its .caffemodel files): W_i (T), scale_i (T), bias_i (T), mean_i
(T), var_i (T), with use_BC V_i (T), scale'_i, bias'_i, mean'_i, var'_i (T each), then one timer
blob (1,). The layer writes its own ParamSpecs (lr_mult 0 for the statistics and the timer) and,
like the fork, refuses ``param`` entries in the file.
"""
import numpy as np

from ... import fillers
from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer
from ...math.cpu import col2im, im2col

EPS = 1e-5      # CUDNN_BN_MIN_EPSILON of the cuDNN versions the fork was built with
INT_MAX = 2 ** 31 - 1       # Caffe's limit on a blob's count (checked here over all of them)


def _bn_forward(z, scale, bias, mean, var, train, fraction):
    """y, (x_hat, inv_std) of spatial batch normalisation of ``z`` (N, C, H, W); in TRAIN the
    stored ``mean`` / ``var`` (C,) move towards the batch's."""
    if train:
        mu = z.mean(axis=(0, 2, 3))
        v = np.square(z - mu[:, None, None]).mean(axis=(0, 2, 3))
        m = z.size // z.shape[1]
        mean[...] = fraction * mu + (1 - fraction) * mean
        var[...] = fraction * v * (m / max(m - 1, 1)) + (1 - fraction) * var
    else:
        mu, v = mean, var
    inv_std = (1.0 / np.sqrt(v + EPS)).astype(z.dtype)
    x_hat = (z - mu[:, None, None]) * inv_std[:, None, None]
    return x_hat * scale[:, None, None] + bias[:, None, None], (x_hat, inv_std)


def _bn_backward(dy, cache, scale, train, dscale, dbias):
    """The input gradient of :func:`_bn_forward`; adds the scale's and bias's into theirs."""
    x_hat, inv_std = cache
    dscale += (dy * x_hat).sum(axis=(0, 2, 3))
    dbias += dy.sum(axis=(0, 2, 3))
    dxh = dy * scale[:, None, None]
    if train:
        dxh = (dxh - dxh.mean(axis=(0, 2, 3), keepdims=True)
               - x_hat * (dxh * x_hat).mean(axis=(0, 2, 3), keepdims=True))
    return dxh * inv_std[:, None, None]


class _Conv(object):
    """A bias-free true convolution (cuDNN's CUDNN_CONVOLUTION) of fixed geometry."""

    def __init__(self, kernel, pad, stride):
        self.kernel, self.pad, self.stride = kernel, pad, stride

    def forward(self, x, w):
        self.x_shape = x.shape
        self.col = im2col(x, self.kernel, self.pad, self.stride, (1, 1))
        wf = w[:, :, ::-1, ::-1].reshape(w.shape[0], -1)
        out = np.matmul(wf, self.col)
        return out.reshape(x.shape[0], w.shape[0], *self._out_shape(x.shape))

    def _out_shape(self, shape):
        return tuple((s + 2 * p - k) // t + 1 for s, k, p, t in
                     zip(shape[2:], self.kernel, self.pad, self.stride))

    def backward(self, dy, w, dw):
        """The input gradient; adds the filter's into ``dw``."""
        g = dy.reshape(dy.shape[0], dy.shape[1], -1)
        dwf = np.einsum("ngs,nks->gk", g, self.col).reshape(w.shape)
        dw += dwf[:, :, ::-1, ::-1]
        wf = w[:, :, ::-1, ::-1].reshape(w.shape[0], -1)
        dcol = np.matmul(wf.T, g)
        return col2im(dcol, self.x_shape, self.kernel, self.pad, self.stride, (1, 1))


@register_layer("DenseBlock")
class DenseBlockLayer(Layer):
    """Tongcheng/caffe's DenseBlock: see the module doc."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "denseblock_param")
        if p is None:
            raise self.error("DenseBlock needs denseblock_param in the schema")
        self.T, self.G = int(p.numTransition), int(p.growthRate)
        self.bc, self.fraction = bool(p.use_BC), float(p.moving_average_fraction)
        self.drop = float(p.dropout_amount) if p.use_dropout else 0.0
        if self.T < 1 or self.G < 1:
            raise self.error("denseblock_param numTransition and growthRate must be positive, "
                             "got %d and %d" % (self.T, self.G))
        if not 0 <= self.drop < 1:
            raise self.error("denseblock_param dropout_amount must be in [0, 1), got %g"
                             % self.drop)
        kernel, pad = (int(p.filter_H), int(p.filter_W)), (int(p.pad_h), int(p.pad_w))
        stride = (int(p.conv_verticalStride), int(p.conv_horizentalStride))
        if min(kernel + stride) < 1 or min(pad) < 0:
            raise self.error("denseblock_param filter_H/filter_W/strides must be positive and "
                             "pads non-negative, got %s, %s, %s" % (kernel, stride, pad))
        if bottom[0].num_axes != 4:
            raise self.error("DenseBlock takes an N x C x H x W bottom, got %s"
                             % (bottom[0].shape,), ShapeError)
        self.c0 = bottom[0].shape[1]
        self.geometry = (kernel, pad, stride)
        count = self._param_count()
        if count > INT_MAX:
            raise self.error("denseblock_param (numTransition %d, growthRate %d) on %d channels "
                             "makes %d parameters, over Caffe's blob limit of %d"
                             % (self.T, self.G, self.c0, count, INT_MAX), ShapeError)
        if not self.blobs:
            if len(self.layer_param.param):
                raise self.error("DenseBlock writes its own param specs; the fork refuses "
                                 "'param' entries in its layer")
            self.blobs = self._new_blobs(p)
        del self.layer_param.param[:]
        stats = list(range(3 * self.T, 5 * self.T)) + (
            list(range(8 * self.T, 10 * self.T)) if self.bc else [])
        frozen = set(stats + [len(self.blobs) - 1])
        for i in range(len(self.blobs)):
            spec = self.layer_param.param.add()
            spec.lr_mult = spec.decay_mult = 0.0 if i in frozen else 1.0
        self.param_propagate_down = [i not in frozen for i in range(len(self.blobs))]

    def _param_count(self):
        """The parameter values of the fork's blobs, counted before any is made."""
        T, G, (kh, kw) = self.T, self.G, self.geometry[0]
        widths = T * self.c0 + G * T * (T - 1) // 2           # sum of C_i
        n = (G * 4 * G * kh * kw * T if self.bc else G * kh * kw * widths) + 4 * widths + 1
        if self.bc:
            n += 4 * G * widths + 4 * T * 4 * G
        return n

    def _new_blobs(self, p):
        T, G, c0 = self.T, self.G, self.c0
        kh, kw = self.geometry[0]
        width = [c0 + i * G for i in range(T)]
        shapes = ([(G, 4 * G if self.bc else c, kh, kw) for c in width]
                  + [(1, c, 1, 1) for c in width] * 4)
        if self.bc:
            shapes += [(4 * G, c, 1, 1) for c in width] + [(1, 4 * G, 1, 1)] * (4 * T)
        blobs = [self.new_blob(s) for s in shapes] + [self.new_blob((1,))]
        for i, b in enumerate(blobs[:-1]):
            group = i // T
            if group in (0, 5):
                fillers.fill(b, p.Filter_Filler)
            elif group in (1, 6):
                fillers.fill(b, p.BN_Scaler_Filler)
            elif group in (2, 7):
                fillers.fill(b, p.BN_Bias_Filler)
            else:
                b.data[...] = 1.0 if group in (4, 9) else 0.0
        return blobs

    def reshape(self, bottom, top):
        n, c, h, w = bottom[0].shape
        if c != self.c0:
            raise self.error("bottom has %d channels, the layer was set up for %d"
                             % (c, self.c0), ShapeError)
        kernel, pad, stride = self.geometry
        if n * (self.c0 + self.T * self.G) * h * w > INT_MAX:
            raise self.error("the top (%d x %d x %d x %d) is over Caffe's blob limit of %d values"
                             % (n, self.c0 + self.T * self.G, h, w, INT_MAX), ShapeError)
        out = _Conv(kernel, pad, stride)._out_shape((n, c, h, w))
        if out != (h, w):
            raise self.error("denseblock_param's convolution (filter %s, pad %s, stride %s) "
                             "turns %d x %d into %d x %d; a dense block must keep the size"
                             % ((kernel, pad, stride, h, w) + out), ShapeError)
        top[0].reshape((n, self.c0 + self.T * self.G, h, w))

    def forward_flops(self, bottom, top):
        """Multiply-adds (2 FLOPs each) of the convolutions, 2 per value of each BN and ReLU."""
        n, _, h, w = bottom[0].shape
        kh, kw = self.geometry[0]
        total = 0
        for i in range(self.T):
            ci = self.c0 + i * self.G
            width = 4 * self.G if self.bc else ci
            total += 2 * self.G * width * kh * kw + 2 * ci
            if self.bc:
                total += 2 * 4 * self.G * ci + 2 * 4 * self.G
        return total * n * h * w

    def _stat(self, group, i):
        return self.blobs[group * self.T + i].data.reshape(-1)

    def forward_cpu(self, bottom, top):
        train = self.phase == self._caffe_pb2.TRAIN
        X = top[0].data
        X[:, :self.c0] = bottom[0].data
        self.steps = []
        for i in range(self.T):
            ci = self.c0 + i * self.G
            step = {}
            b, step["bn"] = _bn_forward(X[:, :ci], self._stat(1, i), self._stat(2, i),
                                        self._stat(3, i), self._stat(4, i), train, self.fraction)
            r = step["relu"] = np.maximum(b, 0)
            if self.bc:
                step["conv1"] = _Conv((1, 1), (0, 0), (1, 1))
                u = step["conv1"].forward(r, self.blobs[5 * self.T + i].data)
                b2, step["bn2"] = _bn_forward(u, self._stat(6, i), self._stat(7, i),
                                              self._stat(8, i), self._stat(9, i), train,
                                              self.fraction)
                r = step["relu2"] = np.maximum(b2, 0)
            step["conv"] = _Conv(*self.geometry)
            c = step["conv"].forward(r, self.blobs[i].data)
            if train and self.drop:
                step["mask"] = (self.rng().random(c.shape) >= self.drop) / (1.0 - self.drop)
                c = c * step["mask"]
            X[:, ci:ci + self.G] = c
            self.steps.append(step)

    def backward_cpu(self, top, propagate_down, bottom):
        train = self.phase == self._caffe_pb2.TRAIN
        dX = top[0].diff.copy()
        for i in reversed(range(self.T)):
            ci, step = self.c0 + i * self.G, self.steps[i]
            dc = dX[:, ci:ci + self.G]
            if "mask" in step:
                dc = dc * step["mask"]
            dr = step["conv"].backward(dc, self.blobs[i].data, self.blobs[i].diff)
            if self.bc:
                db2 = dr * (step["relu2"] > 0)
                du = _bn_backward(db2, step["bn2"], self._stat(6, i), train,
                                  self.blobs[6 * self.T + i].diff.reshape(-1),
                                  self.blobs[7 * self.T + i].diff.reshape(-1))
                v = self.blobs[5 * self.T + i]
                dr = step["conv1"].backward(du, v.data, v.diff)
            db = dr * (step["relu"] > 0)
            dX[:, :ci] += _bn_backward(db, step["bn"], self._stat(1, i), train,
                                       self.blobs[self.T + i].diff.reshape(-1),
                                       self.blobs[2 * self.T + i].diff.reshape(-1))
        if propagate_down[0]:
            bottom[0].diff[...] = dX[:, :self.c0]
