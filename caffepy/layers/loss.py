"""Classification losses: SoftmaxWithLoss, SigmoidCrossEntropyLoss, InfogainLoss,
MultinomialLogisticLoss, HingeLoss (regression and metric losses live in ``loss_regression.py``).

Every loss writes a scalar top (default loss_weight 1); backward scales the gradient by the scalar
top diff, which holds the loss weight. Labels are read as ``int`` (truncated, as Caffe's
``static_cast<int>``) and get no gradient.
"""
import os

import numpy as np

from ..math import cpu, kernels
from .base import LossLayer, register_layer
from .softmax import prediction_label_view, softmax

FLT_MIN = float(np.finfo(np.float32).tiny)   # SoftmaxWithLoss clamps probabilities at FLT_MIN
LOG_THRESHOLD = 1e-20                        # Caffe's kLOG_THRESHOLD (Infogain, MultinomialLogistic)


def normalization_mode(loss_param, legacy_default=None):
    """The LossParameter normalization mode, honouring the legacy ``normalize`` bool
    (true -> VALID, false -> BATCH_SIZE) when ``normalization`` is not given."""
    modes = type(loss_param)
    if not loss_param.HasField("normalization") and loss_param.HasField("normalize"):
        return modes.VALID if loss_param.normalize else modes.BATCH_SIZE
    if not loss_param.HasField("normalization") and legacy_default is not None:
        return legacy_default
    return loss_param.normalization


def normalizer(mode, loss_param, outer, inner, valid_count):
    """Caffe's get_normalizer: FULL outer*inner, VALID valid_count, BATCH_SIZE outer, NONE 1;
    never below 1 (a batch with every label ignored gives loss 0, not NaN)."""
    modes = type(loss_param)
    value = {modes.FULL: outer * inner, modes.VALID: valid_count,
             modes.BATCH_SIZE: outer, modes.NONE: 1}[mode]
    return float(max(1, value))


def ignore_label_of(layer_param):
    lp = layer_param.loss_param
    return lp.ignore_label if lp.HasField("ignore_label") else None


def reject_label_gradient(layer, propagate_down, what=("label",)):
    """Caffe aborts when asked for the gradient of a label-like bottom (index 1, 2, ...)."""
    for i, name in enumerate(what, start=1):
        if i < len(propagate_down) and propagate_down[i]:
            raise layer.error("cannot backpropagate to %s inputs (bottom %d)" % (name, i))


def class_labels(layer, blob, shape, num_classes, ignore):
    """Integer labels reshaped to ``shape`` and a mask of the ones that count (not ignored);
    a label outside [0, num_classes) is an error."""
    labels = blob.data.reshape(shape).astype(np.int64)
    valid = labels != ignore if ignore is not None else np.ones(labels.shape, dtype=bool)
    bad = valid & ((labels < 0) | (labels >= num_classes))
    if bad.any():
        raise layer.error("label %d out of range [0, %d)" % (labels[bad][0], num_classes))
    return np.where(valid, labels, 0), valid


class _SoftmaxLossBase(LossLayer):
    """Shared by SoftmaxWithLoss and InfogainLoss: softmax over ``axis``, labels of count
    outer * inner, optional second top with the probabilities."""
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def _axis_param(self):
        raise NotImplementedError

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        self.axis, self.outer, self.channels, self.inner = prediction_label_view(
            self, bottom, self._axis_param())
        if len(top) >= 2:
            top[1].reshape(bottom[0].shape)

    def _softmax(self, bottom, top):
        self.prob = softmax(bottom[0].data.reshape(self.outer, self.channels, self.inner), axis=1)
        if len(top) >= 2:
            top[1].data[...] = self.prob.reshape(top[1].shape)
        self.labels, self.valid = class_labels(self, bottom[1], (self.outer, self.inner),
                                               self.channels, self.ignore_label)

    def _normalizer(self, valid_count):
        return normalizer(self.normalization, self.layer_param.loss_param, self.outer, self.inner,
                          valid_count)

    def _label_prob(self):
        """p[label] at each (outer, inner) position: outer x inner."""
        return np.take_along_axis(self.prob, self.labels[:, None, :], axis=1)[:, 0, :]

    def _prob_minus_onehot(self):
        """p - onehot(label) (outer x C x inner): SoftmaxWithLoss's gradient before scaling."""
        d = self.prob.copy()
        np.put_along_axis(d, self.labels[:, None, :],
                          np.take_along_axis(d, self.labels[:, None, :], axis=1) - 1, axis=1)
        return d


