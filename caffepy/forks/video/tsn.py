"""Temporal segment networks' caffe (yjxiong/caffe): ``Gather``, ``Scatter``, ``BatchReduction``,
``SyncBN``, Eltwise's ``STOCHASTIC_SUM``, and the earlier branch's ``MultilabelLogisticLoss``
(commit 08c6c8c, src/caffe/layers/multilabel_logistic_loss_layer.cpp; also Annusha/caffe).

Its ``SegData`` reader is caffepy.forks.segmentation.seg_data; ``caffepy.zoo`` swaps it for an
input (batch 1, H and W floored to ``transform_param.stride``, as the fork's first image).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, fork_param, register_layer, register_variant
from ...layers.eltwise import EltwiseLayer
from ...layers.normalization import BNLayer, _bcast, _ncs
from ...proto import caffe_pb2

_STOCHASTIC_SUM = caffe_pb2.EltwiseParameter.STOCHASTIC_SUM


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


@register_variant("Eltwise", lambda lp: lp.eltwise_param.operation == _STOCHASTIC_SUM)
class StochasticSumEltwiseLayer(EltwiseLayer):
    """Eltwise ``operation: STOCHASTIC_SUM`` (yjxiong/caffe src/caffe/layers/eltwise_layer.cu;
    stochastic depth over the bottoms), with c_i = ``coeff`` (default 1) the probability that
    bottom i survives:

        TRAIN: u_i ~ U[0, 1) per bottom and forward;  y = sum_{i: u_i <= c_i} x_i;
               dL/dx_i = dL/dy if u_i <= c_i else 0
        TEST:  y = sum_i c_i x_i;  dL/dx_i = c_i dL/dy

    (The fork's CPU backward falls through to its unknown-operation FATAL after this case; its GPU
    code, followed here, does not.) prototxt: ``eltwise_param { operation: STOCHASTIC_SUM coeff:
    (0 or one per bottom) }``. Bottoms: k blobs of one shape; top: that shape.
    """

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self.train = self.phase == caffe_pb2.TRAIN
        self.kept = [True] * len(bottom)

    def forward_cpu(self, bottom, top):
        if self.train:
            u = self.rng().random(len(bottom))
            self.kept = [bool(ui <= c) for ui, c in zip(u, self.coeffs)]
            weights = [1.0 if k else 0.0 for k in self.kept]
        else:
            weights = self.coeffs
        y = np.zeros(bottom[0].shape, top[0].data.dtype)
        for w, b in zip(weights, bottom):
            if w:
                y += w * b.data
        top[0].data[...] = y

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        for i, (b, down) in enumerate(zip(bottom, propagate_down)):
            if down:
                w = (1.0 if self.kept[i] else 0.0) if self.train else self.coeffs[i]
                b.diff[...] = w * dy


@register_layer("Scatter")
class ScatterLayer(GatherLayer):
    """Top i = bottom i, for every i (yjxiong/caffe src/caffe/layers/scatter_layer.cpp outside MPI
    mode: the tops share the bottoms' data and diff, forward and backward do nothing).

    In the fork's MPI mode each rank keeps its 1/R share of bottom i's batch and backward
    all-gathers the diffs and divides them by R; one process holds the whole batch, so the
    identity is what it computes. prototxt: no parameters. Bottoms: k >= 1 blobs; tops: k blobs
    of the same shapes.
    """
    type = "Scatter"


@register_layer("BatchReduction")
class BatchReductionLayer(Layer):
    """Reduce one axis in groups of level^2 entries (yjxiong/caffe
    src/caffe/layers/batch_reduction_layer.cpp, its CPU code).

    With bottom shape (outer..., A, inner...) and ``level`` [l_1 .. l_L] (default [1]):
    levels [1] reduce the whole axis, top (outer..., inner...); otherwise A must equal
    sum l_i^2 and top is (outer..., L, inner...), entry i reducing the next l_i^2 rows.
    SUM adds the rows, MEAN averages them; backward gives each row coeff * dy (coeff 1 or
    1 / l_i^2). TOPK (one level only): top = mean of the k largest rows per position (ties in
    the order the rows come); backward gives those rows dy / k, the others 0. ``pos``: the axis
    after ``axis`` is reduced too, taking the diagonal x[..., t, t, inner...] (level [1] only):
    top (outer..., inner after both axes), backward writes dy (times coeff) on the diagonal and 0
    elsewhere. ASUM / SUMSQ are NOT_IMPLEMENTED in the fork and refused here.

    prototxt: ``batch_reduction_param { level: (repeated) pos: false reduction_param {
    operation: SUM axis: 0 k: 1 } }``. Bottom: any blob; top as above.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "batch_reduction_param")
        rp = p.reduction_param
        ops = self._caffe_pb2.ReductionParameter
        self.op = {ops.SUM: "SUM", ops.MEAN: "MEAN"}.get(rp.operation)
        if rp.operation == getattr(ops, "TOPK", -1):
            self.op = "TOPK"
        if self.op is None:
            raise self.error("reduction_param operation %s is NOT_IMPLEMENTED in the fork's "
                             "BatchReduction (SUM, MEAN, TOPK only)"
                             % ops.ReductionOp.Name(rp.operation))
        self.k = int(rp.k)
        self.pos = bool(p.pos)
        self.levels = [int(v) for v in p.level] or [1]
        if len(self.levels) > 1 and (self.pos or self.op == "TOPK"):
            raise self.error("batch_reduction_param: pos and TOPK take one level, got %d"
                             % len(self.levels))
        nd = bottom[0].num_axes
        self.axis = int(rp.axis) + (nd if rp.axis < 0 else 0)
        if not 0 <= self.axis < nd or (self.pos and self.axis + 1 >= nd):
            raise self.error("reduction axis %d out of range for a bottom of shape %s%s"
                             % (rp.axis, bottom[0].shape, " (pos reduces two axes)"
                                if self.pos else ""))

    def reshape(self, bottom, top):
        shape, a = bottom[0].shape, self.axis
        self.global_ = self.levels == [1]
        if self.global_:
            self.ticks = [shape[a]]
        else:
            self.ticks = [v * v for v in self.levels]
            if sum(self.ticks) != shape[a]:
                raise self.error("axis %d has %d entries, the levels %s need %d"
                                 % (a, shape[a], self.levels, sum(self.ticks)))
        if self.pos and shape[a + 1] < shape[a]:
            raise self.error("pos: axis %d (%d) must be at least axis %d (%d) long"
                             % (a + 1, shape[a + 1], a, shape[a]))
        if self.op == "TOPK" and not 1 <= self.k <= self.ticks[0]:
            raise self.error("TOPK k = %d must be in [1, %d]" % (self.k, self.ticks[0]))
        inner = shape[a + 2:] if self.pos else shape[a + 1:]
        top[0].reshape(shape[:a] + (() if self.global_ else (len(self.levels),)) + inner)

    def _rows(self, x):
        """(outer, A, inner) view of x; pos: the diagonal (outer, A, inner)."""
        a, shape = self.axis, x.shape
        outer = int(np.prod(shape[:a], dtype=np.int64))
        if self.pos:
            n = shape[a]
            v = x.reshape(outer, n, shape[a + 1], -1)
            return v[:, np.arange(n), np.arange(n), :]
        return x.reshape(outer, shape[a], -1)

    def forward_cpu(self, bottom, top):
        rows = self._rows(bottom[0].data)
        out = top[0].data.reshape(rows.shape[0], -1, rows.shape[2])
        if self.op == "TOPK":
            order = np.argsort(-rows, axis=1, kind="stable")[:, :self.k]
            self._chosen = order
            out[:, 0] = np.take_along_axis(rows, order, axis=1).sum(axis=1) / self.k
            return
        start = 0
        for i, t in enumerate(self.ticks):
            s = rows[:, start:start + t].sum(axis=1)
            out[:, i] = s / t if self.op == "MEAN" else s
            start += t

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dx = np.zeros_like(bottom[0].diff)
        shape = bottom[0].shape
        outer = int(np.prod(shape[:self.axis], dtype=np.int64))
        dy = top[0].diff.reshape(outer, 1 if self.global_ else len(self.levels), -1)
        grad = np.zeros((outer, shape[self.axis], dy.shape[2]), dtype=dx.dtype)
        if self.op == "TOPK":
            np.put_along_axis(grad, self._chosen,
                              np.repeat(dy[:, :1] / self.k, self.k, axis=1), axis=1)
        else:
            start = 0
            for i, t in enumerate(self.ticks):
                grad[:, start:start + t] = dy[:, i:i + 1] / t if self.op == "MEAN" \
                    else dy[:, i:i + 1]
                start += t
        if self.pos:
            n = shape[self.axis]
            v = dx.reshape(outer, n, shape[self.axis + 1], -1)
            v[:, np.arange(n), np.arange(n), :] = grad
        else:
            dx.reshape(grad.shape)[...] = grad
        bottom[0].diff[...] = dx


