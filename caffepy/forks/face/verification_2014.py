"""AlfredXiangWu/caffe (2014, face verification; before type strings): its V1 types DISTANCE
(``Distance``), VERIFICATION_LOSS (``VerificationLoss``), GAUSSIAN_NOISE (``GaussianNoise``),
VERIFICATION_ACCURACY (``VerificationAccuracy``), TRIPLET_ACCURACY (``TripletAccuracy``) and
BINARY_LABEL (``BinaryLabel``)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer


@register_layer("Distance")
class DistanceLayer(Layer):
    """Cosine distance per item of two features (N x ...): y_n = 1 - a.b / sqrt(|a|^2 |b|^2),
    top N x 1 x 1 x 1. ``distance_param { type: COSINE }`` (the fork stops on L2: not
    implemented). dL/da = -dy / sqrt(|a|^2 |b|^2) (b - (a.b / |a|^2) a), dL/db likewise."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.distance_param
        if p.type != p.COSINE:
            raise self.error("distance_param.type %s: the fork implements COSINE only"
                             % p.DistanceType.Name(p.type))

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape:
            raise self.error("features %s and %s must have one shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape((bottom[0].shape[0], 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, -1).astype(np.float64)
        b = bottom[1].data.reshape(n, -1).astype(np.float64)
        self.n1, self.n2 = (a * a).sum(1), (b * b).sum(1)
        self.dot = (a * b).sum(1)
        top[0].data[...] = (1.0 - self.dot / np.sqrt(self.n1 * self.n2)).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not (propagate_down[0] or propagate_down[1]):
            return
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, -1).astype(np.float64)
        b = bottom[1].data.reshape(n, -1).astype(np.float64)
        s = (-top[0].diff.reshape(n) / np.sqrt(self.n1 * self.n2))[:, None]
        # the fork writes both diffs when the first bottom wants one
        bottom[0].diff[...] = (s * (b - (self.dot / self.n1)[:, None] * a)).reshape(
            bottom[0].shape)
        bottom[1].diff[...] = (s * (a - (self.dot / self.n2)[:, None] * b)).reshape(
            bottom[1].shape)