@register_layer("SoftmaxWithLoss")
class SoftmaxWithLossLayer(_SoftmaxLossBase):
    """Softmax followed by the multinomial logistic loss, in one numerically stable layer.

    p = softmax(x) over ``axis``; loss = -sum_{i valid} log(max(p[i, label_i], FLT_MIN)) / normalizer
    dL/dx = (p - onehot(label)) * top_diff / normalizer  (0 at ignored positions)

    prototxt: ``softmax_param { axis: 1 }``; ``loss_param { ignore_label normalization: VALID
    normalize }`` (legacy ``normalize: true`` = VALID, ``false`` = BATCH_SIZE, used only when
    ``normalization`` is absent). Normalizers: VALID = number of non-ignored labels, BATCH_SIZE =
    outer, FULL = outer * inner, NONE = 1 (each at least 1).
    Blobs: bottom x (..., C at axis, ...), bottom label (count outer*inner, values in [0, C));
    top loss (scalar); optional top 2 = the probabilities p (shape of x).
    """

    def layer_setup(self, bottom, top):
        self.ignore_label = ignore_label_of(self.layer_param)
        self.normalization = normalization_mode(self.layer_param.loss_param)

    def _axis_param(self):
        return self.layer_param.softmax_param.axis

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        p = self._label_prob()
        loss = -np.sum(np.log(np.maximum(p, FLT_MIN))[self.valid])
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = loss / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        d = self._prob_minus_onehot()
        d *= self.valid[:, None, :]
        d *= float(top[0].diff) / self.norm
        bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("InfogainLoss")
class InfogainLossLayer(_SoftmaxLossBase):
    """Infogain loss (BVLC master: softmax inside): a multinomial logistic loss weighted by an
    infogain matrix H (C x C).

    p = softmax(x) over ``axis``;
    loss = -sum_{i valid} sum_l H[label_i, l] * log(max(p[i, l], 1e-20)) / normalizer
    dL/dx[i, l] = (p[i, l] * sum_m H[label_i, m] - H[label_i, l]) * top_diff / normalizer

    prototxt: ``infogain_loss_param { source: "H.binaryproto" axis: 1 }`` (source is read when there
    is no third bottom); ``loss_param { ignore_label normalization: VALID }`` (the legacy
    ``normalize`` is rejected, as in Caffe).
    Blobs: bottom x, bottom label (count outer*inner), optional bottom H (C*C values); top loss
    (scalar); optional top 2 = the probabilities.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 3

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        if lp.HasField("normalize"):
            raise self.error('loss_param.normalize is deprecated for InfogainLoss; use "normalization"')
        self.ignore_label = ignore_label_of(self.layer_param)
        self.normalization = lp.normalization
        self.infogain = None
        if len(bottom) < 3:
            self.infogain = self._read_source()

    def _absent_in_shapes_only(self, source):
        """Whether a build for shapes only (caffepy summary) goes on without the matrix file: it
        is absent (a data file the repository does not ship, like its LMDBs) and only its values,
        not the top's shape, depend on it."""
        from .base import _shapes_only
        return _shapes_only[0] and not os.path.exists(source)

    def _read_source(self):
        from google.protobuf.message import DecodeError

        from ..blob import Blob
        from ..proto import caffe_pb2
        source = self.layer_param.infogain_loss_param.source
        if not self.layer_param.infogain_loss_param.HasField("source"):
            raise self.error("the infogain matrix source must be specified "
                             "(infogain_loss_param.source) when there is no third bottom")
        bp = caffe_pb2.BlobProto()
        if self._absent_in_shapes_only(source):
            return None
        try:
            with open(source, "rb") as f:
                bp.ParseFromString(f.read())
        except (IOError, OSError) as e:
            raise self.error("cannot read infogain matrix '%s': %s" % (source, e))
        except DecodeError as e:
            raise self.error("'%s' is not a BlobProto (.binaryproto): %s" % (source, e))
        blob = Blob((), dtype=self.dtype)
        blob.from_proto(bp)
        return blob

    def _axis_param(self):
        return self.layer_param.infogain_loss_param.axis

    def reshape(self, bottom, top):
        _SoftmaxLossBase.reshape(self, bottom, top)
        h = bottom[2] if len(bottom) >= 3 else self.infogain
        if h is not None and h.count != self.channels * self.channels:
            raise self.needs("the infogain matrix H must be %dx%d (%d values), got shape %s"
                             % (self.channels, self.channels, self.channels ** 2, h.shape),
                             [(2, (1, 1, self.channels, self.channels), None)]
                             if len(bottom) >= 3 else [])

    def _matrix(self, bottom):
        h = bottom[2] if len(bottom) >= 3 else self.infogain
        return h.data.reshape(self.channels, self.channels)

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        rows = self._matrix(bottom)[self.labels]                       # (outer, inner, C)
        logp = np.log(np.maximum(self.prob, LOG_THRESHOLD)).transpose(0, 2, 1)
        loss = -np.sum((rows * logp)[self.valid])
        top[0].data[...] = loss / self._normalizer(int(self.valid.sum()))

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down, ("label", "infogain"))
        if not propagate_down[0]:
            return
        h = self._matrix(bottom)
        rows = h[self.labels].transpose(0, 2, 1)                       # (outer, C, inner)
        row_sums = h.sum(axis=1)[self.labels][:, None, :]
        d = (self.prob * row_sums - rows) * self.valid[:, None, :]
        d *= float(top[0].diff) / self._normalizer(int(self.valid.sum()))
        bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("MultinomialLogisticLoss")
