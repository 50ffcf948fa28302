"""Temporal segment networks' caffe (yjxiong/caffe): ``Gather``, and the earlier branch's
``MultilabelLogisticLoss`` (commit 08c6c8c, src/caffe/layers/multilabel_logistic_loss_layer.cpp;
also Annusha/caffe).

Its ``SegData`` reader (``seg_data_param``) has no caffepy reader; ``caffepy.zoo`` swaps it for
an input (batch 1, H and W floored to ``transform_param.stride``, as the fork's first image).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


@register_layer("Gather")
class GatherLayer(Layer):
    """Top i = bottom i, for every i (the fork's layer outside MPI mode: tops share the bottoms'
    data and diff, forward and backward do nothing).

    In the fork's MPI mode each top is the all-gather of bottom i over the R ranks (batch x R) and
    backward scatters the diff back times R; caffepy's distributed solvers exchange gradients
    themselves and never run a net under the fork's MPI mode, so that branch is not reproduced.
    prototxt: no parameters. Bottoms: any k >= 1 blobs; tops: k blobs of the same shapes.
    """
    min_bottom_blobs = 1
    equal_num_bottom_top_blobs = True

    def reshape(self, bottom, top):
        for b, t in zip(bottom, top):
            t.reshape(b.shape)

    def forward_cpu(self, bottom, top):
        for b, t in zip(bottom, top):
            t.data[...] = b.data

    def backward_cpu(self, top, propagate_down, bottom):
        for b, t, down in zip(bottom, top, propagate_down):
            if down:
                b.diff[...] = t.diff


_LOG_THRESHOLD = 1e-20


@register_layer("MultilabelLogisticLoss")
class MultilabelLogisticLossLayer(LossLayer):
    """Independent Bernoulli log-losses on probabilities p (N x D), one positive class per item:

        L = -(1/N) sum_n [log max(p_{n,y_n}, 1e-20) + sum_{j != y_n} log max(1 - p_{n,j}, 1e-20)]
        dL/dp_{n,y_n} = -w / (N max(p, 1e-20)),   dL/dp_{n,j} = w / (N max(1 - p, 1e-20))

    (w: loss_weight; the clamped values are used in the gradient as in the loss, so it is exact
    where nothing is clamped). Labels N x 1 x 1 x 1, truncated to int. No parameters.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        lab = bottom[1]
        if lab.num_axes > 4 or (lab.channels, lab.height, lab.width) != (1, 1, 1):
            raise self.error("labels must be N x 1 x 1 x 1, got %s" % (lab.shape,), ShapeError)

    def _clamped(self, bottom):
        n = bottom[0].shape[0]
        p = bottom[0].data.reshape(n, -1)
        hot = np.trunc(bottom[1].data.reshape(-1)).astype(np.int64)[:, None] == np.arange(
            p.shape[1])
        return hot, np.maximum(np.where(hot, p, 1 - p), _LOG_THRESHOLD)

    def forward_cpu(self, bottom, top):
        _, q = self._clamped(bottom)
        top[0].data[...] = -np.sum(np.log(q)) / bottom[0].shape[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot back-propagate to label inputs")
        if propagate_down[0]:
            hot, q = self._clamped(bottom)
            scale = -top[0].diff.reshape(-1)[0] / bottom[0].shape[0]
            bottom[0].diff.reshape(q.shape)[...] = scale / np.where(hot, q, -q)

