"""CosineSimilarityBatch of the Histogram Loss code (madkn/HistogramLoss, caffe-master/src/caffe/
layers/cosine_similarity_batch_layer.cpp; also liu-xb/RAM and
jx-zhong-for-academic-purpose/fappy_metric_learning): the cosine similarities of all pairs of a
batch, with pair labels, as the input of a histogram loss.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer


@register_layer("CosineSimilarityBatch")
class CosineSimilarityBatchLayer(Layer):
    """For the pairs i < j of the N rows x_i (in (i, j) row-major order):

        s_ij = x_i . x_j / sqrt(|x_i|^2 |x_j|^2),   label_ij = pos_label if y_i = y_j else neg_label

    dL/dx_i = sum_{j != i} dL/ds_ij (x_j - s_ij |x_j| / |x_i| x_i) / (|x_i| |x_j|) (the gradient
    of s). prototxt: ``cosine_similarity_batch_param { pos_label: 1 neg_label: -1 }``, each cut
    to an integer (the fork stores them in ints). Bottoms: features N x C (x 1 x 1), labels N
    (x 1 x 1 x 1). Tops: similarities and pair labels, N (N - 1) / 2 x 1 x 1 x 1 each.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "cosine_similarity_batch_param")
        self.pos, self.neg = int(p.pos_label), int(p.neg_label)

    def reshape(self, bottom, top):
        x, lab = bottom
        if x.num_axes not in (2, 4) or (x.num_axes == 4 and x.shape[2:] != (1, 1)):
            raise self.error("features must be N x C (x 1 x 1), got %s" % (x.shape,), ShapeError)
        n = x.shape[0]
        if lab.count != n or lab.shape[0] != n:
            raise self.error("labels must be N (x 1 x 1 x 1) with N = %d, got %s"
                             % (n, lab.shape), ShapeError)
        for t in top:
            t.reshape(n * (n - 1) // 2, 1, 1, 1)
        self.iu = np.triu_indices(n, 1)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        xy = x @ x.T
        d = np.diag(xy)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = xy / np.sqrt(d[:, None] * d[None, :])
        lab = bottom[1].data.reshape(-1)
        top[0].data[...] = s[self.iu].reshape(top[0].shape)
        top[1].data[...] = np.where(lab[:, None] == lab[None, :], self.pos,
                                    self.neg)[self.iu].reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if not propagate_down[0]:
            return
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        xy = x @ x.T
        d = np.diag(xy)
        g = np.zeros((n, n))
        g[self.iu] = top[0].diff.reshape(-1)
        g = g + g.T
        with np.errstate(divide="ignore", invalid="ignore"):
            norm = 1 / np.sqrt(d[:, None] * d[None, :])
            w = g * norm                                  # dL/ds_ij / (|x_i| |x_j|)
            dx = w @ x - np.sum(w * xy / d[:, None], axis=1)[:, None] * x
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