class MultinomialLogisticLossLayer(LossLayer):
    """Negative log likelihood of probabilities (the bottom already holds p, e.g. a Softmax top).

    loss = -sum_n log(max(p[n, label_n], 1e-20)) / N
    dL/dp[n, label_n] = -top_diff / (N * max(p[n, label_n], 1e-20)); 0 elsewhere.

    prototxt: no parameters. Blobs: bottom p (N, C, ...) flattened to (N, C*...), bottom label (N
    values); top loss (scalar).
    """

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        if bottom[1].count != bottom[0].shape[0]:
            raise self.needs("label must hold one value per example (%d), got shape %s"
                             % (bottom[0].shape[0], bottom[1].shape),
                             [(1, bottom[0].shape[:1], None)])

    def _picked(self, bottom):
        n = bottom[0].shape[0]
        p = bottom[0].data.reshape(n, -1)
        labels, _ = class_labels(self, bottom[1], (n,), p.shape[1], None)
        return p, labels, np.maximum(p[np.arange(n), labels], LOG_THRESHOLD)

    def forward_cpu(self, bottom, top):
        p, _, picked = self._picked(bottom)
        top[0].data[...] = -np.sum(np.log(picked)) / p.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        p, labels, picked = self._picked(bottom)
        d = np.zeros_like(p)
        d[np.arange(p.shape[0]), labels] = -float(top[0].diff) / p.shape[0] / picked
        bottom[0].diff[...] = d.reshape(bottom[0].shape)


