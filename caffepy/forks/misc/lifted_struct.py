"""The lifted structured embedding loss (Song et al., CVPR 2016) as BeSlower/caffe registers it
(src/caffe/layers/lifted_struct_similarity_softmax_layer.cpp; the same file in
JoeFannie/Label85, huangyangyu/SeqFace, lockeliu/source_code, minhpvo/Caffe).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, fork_param, register_layer


@register_layer("LiftedStructSimilaritySoftmaxLoss")
class LiftedStructSimilaritySoftmaxLossLayer(LossLayer):
    """Lifted structured loss over all pairs of a batch. With D_ab = sqrt(||x_a||^2 + ||x_b||^2 -
    2 x_a.x_b), the label y and margin m, for every positive pair i < j (y_i = y_j):

        J_ij = max(0, log(sum_{k: y_k != y_i} exp(m - D_ik) + sum_{k: y_k != y_j} exp(m - D_jk))
                      + D_ij)
        loss = sum J_ij^2 / (2 P),    P = the number of positive pairs

    (the log-sum-exp taken after subtracting its largest term). dL/dx as the fork: dJ^2/dD_ij =
    2 J_ij, dJ^2/dD_ik = -2 J_ij exp(m - D_ik) / sum exp, through dD_ab/dx_a = (x_a - x_b) / D_ab;
    times loss_weight / (2 P). A batch without a positive pair gives 0 / 0 (NaN), as the fork.
    prototxt: ``lifted_struct_sim_softmax_loss_param { margin: 1 }``. Bottoms: features N x C
    (x 1 x 1), labels N (x 1 x 1 x 1). Top: the loss.
    """

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "lifted_struct_sim_softmax_loss_param")
        self.margin = float(p.margin) if p is not None else 1.0

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        x, lab = bottom
        if x.num_axes not in (2, 4) or (x.num_axes == 4 and x.shape[2:] != (1, 1)):
            raise self.error("features must be N x C (x 1 x 1), got %s" % (x.shape,), ShapeError)
        if lab.count != x.shape[0]:
            raise self.error("%d labels for %d features" % (lab.count, x.shape[0]), ShapeError)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x = bottom[0].data.reshape(n, -1).astype(np.float64)
        lab = bottom[1].data.reshape(-1)
        sq = np.sum(x * x, axis=1)
        with np.errstate(invalid="ignore"):     # the unused diagonal may round below 0
            dist = np.sqrt(sq[:, None] + sq[None, :] - 2 * x @ x.T)
        same = lab[:, None] == lab[None, :]
        grad = np.zeros_like(x)
        loss, pairs = 0.0, 0
        for i in range(n):
            for j in range(i + 1, n):
                if not same[i, j]:
                    continue
                negs = [(a, k) for a in (i, j) for k in np.flatnonzero(~same[a])]
                terms = np.array([self.margin - dist[a, k] for a, k in negs])
                top_term = terms.max() if len(terms) else -np.inf
                e = np.exp(terms - top_term)
                j_ij = max(np.log(e.sum()) + top_term + dist[i, j], 0.0)
                loss += j_ij * j_ij
                pairs += 1
                s = 2 * j_ij / dist[i, j] * (x[i] - x[j])
                grad[i] += s
                grad[j] -= s
                for (a, k), ek in zip(negs, e):
                    s = -2 * j_ij * ek / e.sum() / dist[a, k] * (x[a] - x[k])
                    grad[a] += s
                    grad[k] -= s
        with np.errstate(invalid="ignore", divide="ignore"):
            top[0].data[...] = np.float64(loss) / pairs / 2
            self.grad = grad / np.float64(pairs) / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if propagate_down[0]:
            bottom[0].diff[...] = (self.grad * top[0].diff).reshape(bottom[0].shape)
