"""Normalisation layers: BatchNorm, MVN, and the forks' BN (PSPNet) and Normalize (SSD).

Statistics are taken per channel (axis 1) over every other axis; the bottom is viewed as
(N, C, S) with S the product of the remaining axes. Scale and Bias live in ``scale.py``.
"""
import numpy as np

from .. import fillers
from ..errors import ShapeError
from ..math import kernels
from .base import Layer, fork_param, register_layer


def _ncs(arr, channels):
    return arr.reshape(arr.shape[0] if arr.ndim else 1, channels, -1)


def _bcast(v):
    return v.reshape(1, -1, 1)


def _freeze_param_specs(layer, indices):
    """Give param blobs ``indices`` lr_mult 0 and decay_mult 0 in the layer's ParamSpecs (adding
    specs as needed), so that the solver never updates them (Caffe's layers do the same)."""
    params = layer.layer_param.param
    while len(params) <= max(indices):
        params.add()
    for i in indices:
        params[i].lr_mult = 0.0
        params[i].decay_mult = 0.0


@register_layer("BatchNorm")
class BatchNormLayer(Layer):
    """Batch normalisation without the affine part (follow it with a Scale layer, bias_term: true).

    y = (x - mu) / sqrt(var + eps), per channel over N and the spatial axes.
    TRAIN (use_global_stats false): mu, var are the batch mean and (biased) variance, and the
    parameter blobs accumulate moving averages, with m = count / C:
        s <- maf * s + 1;  sum_mu <- maf * sum_mu + mu;  sum_var <- maf * sum_var + m/(m-1) * var
    TEST (use_global_stats true): mu = sum_mu / s, var = sum_var / s (both 0 when s == 0).
    Gradient, batch statistics: dx = (dy - mean(dy) - y * mean(dy * y)) / sqrt(var + eps);
    global statistics: dx = dy / sqrt(var + eps).

    prototxt: ``batch_norm_param { use_global_stats (default: phase == TEST)
    moving_average_fraction: 0.999 eps: 1e-5 }``.
    Blobs: bottom x (N, C, ...) (a 1-d bottom has C = 1); top y (same shape; in place allowed).
    Params: sum_mu (C,), sum_var (C,), s (1,); never learned: the layer gives them lr_mult 0
    (a ParamSpec with a nonzero lr_mult is an error, except the legacy 3-spec form, which is
    zeroed as Caffe's upgrade does) and their param_propagate_down is False.
    NVCaffe's ``scale_bias: true`` (or a ``scale_filler`` / ``bias_filler``) adds learned scale and
    bias blobs: y = scale * x_hat + bias: the variant in :mod:`caffepy.forks.nvcaffe.batchnorm`
    sets ``scale_bias`` and the three ``*_scale_bias`` steps.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1
    scale_bias = False

    def layer_setup(self, bottom, top):
        p = self.layer_param.batch_norm_param
        self.maf = p.moving_average_fraction
        self.eps = p.eps
        if p.HasField("use_global_stats"):
            self.use_global_stats = p.use_global_stats
        else:
            self.use_global_stats = self.phase == self._caffe_pb2.TEST
        self.channels = 1 if bottom[0].num_axes == 1 else bottom[0].shape[1]
        if not self.blobs:
            c = self.channels
            self.blobs = [self.new_blob((c,)), self.new_blob((c,)), self.new_blob((1,))]
        specs = self.layer_param.param
        if len(specs) == 3 or (self.scale_bias and specs):   # NVCaffe freezes the statistics
            _freeze_param_specs(self, range(3))
        for i, spec in enumerate(specs[:3]):
            if spec.lr_mult != 0:
                raise self.error("cannot configure batch normalization statistics as layer "
                                 "parameters (param %d has lr_mult %g)" % (i, spec.lr_mult))
        if self.scale_bias:
            self.setup_scale_bias(self.channels)
        while len(specs) < len(self.blobs):
            specs.add().lr_mult = 0.0
        self.param_propagate_down = [False] * 3 + [True] * (len(self.blobs) - 3)

    def reshape(self, bottom, top):
        if bottom[0].num_axes >= 2 and bottom[0].shape[1] != self.channels:
            raise self.error("bottom has %d channels, the layer was set up for %d"
                             % (bottom[0].shape[1], self.channels), ShapeError)
        if top[0] is not bottom[0]:
            top[0].reshape(bottom[0].shape)

    def _accumulate(self, mu, var, count):
        """The moving averages (class doc) take this batch's mu and var."""
        sum_mu, sum_var, s = (b.data.reshape(-1) for b in self.blobs[:3])
        m = count // self.channels
        s *= self.maf
        s += 1
        sum_mu *= self.maf
        sum_mu += mu
        sum_var *= self.maf
        sum_var += (m / (m - 1.0) if m > 1 else 1.0) * var

    def set_statistics(self, mean, var):
        """Store per-channel statistics as the global ones (scale factor 1): used to calibrate
        random weights (caffepy.zoo.run.forward_releasing)."""
        self.blobs[0].data.reshape(-1)[...] = mean
        self.blobs[1].data.reshape(-1)[...] = var
        self.blobs[2].data[...] = 1.0

    def x_norm_buffer(self, x):
        """The layer's array for the normalised input of x's shape and dtype (reused between
        forwards; the fused chain of caffepy.net.fusion writes it too)."""
        buf = getattr(self, "_x_norm_buf", None)
        if buf is None or buf.shape != x.shape or buf.dtype != x.dtype:
            buf = self._x_norm_buf = np.empty_like(x)
        return buf

    def _forward_batch_fused(self, x, y):
        """Batch statistics and normalisation in one kernel (numba): True when it ran."""
        k = kernels.get()
        if k is None or self.scale_bias or not (x.flags.c_contiguous and y.flags.c_contiguous):
            return False
        buf = self.x_norm_buffer(x)
        mu, var = np.empty(self.channels), np.empty(self.channels)
        self.std = np.empty(self.channels, self.dtype)
        k.batch_norm_train(x, float(self.eps), mu, var, self.std, buf, y)
        self.x_norm = buf
        self._accumulate(mu, var, x.size)
        return True

    def forward_cpu(self, bottom, top):
        x = _ncs(bottom[0].data, self.channels)
        y = _ncs(top[0].data, self.channels)
        sum_mu, sum_var, s = (b.data.reshape(-1) for b in self.blobs[:3])
        if self.use_global_stats:
            factor = 0.0 if s[0] == 0 else 1.0 / s[0]
            mu, var = factor * sum_mu, factor * sum_var
        else:
            if self._forward_batch_fused(x, y):
                return
            mu = x.mean(axis=(0, 2))
            var = np.square(x - _bcast(mu)).mean(axis=(0, 2))
            self._accumulate(mu, var, x.size)
        self.std = np.sqrt(var + self.eps).astype(self.dtype)
        if self.use_global_stats and not self.scale_bias:   # backward needs only std: no copy
            self.x_norm = None
            k = kernels.get()
            if k is not None and x.flags.c_contiguous and y.flags.c_contiguous:
                k.channel_norm(x, np.asarray(mu, self.dtype), self.std, y)
            else:
                np.subtract(x, _bcast(np.asarray(mu, self.dtype)), out=y)
                np.divide(y, _bcast(self.std), out=y)
            return
        self.x_norm = (x - _bcast(mu)) / _bcast(self.std)
        y[...] = self.x_norm
        if self.scale_bias:
            self.forward_scale_bias(y)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = _ncs(top[0].diff, self.channels)
        if self.scale_bias:
            dy = self.backward_scale_bias(dy, self.x_norm)
        if not propagate_down[0]:
            return
        if self.use_global_stats:
            dx = dy / _bcast(self.std)
        else:
            y = self.x_norm
            dx = _ncs(bottom[0].diff, self.channels)
            k = kernels.get()
            if k is not None and dy.flags.c_contiguous and dx.flags.c_contiguous \
                    and y.flags.c_contiguous:
                k.batch_norm_train_backward(dy, y, self.std, dx)
                return
            dx = (dy - dy.mean(axis=(0, 2), keepdims=True)
                  - y * (dy * y).mean(axis=(0, 2), keepdims=True)) / _bcast(self.std)
        _ncs(bottom[0].diff, self.channels)[...] = dx