@register_layer("SigmoidCrossEntropyLoss")
class SigmoidCrossEntropyLossLayer(LossLayer):
    """Cross entropy of sigmoid(x) against targets t in [0, 1], computed stably from the logits.

    loss = -sum_{i valid} [x_i * (t_i - (x_i >= 0)) - log(1 + exp(x_i - 2 x_i (x_i >= 0)))] / normalizer
    dL/dx_i = (sigmoid(x_i) - t_i) * top_diff / normalizer  (0 where t_i == ignore_label)

    prototxt: ``loss_param { ignore_label normalization }``; the default normalization here is
    BATCH_SIZE (N); legacy ``normalize: true`` = VALID, ``false`` = BATCH_SIZE.
    Blobs: bottom x (N, ...), bottom t (same count); top loss (scalar).
    """

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        self.ignore_label = ignore_label_of(self.layer_param)
        self.normalization = normalization_mode(lp, legacy_default=type(lp).BATCH_SIZE)

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        if bottom[0].count != bottom[1].count:
            raise self.shape_mismatch("inputs must have the same count (%s vs %s)"
                                      % (bottom[0].shape, bottom[1].shape), 1, 0, bottom)

    def _valid(self, t):
        if self.ignore_label is None:
            return np.ones(t.shape, dtype=bool)
        return t.astype(np.int64) != self.ignore_label

    def forward_cpu(self, bottom, top):
        x, t = bottom[0].data, bottom[1].data
        lp = self.layer_param.loss_param
        outer, inner = x.shape[0], x.size // max(x.shape[0], 1)
        flat = kernels.flat_views(x, t)
        if flat is not None:
            ignore = self.ignore_label
            loss, valid = kernels.get().sigmoid_ce_loss_c(
                flat[0], flat[1], ignore is not None, 0 if ignore is None else ignore,
                x.dtype.type(1))
            self.norm = normalizer(self.normalization, lp, outer, inner, valid)
            top[0].data[...] = loss / x.dtype.type(self.norm)
            return
        valid = self._valid(t)
        pos = x >= 0
        terms = x * (t - pos) - np.log1p(np.exp(-np.abs(x)))
        self.norm = normalizer(self.normalization, lp, outer, inner, int(valid.sum()))
        top[0].data[...] = -np.sum(terms[valid]) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        """Caffe's: sigmoid(x) - t, 0 where t is ignored, times top_diff / normalizer (the
        factor rounded to the blob's type first)."""
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        x, t = bottom[0].data, bottom[1].data
        flat = kernels.flat_views(x, t, bottom[0].diff)
        if flat is not None:
            dt = x.dtype.type
            d = np.empty_like(flat[0])
            kernels.get().sigmoid_c(flat[0], d)
            d -= flat[1]
            if self.ignore_label is not None:
                d[~self._valid(flat[1])] = 0
            d *= dt(top[0].diff.reshape(-1)[0]) / dt(self.norm)
            flat[2][...] = d
            return
        sig = 0.5 * (1.0 + np.tanh(0.5 * x))
        d = (sig - t) * self._valid(t)
        bottom[0].diff[...] = d * (float(top[0].diff) / self.norm)


@register_layer("HingeLoss")
class HingeLossLayer(LossLayer):
    """One-vs-all hinge loss for class scores x (N, C*...) and labels l.

    m[n, k] = max(0, 1 - x[n, k]) if k == l_n else max(0, 1 + x[n, k])
    L1: loss = sum m / N;  L2: loss = sum m^2 / N
    dL/dx[n, k] = s * top_diff / N * (L1: sign(m) ; L2: 2 m),  s = -1 if k == l_n else +1

    prototxt: ``hinge_loss_param { norm: L1 }`` (L1 | L2).
    Blobs: bottom x (N, ...), bottom label (N values); top loss (scalar).
    """

    def reshape(self, bottom, top):
        LossLayer.reshape(self, bottom, top)
        if bottom[1].count < bottom[0].shape[0]:
            raise self.needs("label must hold one value per example (%d), got shape %s"
                             % (bottom[0].shape[0], bottom[1].shape),
                             [(1, bottom[0].shape[:1], None)])

    def _margins(self, bottom):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1)
        labels = bottom[1].data.reshape(-1)[:n].astype(np.int64)
        if ((labels < 0) | (labels >= x.shape[1])).any():
            raise self.error("label out of range [0, %d): %s" % (x.shape[1], labels))
        sign = np.ones_like(x)
        sign[np.arange(n), labels] = -1
        return np.maximum(0, 1 + sign * x), sign, n

    def forward_cpu(self, bottom, top):
        m, _, n = self._margins(bottom)
        l2 = self.layer_param.hinge_loss_param.norm == self._caffe_pb2.HingeLossParameter.L2
        top[0].data[...] = (np.sum(m * m) if l2 else np.sum(m)) / n

    def backward_cpu(self, top, propagate_down, bottom):
        reject_label_gradient(self, propagate_down)
        if not propagate_down[0]:
            return
        m, sign, n = self._margins(bottom)
        t = m.dtype.type
        v = sign * m                  # Caffe's margins with the label's negated (-0 where 0)
        lw = t(top[0].diff.reshape(-1)[0])
        if self.layer_param.hinge_loss_param.norm == self._caffe_pb2.HingeLossParameter.L2:
            d = v * (lw * t(2) / t(n))
        else:
            d = cpu.caffe_sign(v) * (lw / t(n))
        bottom[0].diff[...] = d.reshape(bottom[0].shape)
