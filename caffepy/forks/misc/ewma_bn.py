"""The ``BN`` of ChenglongChen/caffe-windows and the forks that copied its ``BNParameter``
(``var_eps``, ``moving_average``, ``decay``): MhLiao/RRD, hongzhenwang/faster-rcnn-,
lilinhao/ShipDetection, Betterthinking/caffe@36001c2 and the CTPN forks (tianzhi0549/CTPN,
Cabchinoe/CTPN, aovoc/CTPN, which add ``axis``).

Read: ChenglongChen/caffe-windows ``src/caffe/layers/bn_layer.cpp`` / ``.cu`` and ``caffe.proto`` at
c72d55e (and 47cf28f, before it changed how ``decay`` weighs the history), the ``BNParameter`` of
tianzhi0549/CTPN (f77ec9e) and MhLiao/RRD (83a3332). The CTPN and RRD repositories declare the
message but ship no BN layer source; their layer is ChenglongChen's.

The layer keeps PSPNet's blob layout (scale, shift, history mean, history variance, each
(1, C, 1, 1)) and its batch-normalisation math, so it is :class:`~caffepy.layers.normalization.
BNLayer` with other fields and another TEST rule; it is chosen (``register_variant``) when
``bn_param`` sets ``var_eps``, ``moving_average``, ``decay`` or ``axis``, before SegNet's 2-blob BN
(which a ChenglongChen-style ``scale_filler`` / ``shift_filler`` would otherwise select).
"""
import logging

import numpy as np

from ... import fillers
from ...layers.base import fork_param, register_variant
from ...layers.normalization import BNLayer, _bcast, _freeze_param_specs, _ncs

_log = logging.getLogger(__name__)

#: The bn_param fields that only ChenglongChen's BN family declares.
EWMA_FIELDS = ("var_eps", "moving_average", "decay", "axis")


def _sets(p, name):
    try:
        return p.HasField(name)
    except ValueError:          # a schema without the field (a user's --proto)
        return False


def is_ewma_bn(lp):
    """Whether a ``BN`` layer is ChenglongChen's: its ``bn_param`` sets one of EWMA_FIELDS."""
    p = fork_param(lp, "bn_param")
    return p is not None and any(_sets(p, f) for f in EWMA_FIELDS)


@register_variant("BN", is_ewma_bn)
class EwmaBNLayer(BNLayer):
    """ChenglongChen/caffe-windows' BN: batch normalisation with exponentially weighted averages.

    y = scale (x - mu) / sqrt(var + var_eps) + shift, per channel over N, H and W.
    TRAIN: mu, var = the batch mean and biased variance;
           hist_mean <- (1 - decay) mu + decay hist_mean, the same for hist_var.
    TEST:  moving_average true: mu, var = hist_mean, hist_var;
           moving_average false: the batch statistics (the history is left alone).
    Gradients are PSPNet's BN's (the batch formula, in TEST too): d scale += sum(x_hat dy),
    d shift += sum(dy), dx = (g - mean(g) - x_hat mean(x_hat g)) / sqrt(var + var_eps), g = scale dy.

    prototxt: ``bn_param { scale_filler shift_filler (default constant 0) var_eps: 1e-10
    moving_average decay: 0.95 axis: 1 }``.
    ``decay`` is the weight of the history (c72d55e onwards; before it, and in forks copied
    earlier, the weight of the batch: CTPN's default 0.05 is that older reading of the same
    average). ``moving_average`` defaults to false in ChenglongChen's, CTPN's and
    Betterthinking's schemas and to true in RRD's, hongzhenwang's and lilinhao's: left unset it is
    false, and a TEST-phase layer says so in one WARNING (a TRAIN-phase one with a decay under 0.5,
    likely meant as the older batch weight, says how it is read). ``axis`` (CTPN's schema) must be 1.
    Blobs: bottom x (N, C, ...); top y (same shape). Params: scale, shift, history mean, history
    variance (both start at 0 and get lr_mult 0 / decay_mult 0, as the later forks force).
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "bn_param")
        self._warn_ambiguous(p)
        if float(p.axis) != 1:
            raise self.error("bn_param axis %g: only the channel axis 1 is computed" % p.axis)
        self.frozen = False
        self.eps = float(p.var_eps)
        self.momentum = float(p.decay)
        self.moving_average = bool(p.moving_average)
        if bottom[0].num_axes < 2:
            raise self.error("BN takes a bottom of 2 or more axes (N, C, ...), got shape %s"
                             % (bottom[0].shape,))
        self.channels = bottom[0].shape[1]
        if not self.blobs:
            self.blobs = [self.new_blob((1, self.channels, 1, 1)) for _ in range(4)]
            fillers.fill(self.blobs[0], p.scale_filler)
            fillers.fill(self.blobs[1], p.shift_filler)
        _freeze_param_specs(self, [2, 3])
        self.param_propagate_down = [True, True, False, False]

    def _warn_ambiguous(self, p):
        name, test = self.layer_param.name, self.phase == self._caffe_pb2.TEST
        if test and not _sets(p, "moving_average"):
            _log.warning("layer '%s' (BN): bn_param leaves moving_average unset; forks disagree "
                         "on its default (false: ChenglongChen/caffe-windows, CTPN; true: "
                         "MhLiao/RRD and others): computed as false, the batch statistics in "
                         "TEST", name)
        if not test and _sets(p, "decay") and p.decay < 0.5:
            _log.warning("layer '%s' (BN): decay %g is computed as the weight of the history "
                         "(ChenglongChen/caffe-windows c72d55e); forks copied earlier weigh the "
                         "batch by it", name, p.decay)

    @property
    def batch_stats_in_test(self):
        """Whether TEST normalises with the batch statistics (``moving_average`` false)."""
        return not self.moving_average

    def forward_cpu(self, bottom, top):
        x = _ncs(bottom[0].data, self.channels)
        scale, shift, mean, var = (b.data.reshape(-1) for b in self.blobs)
        if self.phase == self._caffe_pb2.TEST and self.moving_average:
            mu, v = mean.copy(), var.copy()
        else:
            mu = x.mean(axis=(0, 2))
            v = np.square(x - _bcast(mu)).mean(axis=(0, 2))
            if self.phase != self._caffe_pb2.TEST:
                mean[...] = (1 - self.momentum) * mu + self.momentum * mean
                var[...] = (1 - self.momentum) * v + self.momentum * var
        self.inv_std = (1.0 / np.sqrt(v + self.eps)).astype(self.dtype)
        self.x_norm = (x - _bcast(mu)) * _bcast(self.inv_std)
        _ncs(top[0].data, self.channels)[...] = self.x_norm * _bcast(scale) + _bcast(shift)