@register_layer("SyncBN")
class SyncBNLayer(BNLayer):
    """yjxiong/caffe's SyncBN (src/caffe/layers/sync_bn_layer.cu; the .cpp's CPU functions are
    empty and the layer is built only with USE_MPI), in one process.

    TRAIN, with m = N * H * W values per channel: mu = E[x], var = (E[x^2] - mu^2) * m / (m - 1)
    (the unbiased variance, m > 1) is used both to normalise, y = slope (x - mu) / sqrt(var +
    eps) + bias, and for the moving averages (mean <- (1 - momentum) mu + momentum mean, the same
    for var). TEST: the stored averages. Backward: d slope += sum(x_hat dy), d bias += sum(dy),
    dx = slope / sqrt(var + eps) (dy - (x_hat sum(x_hat dy) + sum(dy)) / m) -- the batch-norm
    formula with m, not the exact derivative of the unbiased-variance forward (they differ by
    O(1/m) in the x_hat term). ``frozen`` is not read.

    The fork's multi-GPU sync: each of R ranks computes E[x] and E[x^2] of its own N images
    divided by the global m = N H W R, an MPI all-reduce sums them, so every rank normalises with
    the statistics of the whole R N batch; in backward sum(x_hat dy) and sum(dy) are all-reduced
    the same way and m is again the global count (each rank adds 1/R of the global sums to its
    slope and bias diffs). One process holding the whole batch computes exactly these statistics
    and bottom gradient (R = 1).

    prototxt: ``bn_param { slope_filler bias_filler momentum: 0.9 eps: 1e-5 }``. Bottom
    N x C x H x W; top the same. Params: slope, bias, mean, var (1, C, 1, 1); mean and var get
    lr_mult 0 / decay_mult 0.
    """
    type = "SyncBN"

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        if self.frozen:         # the fork's SyncBN does not read bn_param.frozen
            self.frozen = False
            self.param_propagate_down = [True, True, False, False]

    def forward_cpu(self, bottom, top):
        if self.phase == self._caffe_pb2.TEST:
            return super().forward_cpu(bottom, top)
        x = _ncs(bottom[0].data, self.channels)
        slope, bias, mean, var = (b.data.reshape(-1) for b in self.blobs)
        m = x.shape[0] * x.shape[2]
        mu = x.mean(axis=(0, 2))
        v = np.square(x).mean(axis=(0, 2)) - mu * mu
        if m > 1:
            v = v * (m / (m - 1.0))
        mean[...] = (1 - self.momentum) * mu + self.momentum * mean
        var[...] = (1 - self.momentum) * v + self.momentum * var
        self.inv_std = (1.0 / np.sqrt(v + self.eps)).astype(self.dtype)
        self.x_norm = (x - _bcast(mu)) * _bcast(self.inv_std)
        _ncs(top[0].data, self.channels)[...] = self.x_norm * _bcast(slope) + _bcast(bias)


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
