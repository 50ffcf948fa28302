"""Small layers of 2014 Caffe forks from before type strings (their V1 enum values map here through
:mod:`caffepy.proto.v1_fork_types`): ArthurWang123/caffe's ``InvertGradient`` (INVERT_GRADIENT),
``LabelToOnehot`` (LABEL_TO_ONEHOT), ``SoftmaxKLLoss`` (SOFTMAX_KL_LOSS) and ``SoftmaxEntropyLoss``
(SOFTMAX_ENTROPY_LOSS); YutingZhang/fgs-obj's ``NaN2Zero`` (NAN2ZERO); iamyup/caffe_tdd's
``MultiLabelLoss`` (MULTI_LABEL_LOSS), ``MultiLabelAccuracy`` (MULTI_LABEL_ACCURACY) and
``LabelTransform`` (LABEL_TRANSFORM); 7hil/caffe's ``Onehot`` (ONEHOT); Phoenix1327/caffe's
``SemiAccuracy`` (SEMI_ACCURACY)."""
import math

import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer

_LOG_THRESHOLD = 1e-20      # the fork's kLOG_THRESHOLD


def _softmax_rows(x):
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@register_layer("InvertGradient")
class InvertGradientLayer(NeuronLayer):
    """y = x; dL/dx = -c dL/dy (a gradient-reversal layer). c starts at ``initial_coeff``; after
    the i-th backward it is initial + (final - initial) (2 / (1 + exp(-gamma i)) - 1)
    (``coeff_schedule_param { gamma initial_coeff final_coeff }``, defaults 1)."""

    def layer_setup(self, bottom, top):
        p = self.layer_param.coeff_schedule_param
        self.gamma, self.initial, self.final = p.gamma, p.initial_coeff, p.final_coeff
        self.iter, self.coeff = 0, p.initial_coeff

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = -self.coeff * top[0].diff
        self.iter += 1
        self.coeff = self.initial + (self.final - self.initial) * (
            2.0 / (1.0 + math.exp(-self.gamma * self.iter)) - 1.0)


