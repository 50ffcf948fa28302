"""iamyup/caffe_tdd (2014, trajectory-pooled deep descriptors; before type strings): its
TransformSoftmaxWithLoss (TRANSFORM_SOFTMAX_LOSS) and TransformAccuracy (TRANSFORM_ACCURACY, the
class of that name: the fork's type() says ACCURACY). Both map each label through the table of
``label_transform_param { label_transform_file }`` (whitespace-separated integers, entry i for
label i; a negative entry drops the item), whose distinct non-negative entries must number the
C scores per item. Its MultiLabelLoss, MultiLabelAccuracy and LabelTransform are in
``caffepy.forks.misc.early_2014``."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer

_FLT_MIN = np.finfo(np.float32).tiny


def _read_table(layer, channels):
    path = layer.layer_param.label_transform_param.label_transform_file
    if not path:
        raise layer.error("no label_transform_param.label_transform_file")
    try:
        with open(path) as f:
            table = np.array([int(t) for t in f.read().split()], dtype=np.int64)
    except (OSError, ValueError) as e:
        raise layer.error("cannot read label transform file %s: %s" % (path, e))
    targets = set(int(t) for t in table if t >= 0)
    if len(targets) != channels:
        raise layer.error("the label transform maps to %d labels, the scores have %d"
                          % (len(targets), channels))
    return table


def _mapped(layer, table, labels):
    lab = labels.astype(np.int64)
    bad = (lab < 0) | (lab >= table.size)
    if bad.any():
        raise layer.error("label %d has no entry in the %d-entry table" % (lab[bad][0], table.size))
    return table[lab]


def _check(layer, bottom):
    x = bottom[0]
    if x.num_axes < 2 or x.count != x.shape[0] * x.shape[1] or bottom[1].count != x.shape[0]:
        raise layer.error("expected scores N x C x 1 x 1 and N labels, got %s and %s"
                          % (x.shape, bottom[1].shape), ShapeError)


@register_layer("TransformSoftmaxWithLoss")
class TransformSoftmaxWithLossLayer(LossLayer):
    """Softmax loss against mapped labels: loss = -sum log max(p[m_n], FLT_MIN) / N over the items
    whose mapped label m_n is >= 0; dL/dx = (p - onehot(m_n)) / N for them, 0 for the others.
    Scores N x C x 1 x 1. Tops: loss [, the softmax]."""
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        self.table = _read_table(self, bottom[0].shape[1])

    def reshape(self, bottom, top):
        _check(self, bottom)
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, c).astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.p = e / e.sum(axis=1, keepdims=True)
        self.m = _mapped(self, self.table, bottom[1].data.reshape(n))
        on = np.nonzero(self.m >= 0)[0]
        top[0].data[...] = -np.log(np.maximum(self.p[on, self.m[on]], _FLT_MIN)).sum() / n
        if len(top) > 1:
            top[1].data[...] = self.p.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to label inputs")
        if propagate_down[0]:
            n = bottom[0].shape[0]
            g = self.p.copy()
            on = np.nonzero(self.m >= 0)[0]
            g[on, self.m[on]] -= 1
            g[self.m < 0] = 0
            bottom[0].diff[...] = (g * float(top[0].diff) / n).reshape(bottom[0].shape)


@register_layer("TransformAccuracy")
class TransformAccuracyLayer(Layer):
    """Top-k accuracy (``accuracy_param { top_k: 1 }``) against mapped labels: an item is right
    when its mapped label is among its k highest scores (ties: the higher index first, as the
    fork's pair sort); a negative mapped label is never right. Top 1 x 1 x 1 x 1. No backward."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.table = _read_table(self, bottom[0].shape[1])
        self.top_k = int(self.layer_param.accuracy_param.top_k)

    def reshape(self, bottom, top):
        _check(self, bottom)
        if not 0 < self.top_k <= bottom[0].shape[1]:
            raise self.error("top_k %d must be in [1, %d]" % (self.top_k, bottom[0].shape[1]))
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        s = bottom[0].data.reshape(n, c)
        m = _mapped(self, self.table, bottom[1].data.reshape(n))
        order = c - 1 - np.argsort(-s[:, ::-1], axis=1, kind="stable")[:, :self.top_k]
        top[0].data[...] = np.sum((order == m[:, None]).any(axis=1)) / n

    def backward_cpu(self, top, propagate_down, bottom):
        pass