@register_layer("VerificationLoss")
class VerificationLossLayer(LossLayer):
    """Contrastive loss of feature pairs with margins m1, m2 (``verification_param { m1 m2 }``).
    Bottoms: feat1, label1, feat2, label2. Per item, d = |f1 - f2|: same labels add
    (d - m1)^2 / 2 when d > m1, different labels (m2 - d)^2 / 2 when d < m2; the loss is the sum
    over N. dL/df1 = (1 - m / d)(f1 - f2) / N for the items that add (m their margin), dL/df2 the
    negative; the labels get none."""
    exact_num_bottom_blobs = 4

    def layer_setup(self, bottom, top):
        p = self.layer_param.verification_param
        self.m1, self.m2 = float(p.m1), float(p.m2)

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[2].shape or bottom[1].count != bottom[3].count or \
                bottom[1].count < bottom[0].shape[0]:
            raise self.error("expected feat1, label1, feat2, label2 with feat1 %s like feat2 %s "
                             "and a label per item" % (bottom[0].shape, bottom[2].shape),
                             ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        diff = (bottom[0].data - bottom[2].data).reshape(n, -1).astype(np.float64)
        l1 = bottom[1].data.reshape(-1)[:n].astype(np.int64)
        l2 = bottom[3].data.reshape(-1)[:n].astype(np.int64)
        d = np.sqrt((diff * diff).sum(1))
        same = l1 == l2
        margin = np.where(same, self.m1, self.m2)
        on = np.where(same, d > self.m1, d < self.m2)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(on, 1.0 - margin / d, 0.0)
        self.grad = t[:, None] * diff
        top[0].data[...] = np.sum(np.where(on, 0.5 * (d - margin) ** 2, 0.0)) / n

    def backward_cpu(self, top, propagate_down, bottom):
        alpha = float(top[0].diff) / bottom[0].shape[0]
        if propagate_down[0]:
            bottom[0].diff[...] = (alpha * self.grad).reshape(bottom[0].shape)
        if propagate_down[2]:
            bottom[2].diff[...] = (-alpha * self.grad).reshape(bottom[2].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index in (0, 2)


@register_layer("GaussianNoise")
class GaussianNoiseLayer(NeuronLayer):
    """TRAIN: y = x + n, n ~ N(0, std^2) per element (``gaussian_noise_param { std }``); other
    phases: y = x. dL/dx = dL/dy."""

    def layer_setup(self, bottom, top):
        self.std = float(self.layer_param.gaussian_noise_param.std)
        self.train = self.phase == self._caffe_pb2.TRAIN

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.train:
            top[0].data[...] = x + self.rng().normal(0.0, self.std, x.shape)
        else:
            top[0].data[...] = x

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff


def _pair_distances(layer, bottom):
    n = bottom[0].shape[0]
    diff = (bottom[0].data - bottom[2].data).reshape(n, -1).astype(np.float64)
    same = bottom[1].data.reshape(-1)[:n].astype(np.int64) == \
        bottom[3].data.reshape(-1)[:n].astype(np.int64)
    return np.sqrt((diff * diff).sum(1)), same


@register_layer("VerificationAccuracy")
class VerificationAccuracyLayer(Layer):
    """VerificationLoss's bottoms (feat1, label1, feat2, label2) and margins; top 1 x 2 x 1 x 1:
    the share of pairs inside their margin (same labels: d <= m1, different: d >= m2), then the
    share right by the one threshold (m1 + m2) / 2 (same: d below it, different: above). No
    backward."""
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[2].shape:
            raise self.error("feat1 %s and feat2 %s must have one shape"
                             % (bottom[0].shape, bottom[2].shape), ShapeError)
        top[0].reshape((1, 2, 1, 1))

    def forward_cpu(self, bottom, top):
        p = self.layer_param.verification_param
        m1, m2 = float(p.m1), float(p.m2)
        d, same = _pair_distances(self, bottom)
        if np.isnan(d).any():
            raise self.error("a pair's distance is NaN")
        inside = np.where(same, d <= m1, d >= m2)
        one = np.where(same, d * 2 < m1 + m2, d * 2 > m1 + m2)
        n = bottom[0].shape[0]
        top[0].data[...] = np.array([inside.sum() / n, one.sum() / n]).reshape(1, 2, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("TripletAccuracy")
class TripletAccuracyLayer(Layer):
    """Share of triplets (anchor, positive, negative; N x ... each) with |a - p|^2 - |a - n|^2 +
    alpha < 0 (``triplet_loss_param { alpha }``). Top 1 x 1 x 1 x 1. No backward."""
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if not bottom[0].shape == bottom[1].shape == bottom[2].shape:
            raise self.error("anchor, positive and negative must have one shape", ShapeError)
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        a = bottom[0].data.reshape(n, -1).astype(np.float64)
        d1 = ((a - bottom[1].data.reshape(n, -1)) ** 2).sum(1)
        d2 = ((a - bottom[2].data.reshape(n, -1)) ** 2).sum(1)
        alpha = float(self.layer_param.triplet_loss_param.alpha)
        top[0].data[...] = np.sum(d1 - d2 + alpha < 0) / n

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("BinaryLabel")
class BinaryLabelLayer(Layer):
    """Two label blobs of one shape to a same / different target: 1 where (int) label1 == (int)
    label2, else ``binary_label_param { negative_target }`` (the fork's default 0; caffepy's
    schema holds most forks' -1, so an unset value reads as 0 here). No backward."""
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.binary_label_param
        self.neg = float(p.negative_target) if p.HasField("negative_target") else 0.0

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape:
            raise self.error("labels %s and %s must have one shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        same = bottom[0].data.astype(np.int64) == bottom[1].data.astype(np.int64)
        top[0].data[...] = np.where(same, 1.0, self.neg)

    def backward_cpu(self, top, propagate_down, bottom):
        pass