@register_layer("LabelToOnehot")
class LabelToOnehotLayer(Layer):
    """Labels (one per item, N x ...) to one-hot rows N x K x 1 x 1, K =
    ``inner_product_param { num_output }``; a label outside [0, K) is an error. No backward."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        self.k = int(self.layer_param.inner_product_param.num_output)
        if self.k < 1:
            raise self.error("inner_product_param.num_output must be positive")
        top[0].reshape((bottom[0].shape[0], self.k, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        labels = bottom[0].data.reshape(n, -1)[:, 0].astype(np.int64)
        bad = (labels < 0) | (labels >= self.k)
        if bad.any():
            raise self.error("label %d outside [0, %d]" % (labels[bad][0], self.k - 1))
        top[0].data[...] = 0
        top[0].data.reshape(n, self.k)[np.arange(n), labels] = 1

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("NaN2Zero")
class NaN2ZeroLayer(NeuronLayer):
    """y = x with NaN set to 0; dL/dx = dL/dy where neither it nor x is NaN, else 0. (The fork's
    forward reads its top, so it works in place, as its nets use it.)"""

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = np.where(np.isnan(x), 0, x)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff
            ok = ~np.isnan(dy) & ~np.isnan(bottom[0].data)
            bottom[0].diff[...] = np.where(ok, dy, 0)


@register_layer("SoftmaxKLLoss")
class SoftmaxKLLossLayer(LossLayer):
    """KL divergence of two softmaxes: p = softmax(x1), q = softmax(x2) over the channels of
    N x C (x 1 x 1) scores; loss = coeff / N sum p (log p - log q) (logs of values clamped at
    1e-20; coeff = ``loss_param { coeff: 1 }``). dL/dx1 = coeff / N p (L - sum_c p L),
    L = log p - log q; dL/dx2 = coeff / N (q - p). Both bottoms get a gradient."""

    def layer_setup(self, bottom, top):
        self.coeff = float(self.layer_param.loss_param.coeff)

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape or bottom[0].count != bottom[0].shape[0] * (
                bottom[0].shape[1] if bottom[0].num_axes > 1 else 1):
            raise self.error("expected two N x C (x 1 x 1) score blobs, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        self.p, self.q = _softmax_rows(bottom[0].data), _softmax_rows(bottom[1].data)
        self.log = np.log(np.maximum(self.p, _LOG_THRESHOLD)) - \
            np.log(np.maximum(self.q, _LOG_THRESHOLD))
        top[0].data[...] = np.sum(self.log * self.p) * self.coeff / self.p.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        s = float(top[0].diff) * self.coeff / self.p.shape[0]
        pl = self.p * self.log
        if propagate_down[0]:
            g = pl - pl.sum(axis=1, keepdims=True) * self.p
            bottom[0].diff[...] = (s * g).reshape(bottom[0].shape)
        if propagate_down[1]:
            bottom[1].diff[...] = (s * (self.q - self.p)).reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return True


@register_layer("SoftmaxEntropyLoss")
class SoftmaxEntropyLossLayer(LossLayer):
    """Entropy of a softmax: p = softmax(x) over the channels of N x C (x 1 x 1) scores;
    loss = -m - coeff / N sum p log p (log clamped at 1e-20; coeff = ``loss_param { coeff }``;
    m = coeff log C when coeff < 0, else 0, so the loss is never negative).
    dL/dx = -coeff / N p (log p - sum_c p log p). One bottom."""
    exact_num_bottom_blobs = 1

    def layer_setup(self, bottom, top):
        self.coeff = float(self.layer_param.loss_param.coeff)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 2 or x.count != x.shape[0] * x.shape[1]:
            raise self.error("expected N x C (x 1 x 1) scores, got %s" % (x.shape,), ShapeError)
        self.min_val = math.log(x.shape[1]) * self.coeff if self.coeff < 0 else 0.0
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        self.p = _softmax_rows(bottom[0].data)
        self.log = np.log(np.maximum(self.p, _LOG_THRESHOLD))
        top[0].data[...] = -self.min_val - np.sum(self.log * self.p) * self.coeff / self.p.shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            pl = self.p * self.log
            g = pl - pl.sum(axis=1, keepdims=True) * self.p
            s = -float(top[0].diff) * self.coeff / self.p.shape[0]
            bottom[0].diff[...] = (s * g).reshape(bottom[0].shape)


@register_layer("MultiLabelLoss")
class MultiLabelLossLayer(LossLayer):
    """Sigmoid cross-entropy with +-1 / 0 targets: a target > 0 is positive, < 0 negative, 0 is
    ignored; loss = sum over the counted elements of -log(sigmoid(x)) (positive) or
    -log(1 - sigmoid(x)) (negative), divided by N. dL/dx = (sigmoid(x) - [t > 0]) / N there, 0
    elsewhere. Bottoms: scores and targets of one count. Tops: loss [, sigmoid(x)]."""
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        if bottom[0].count != bottom[1].count:
            raise self.error("scores %s and targets %s must have one count"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(-1).astype(np.float64)
        t = bottom[1].data.reshape(-1)
        self.on, self.pos = t != 0, t > 0
        self.sig = 1.0 / (1.0 + np.exp(-x))
        ge = x >= 0
        terms = x * (self.pos.astype(np.float64) - ge) - np.log1p(np.exp(x - 2 * x * ge))
        top[0].data[...] = -np.sum(terms[self.on]) / bottom[0].shape[0]
        if len(top) > 1:
            top[1].data[...] = self.sig.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            g = np.where(self.on, self.sig - self.pos, 0.0)
            g *= float(top[0].diff) / bottom[0].shape[0]
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("MultiLabelAccuracy")
class MultiLabelAccuracyLayer(Layer):
    """Per label the share of right answers: element i of the scores (flat order) belongs to label
    i mod C (C the channels); it is right when its target is > 0 and its score > 0, or its target
    < 0 and its score < 0 (a target of 0 counts nowhere). Top 1 x C x 1 x 1: the right answers of
    each label over N. No backward."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape or bottom[0].num_axes < 2:
            raise self.error("scores %s and targets %s must have one N x C ... shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape((1, bottom[0].shape[1], 1, 1))

    def forward_cpu(self, bottom, top):
        c = bottom[0].shape[1]
        x = bottom[0].data.reshape(-1)
        lab = bottom[1].data.reshape(-1).astype(np.int64)
        right = ((lab > 0) & (x > 0)) | ((lab < 0) & (x < 0))
        per = np.bincount(np.arange(x.size) % c, weights=right.astype(np.float64), minlength=c)
        top[0].data[...] = (per / bottom[0].shape[0]).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("Onehot")
class OnehotLayer(Layer):
    """Indices N x 1 x 1 x 1 to one-hot rows N x dim x 1 x 1 (``onehot_param { dim
    invert_coding: false }``; invert_coding swaps the 1 and the 0s). An index outside [0, dim) is
    an error. No backward."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.onehot_param
        self.dim, self.invert = int(p.dim), bool(p.invert_coding)
        if self.dim < 1:
            raise self.error("onehot_param.dim must be positive")
        if bottom[0].count != bottom[0].shape[0]:
            raise self.error("bottom must be N x 1 x 1 x 1, got %s" % (bottom[0].shape,),
                             ShapeError)
        top[0].reshape((bottom[0].shape[0], self.dim, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        idx = bottom[0].data.reshape(n).astype(np.int64)
        bad = (idx < 0) | (idx >= self.dim)
        if bad.any():
            raise self.error("wrong index %d from sample %d" % (idx[bad][0], np.argmax(bad)))
        out = np.zeros((n, self.dim)) + (1.0 if self.invert else 0.0)
        out[np.arange(n), idx] = 0.0 if self.invert else 1.0
        top[0].data[...] = out.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("SemiAccuracy")
class SemiAccuracyLayer(Layer):
    """Accuracy of a binary score against the fork's bag labels (-1 positive, -2 negative,
    0, 1, ... weakly labelled bags, never right): item n's first score > 0 predicts -1, else -2;
    the share of items whose label equals the prediction. Labels N x 1 x 1 x 1. No backward."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[1].count != bottom[0].shape[0] or bottom[1].shape[0] != bottom[0].shape[0]:
            raise self.error("labels must be N x 1 x 1 x 1, got %s" % (bottom[1].shape,),
                             ShapeError)
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        first = bottom[0].data.reshape(-1)[:n]   # the fork reads bottom_data[i], i < N
        pred = np.where(first > 0, -1.0, -2.0)
        top[0].data[...] = np.sum(pred == bottom[1].data.reshape(n)) / n

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("LabelTransform")
class LabelTransformLayer(Layer):
    """Labels through a table: ``label_transform_param { label_transform_file }`` holds integers
    (whitespace-separated; entry i is label i's new label, negative ones included); item n's
    label l (its first value) becomes table[l]. Top N x 1 x 1 x 1. No backward. (The fork reads
    the table in a ``LayerSetup`` that Caffe never calls -- a typo of LayerSetUp -- so its own
    layer indexes an empty table; this is the layer its code describes.)"""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        path = self.layer_param.label_transform_param.label_transform_file
        if not path:
            raise self.error("no label_transform_param.label_transform_file")
        try:
            with open(path) as f:
                self.table = np.array([int(t) for t in f.read().split()], dtype=np.int64)
        except (OSError, ValueError) as e:
            raise self.error("cannot read label transform file %s: %s" % (path, e))

    def reshape(self, bottom, top):
        top[0].reshape((bottom[0].shape[0], 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        lab = bottom[0].data.reshape(n, -1)[:, 0].astype(np.int64)
        bad = (lab < 0) | (lab >= self.table.size)
        if bad.any():
            raise self.error("label %d has no entry in the %d-entry table"
                             % (lab[bad][0], self.table.size))
        top[0].data[...] = self.table[lab].reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            raise self.error("cannot backpropagate to label inputs")
