"""JoeFannie/Label85's (caffe-master) TriVerLoss, its V1 type TRIVER_LOSS: a triplet
verification loss with a margin taken from the batch. (Its TRIPLET_LOSS is happynear's
TripletLoss, :mod:`caffepy.forks.face.happynear`.)
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import LossLayer, register_layer


@register_layer("TriVerLoss")
class TriVerLossLayer(LossLayer):
    """Triplet verification loss (JoeFannie/Label85, caffe-master/src/caffe/layers/
    triver_loss_layer.cpp). The batch of 3n feature rows holds anchors, then positives, then
    negatives (labels: positive = anchor's, negative != anchor's, checked). With
    ap_i = ||a_i - p_i||^2, an_i = ||a_i - n_i||^2 and M = k m0:

        loss = sum_i (ap_i + max(M - an_i, 0)) / (2 * 3n)
        dL/da_i = s (n_i - p_i) where M - an_i > 1e-9, else s (a_i - p_i);  dL/dp_i = s (p_i - a_i)
        dL/dn_i = s (a_i - n_i) where M - an_i > 1e-9, else 0;   s = lamda g / (3n)

    (lamda times the loss's derivative, M held fixed). m0 is the fork's threshold search as it
    runs: ap of the first triplet whose an exceeds its ap, else ap of the first triplet.
    prototxt: ``triver_loss_param { k: 1 lamda: 0.0002 }``. Bottoms: features 3n x C (x 1 x 1),
    labels 3n. Top: loss.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        n3 = bottom[0].shape[0]
        if n3 % 3 or bottom[0].count_range(2) != 1 or bottom[1].count != n3:
            raise self.error("features must be 3n x C x 1 x 1 with 3n labels, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)

    def forward_cpu(self, bottom, top):
        n3 = bottom[0].shape[0]
        n = n3 // 3
        f = bottom[0].data.reshape(n3, -1)
        lab = bottom[1].data.reshape(-1)
        if np.any(lab[:n] != lab[n:2 * n]) or np.any(lab[:n] == lab[2 * n:]):
            raise self.error("labels: positives must share the anchor's label, negatives not")
        a, p, ng = f[:n], f[n:2 * n], f[2 * n:]
        ap, an = ((a - p) ** 2).sum(1), ((a - ng) ** 2).sum(1)
        first = np.nonzero(an > ap)[0]
        m = self.layer_param.triver_loss_param.k * ap[first[0] if first.size else 0]
        hinge = np.maximum(m - an, 0)
        self.active = (hinge > 1e-9)[:, None]
        self.rows = (a, p, ng)
        top[0].data[...] = (ap + hinge).sum() / n3 / 2

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the labels")
        if propagate_down[0]:
            a, p, ng = self.rows
            s = self.layer_param.triver_loss_param.lamda * float(top[0].diff) / (3 * len(a))
            da = np.where(self.active, ng - p, a - p)
            dn = np.where(self.active, a - ng, 0)
            g = np.concatenate([da, p - a, dn]) * s
            bottom[0].diff[...] = g.reshape(bottom[0].shape)