@register_layer("BN")
class BNLayer(Layer):
    """PSPNet's BN (fork layer): batch normalisation with its own affine part and moving averages.

    y = slope * (x - mu) / sqrt(var + eps) + bias, per channel.
    TRAIN: mu, var = batch mean and biased variance; mean <- (1 - momentum) mu + momentum mean,
    var_blob <- (1 - momentum) var + momentum var_blob.
    TEST, or frozen: mu, var = the stored moving averages.
    Gradients (not frozen): d slope += sum(x_hat dy), d bias += sum(dy),
    dx = (dxh - mean(dxh) - x_hat mean(x_hat dxh)) / sqrt(var + eps) with dxh = slope dy (the fork
    uses this batch formula in TEST too). Frozen: dx = slope dy / sqrt(var + eps), no param
    gradients.

    prototxt: ``bn_param { slope_filler bias_filler (both default constant 0) momentum: 0.9
    eps: 1e-5 frozen: false }`` (fork fields; defaults apply when the schema lacks them).
    Blobs: bottom x (N, C, ...); top y (same shape). PSPNet's CPU layer takes at most 4 axes; the
    cuDNN engine of the 3-D forks' BN (mzolfaghari/ECO-efficient-video-understanding caffe_3d,
    spatial batch norm) normalises N x C x L x H x W the same way, over N and every trailing axis.
    Params: slope, bias, mean, var, each (1, C, 1, 1); mean and var (and, when frozen, slope and
    bias) get lr_mult 0 / decay_mult 0 in the layer's ParamSpecs. var starts at 1 when frozen,
    else 0.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "bn_param")
        self.frozen = bool(p.frozen) if p is not None else False
        self.momentum = p.momentum if p is not None else 0.9
        self.eps = p.eps if p is not None else 1e-5
        if bottom[0].num_axes < 2:
            raise self.error("BN takes a bottom of 2 or more axes (N, C, ...), got shape %s"
                             % (bottom[0].shape,), ShapeError)
        self.channels = bottom[0].shape[1]
        if not self.blobs:
            shape = (1, self.channels, 1, 1)
            self.blobs = [self.new_blob(shape) for _ in range(4)]
            default = self._caffe_pb2.FillerParameter()
            fillers.fill(self.blobs[0], p.slope_filler if p is not None else default)
            fillers.fill(self.blobs[1], p.bias_filler if p is not None else default)
            self.blobs[3].data[...] = 1.0 if self.frozen else 0.0
        _freeze_param_specs(self, [0, 1, 2, 3] if self.frozen else [2, 3])
        self.param_propagate_down = [not self.frozen] * 2 + [False, False]

    def set_statistics(self, mean, var):
        """Store per-channel statistics as the moving averages (see BatchNormLayer)."""
        self.blobs[2].data.reshape(-1)[...] = mean
        self.blobs[3].data.reshape(-1)[...] = var

    def reshape(self, bottom, top):
        if bottom[0].shape[1] != self.channels:
            raise self.error("bottom has %d channels, the layer was set up for %d"
                             % (bottom[0].shape[1], self.channels), ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = _ncs(bottom[0].data, self.channels)
        slope, bias, mean, var = (b.data.reshape(-1) for b in self.blobs)
        if self.frozen or self.phase == self._caffe_pb2.TEST:
            mu, v = mean.copy(), var.copy()
        else:
            mu = x.mean(axis=(0, 2))
            v = np.square(x - _bcast(mu)).mean(axis=(0, 2))
            mean[...] = (1 - self.momentum) * mu + self.momentum * mean
            var[...] = (1 - self.momentum) * v + self.momentum * var
        self.inv_std = (1.0 / np.sqrt(v + self.eps)).astype(self.dtype)
        self.x_norm = (x - _bcast(mu)) * _bcast(self.inv_std)
        _ncs(top[0].data, self.channels)[...] = self.x_norm * _bcast(slope) + _bcast(bias)

    def backward_cpu(self, top, propagate_down, bottom):
        dy = _ncs(top[0].diff, self.channels)
        slope = self.blobs[0].data.reshape(-1)
        if self.frozen:
            if propagate_down[0]:
                inv_std = 1.0 / np.sqrt(self.blobs[3].data.reshape(-1) + self.eps)
                _ncs(bottom[0].diff, self.channels)[...] = dy * _bcast(slope * inv_std)
            return
        if self.param_propagate_down[0]:
            self.blobs[0].diff.reshape(-1)[...] += (self.x_norm * dy).sum(axis=(0, 2))
        if self.param_propagate_down[1]:
            self.blobs[1].diff.reshape(-1)[...] += dy.sum(axis=(0, 2))
        if propagate_down[0]:
            dxh = dy * _bcast(slope)
            y = self.x_norm
            dx = (dxh - dxh.mean(axis=(0, 2), keepdims=True)
                  - y * (dxh * y).mean(axis=(0, 2), keepdims=True)) * _bcast(self.inv_std)
            _ncs(bottom[0].diff, self.channels)[...] = dx


@register_layer("MVN")
class MVNLayer(Layer):
    """Mean-variance normalisation of each (example, channel), or of each example.

    y = x - mean(x);  with normalize_variance: y = (x - mean(x)) / (std(x) + eps)
    (mean/std over H*W..., or over C*H*W... when across_channels; eps is added to the standard
    deviation, as in Caffe).
    dx = (dy - mean(dy) - y * mean(dy * y)) / (std + eps)   (normalize_variance; Caffe's formula)
    dx = dy - mean(dy)                                       (mean only)

    prototxt: ``mvn_param { normalize_variance: true across_channels: false eps: 1e-9 }``.
    Blobs: bottom x (N, C, ...); top y (same shape; in place allowed).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.mvn_param
        shape = bottom[0].shape
        rows = shape[0] if p.across_channels or len(shape) < 2 else shape[0] * shape[1]
        self.rows = rows
        if top[0] is not bottom[0]:
            top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        p = self.layer_param.mvn_param
        x = bottom[0].data.reshape(self.rows, -1)
        y = x - x.mean(axis=1, keepdims=True)
        if p.normalize_variance:
            self.std = (np.sqrt(np.square(y).mean(axis=1, keepdims=True)) + p.eps).astype(self.dtype)
            y = y / self.std
        self.y = y
        top[0].data.reshape(self.rows, -1)[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff.reshape(self.rows, -1)
        dx = dy - dy.mean(axis=1, keepdims=True)
        if self.layer_param.mvn_param.normalize_variance:
            dx = (dx - self.y * (dy * self.y).mean(axis=1, keepdims=True)) / self.std
        bottom[0].diff.reshape(self.rows, -1)[...] = dx


@register_layer("Normalize")
class NormalizeLayer(Layer):
    """SSD's Normalize (fork layer): L2 normalisation with a learned scale.

    across_spatial: n = sqrt(sum_{c,h,w} x^2 + eps) per example; else n = sqrt(sum_c x^2 + eps)
    per example and position. y = s * x / n, s one scalar (channel_shared) or one per channel.
    dx = s * (dy - x_hat * sum(x_hat dy)) / n with x_hat = x / n (sums over the axes of n);
    ds += sum(dy * x_hat) (over everything but the channel axis when not channel_shared).
    The dx formula is SSD's (CPU and GPU): exact when the scale is shared or equal across
    channels; with differing per-channel scales SSD applies s after the projection, which is not
    the true gradient, and caffepy reproduces SSD's numbers.

    prototxt: ``norm_param { across_spatial: true channel_shared: true scale_filler (default
    constant 1) eps: 1e-10 }`` (fork fields; defaults apply when the schema lacks them).
    ``fix_scale`` (AIROBOTAI/caffe-test@6061e84, nian-liu/DSCLRCN@fbbd35f, Betterthinking/caffe,
    jkokkin/UberNet; normalize_layer.cpp LayerSetUp) sets the layer's param_propagate_down to
    ``not fix_scale``; only a written value counts (those forks' defaults differ: true, false in
    DSCLRCN), unset keeps SSD's learned scale. In a net, the forks' net.cpp then sets it from the
    ParamSpec's lr_mult, as caffepy's net does, so there lr_mult alone decides.
    Blobs: bottom x (N, C, ...); top y (same shape). Param: scale, shape () when channel_shared,
    else (C,).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "norm_param")
        self.across_spatial = p.across_spatial if p is not None else True
        self.channel_shared = p.channel_shared if p is not None else True
        self.eps = p.eps if p is not None else 1e-10
        if bottom[0].num_axes < 2:
            raise self.error("bottom must have at least 2 axes, got shape %s" % (bottom[0].shape,),
                             ShapeError)
        channels = bottom[0].shape[1]
        if not self.blobs:
            self.blobs = [self.new_blob(() if self.channel_shared else (channels,))]
            if p is not None and p.HasField("scale_filler"):
                fillers.fill(self.blobs[0], p.scale_filler)
            else:
                self.blobs[0].data[...] = 1.0
        expected = 1 if self.channel_shared else channels
        if self.blobs[0].count != expected:
            raise self.error("scale has %d values; expected %d (channel_shared: %s)"
                             % (self.blobs[0].count, expected, self.channel_shared), ShapeError)
        fixed = (p is not None and "fix_scale" in p.DESCRIPTOR.fields_by_name
                 and p.HasField("fix_scale") and p.fix_scale)
        self.param_propagate_down = [not fixed]

    def reshape(self, bottom, top):
        self.channels = bottom[0].shape[1]
        if not self.channel_shared and self.blobs[0].count != self.channels:
            raise self.error("bottom has %d channels, the scale has %d"
                             % (self.channels, self.blobs[0].count), ShapeError)
        self.sum_axes = (1, 2) if self.across_spatial else (1,)
        top[0].reshape(bottom[0].shape)

    def _scale(self):
        s = self.blobs[0].data.reshape(-1)
        return s[0] if self.channel_shared else _bcast(s)

    def forward_cpu(self, bottom, top):
        x = _ncs(bottom[0].data, self.channels)
        self.norm = np.sqrt(np.square(x).sum(axis=self.sum_axes, keepdims=True) + self.eps)
        self.x_hat = x / self.norm
        _ncs(top[0].data, self.channels)[...] = self.x_hat * self._scale()

    def backward_cpu(self, top, propagate_down, bottom):
        dy = _ncs(top[0].diff, self.channels)
        if self.param_propagate_down[0]:
            prod = dy * self.x_hat
            grad = prod.sum() if self.channel_shared else prod.sum(axis=(0, 2))
            self.blobs[0].diff[...] += np.reshape(grad, self.blobs[0].shape)
        if propagate_down[0]:
            dot = (self.x_hat * dy).sum(axis=self.sum_axes, keepdims=True)
            dx = (dy - self.x_hat * dot) / self.norm * self._scale()
            _ncs(bottom[0].diff, self.channels)[...] = dx
