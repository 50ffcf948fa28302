"""Smaller fork layers seen in the model zoo: SeLu and SeLuDropout (soeaver/caffe-model's fork),
SegAccuracy (DeepLab / PSPNet).
"""
import numpy as np

from ...layers.base import Layer, NeuronLayer, register_layer


@register_layer("SeLu")
class SeLuLayer(NeuronLayer):
    """Scaled exponential linear unit.

        y = lambda * x (x > 0),  lambda * alpha * (exp(x) - 1) (x <= 0)

    prototxt: ``selu_param { alpha: 1.6732632, lambda: 1.0507010 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.selu_param
        self.alpha, self.lam = p.alpha, getattr(p, "lambda")

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        neg = self.lam * self.alpha * np.expm1(np.minimum(x, 0))
        top[0].data[...] = np.where(x > 0, self.lam * x, neg)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            y = top[0].data
            # in place, bottom data already holds y; y > 0 exactly where x > 0
            d = np.where(y > 0, self.lam, y + self.lam * self.alpha)
            bottom[0].diff[...] = top[0].diff * d


@register_layer("SeLuDropout")
class SeLuDropoutLayer(NeuronLayer):
    """Alpha dropout for SELU nets (TRAIN only; TEST is the identity).

    With keep probability q = 1 - dropout_ratio and a' = alpha:
        a = (q + a'^2 q (1 - q))^-1/2,  b = -a (1 - q) a'
        y = a (x m + a' (1 - m)) + b,  m ~ Bernoulli(q);  dx = a m dy

    prototxt: ``selu_dropout_param { dropout_ratio: 0.1, alpha: -1.7580993 }``.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.selu_dropout_param
        q = 1.0 - p.dropout_ratio
        if not 0 < q <= 1:
            raise self.error("dropout_ratio must be in [0, 1), got %g" % p.dropout_ratio)
        self.q, self.al = q, p.alpha
        self.a = (q + self.al ** 2 * q * (1 - q)) ** -0.5
        self.b = -self.a * (1 - q) * self.al

    def _train(self):
        from ...proto import caffe_pb2
        return self.phase == caffe_pb2.TRAIN

    def forward_cpu(self, bottom, top):
        if not self._train():
            top[0].data[...] = bottom[0].data
            return
        self.mask = self.rng().random(bottom[0].shape) < self.q
        x = bottom[0].data
        top[0].data[...] = self.a * np.where(self.mask, x, self.al) + self.b

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            if self._train():
                bottom[0].diff[...] = top[0].diff * self.mask * self.a
            else:
                bottom[0].diff[...] = top[0].diff


@register_layer("SegAccuracy")
class SegAccuracyLayer(Layer):
    """Segmentation accuracy from a confusion matrix over pixels (DeepLab / PSPNet).

    Predicted class = argmax over axis 1; pixels whose label is in ``ignore_label`` are skipped.
    Top: ``[pixel accuracy, mean class accuracy, mean IoU]`` over the classes present. With
    ``reset: false`` the confusion matrix accumulates across forward passes.

    prototxt: ``seg_accuracy_param { metric (ignored: all three are output), ignore_label: [],
    reset: true }``. Bottoms: scores (N x C x H x W), labels (N x 1 x H x W). Top: 1 x 1 x 1 x 3.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.seg_accuracy_param
        self.ignore = set(int(v) for v in p.ignore_label)
        self.reset = p.reset
        self.confusion = None

    def reshape(self, bottom, top):
        N, C = bottom[0].shape[:2]
        if bottom[1].count != N * bottom[0].count_range(2):
            raise self.error("labels %s must have one value per pixel of %s"
                             % (bottom[1].shape, bottom[0].shape))
        if self.confusion is None or self.confusion.shape[0] != C:
            self.confusion = np.zeros((C, C), np.int64)
        top[0].reshape(1, 1, 1, 3)

    def forward_cpu(self, bottom, top):
        N, C = bottom[0].shape[:2]
        pred = bottom[0].data.reshape(N, C, -1).argmax(axis=1).ravel()
        label = bottom[1].data.reshape(-1).astype(np.int64)
        ok = (label >= 0) & (label < C) & ~np.isin(label, list(self.ignore))
        if self.reset:
            self.confusion[...] = 0
        np.add.at(self.confusion, (label[ok], pred[ok]), 1)
        m = self.confusion
        tp, gt, pr = np.diag(m), m.sum(axis=1), m.sum(axis=0)
        present = gt > 0
        acc = tp.sum() / max(m.sum(), 1)
        cls = (tp[present] / gt[present]).mean() if present.any() else 0.0
        union = gt + pr - tp
        iou = (tp[present] / union[present]).mean() if present.any() else 0.0
        top[0].data[...] = np.array([acc, cls, iou]).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("has no backward")
