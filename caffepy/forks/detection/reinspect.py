"""ApolloCaffe's layers for ReInspect (BestSonny/apollocaffe, Charleen777/caffecode):
HungarianLoss (an L1 box loss after a min-cost matching of predictions to ground truth) and
NumpyData (a top filled from the layer's runtime parameter)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer

INT_MAX = 2 ** 31 - 1


def min_cost_assignment(cost):
    """Row -> column of a minimum-cost perfect matching of the square matrix ``cost`` (the
    potentials form of the Hungarian method)."""
    n = cost.shape[0]
    u, v = np.zeros(n + 1), np.zeros(n + 1)
    match = np.zeros(n + 1, dtype=int)          # column -> row (1-based, 0: free)
    way = np.zeros(n + 1, dtype=int)
    for i in range(1, n + 1):
        match[0], j0 = i, 0
        minv = np.full(n + 1, np.inf)
        used = np.zeros(n + 1, dtype=bool)
        while True:
            used[j0] = True
            i0, delta, j1 = match[j0], np.inf, 0
            for j in range(1, n + 1):
                if not used[j]:
                    cur = cost[i0 - 1, j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(n + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    rows = np.zeros(n, dtype=int)
    for j in range(1, n + 1):
        rows[match[j] - 1] = j - 1
    return rows


@register_layer("HungarianLoss")
class HungarianLossLayer(LossLayer):
    """L1 loss of predicted boxes after matching them to the ground truth (BestSonny/apollocaffe,
    src/caffe/layers/hungarian_loss_layer.cpp; Charleen777/caffecode registers it too).
    Bottoms: predictions p (N x 4 x P x 1: x, y, w, h of P boxes), boxes b (the same shape; the
    first G_n of sample n are real), flags (N x 1 x P x 1, integers; G_n = their sum).
    For prediction i and box j < G_n:

        L1(i, j) = sum_c |p[c, i] - b[c, j]|
        cost(i, j) = L1 / 2000 + i, + 100 where |p_x - b_x| / b_w or |p_y - b_y| / b_h exceeds
                     r (r = match_ratio in TRAIN, 1 otherwise); cost(i, j >= G_n) = 0
        the costs scaled to ints (cost / max cost * INT_MAX / 2, truncated) are matched at
        minimum total (permute_matches: true; else prediction i takes box i)
        loss = sum_i L1(i, match(i)) / N   over the matches with a real box
        top[1][n, i] = 1 if matched to a real box, else 0; top[2][n, i] = that box, else -1
        dL/dp[c, i] = loss_weight sign(p - b) / N for those matches (-1 where equal), else 0

    Among matchings of equal integer cost the choice may differ from the fork's solver. P is at
    most 20, as in the fork. prototxt: ``hungarian_loss_param { match_ratio: 0.5
    permute_matches: true }`` (its height and width are not read by the layer). Tops: loss,
    confidences, assignments (the last two of the flags' shape; a single loss_weight given is
    completed with 0, 0 as the fork does).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 3

    def layer_setup(self, bottom, top):
        if len(self.layer_param.loss_weight) == 1:
            self.layer_param.loss_weight.extend([0.0, 0.0])
        p = self.layer_param.hungarian_loss_param
        self.ratio = float(p.match_ratio) if self.phase == self._caffe_pb2.TRAIN else 1.0
        self.permute = bool(p.permute_matches)

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        pred, boxes, flags = bottom
        if pred.num_axes != 4 or pred.shape[1] != 4 or pred.shape[3] != 1:
            raise self.error("predictions must be N x 4 x P x 1, got %s" % (pred.shape,),
                             ShapeError)
        if boxes.count_range(1) != pred.count_range(1):
            raise self.needs("boxes must have the predictions' shape (%s vs %s)"
                             % (boxes.shape, pred.shape), [(1, pred.shape, 0)])
        if flags.num_axes < 3 or flags.shape[0] != boxes.shape[0] or flags.count_range(1) != \
                pred.shape[2] or flags.shape[2] != pred.shape[2]:
            raise self.needs("flags must be N x 1 x P x 1 (%s), got %s"
                             % ((pred.shape[0], 1, pred.shape[2], 1), flags.shape),
                             [(2, (pred.shape[0], 1, pred.shape[2], 1), None)])
        if pred.shape[2] > 20:
            raise self.error("at most 20 predictions per sample (the fork's kMaxNumPred), got %d"
                             % pred.shape[2], ShapeError)
        top[1].reshape(flags.shape)
        top[2].reshape(flags.shape)

    def forward_cpu(self, bottom, top):
        n, _, npred = bottom[0].shape[:3]
        p = bottom[0].data.reshape(n, 4, npred).astype(np.float64)
        b = bottom[1].data.reshape(n, 4, npred).astype(np.float64)
        flags = bottom[2].data.reshape(n, npred).astype(np.float64)
        if np.any(np.abs(np.trunc(flags) - flags) > 0.01):
            raise self.error("box flags must be integers")
        self.num_gt = np.trunc(flags).astype(int).sum(axis=1)
        self.assign, loss = [], 0.0
        conf = np.zeros((n, npred))
        which = np.full((n, npred), -1.0)
        for s in range(n):
            g = self.num_gt[s]
            diff = np.abs(p[s][:, :, None] - b[s][:, None, :])          # 4 x i x j
            l1 = diff.sum(axis=0)
            cost = l1 / 2000.0 + np.arange(npred)[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                far = ((np.abs(p[s][0][:, None] - b[s][0][None, :]) / b[s][2][None, :]
                        > self.ratio)
                       | (np.abs(p[s][1][:, None] - b[s][1][None, :]) / b[s][3][None, :]
                          > self.ratio))
            cost = np.where(far, cost + 100, cost)
            real = np.arange(npred)[None, :] < g
            cost = np.where(real, cost, 0.0).astype(np.float32).astype(np.float64)
            l1 = np.where(real, l1, 0.0)
            top_cost = np.abs(cost).max()
            icost = (np.trunc(cost / top_cost * INT_MAX / 2.0) if top_cost > 0
                     else np.zeros_like(cost))
            rows = min_cost_assignment(icost) if self.permute else np.arange(npred)
            self.assign.append(rows)
            loss += l1[np.arange(npred), rows].sum()
            conf[s] = rows < g
            which[s] = np.where(rows < g, rows, -1)
        top[0].data[...] = loss / n
        top[1].data[...] = conf.reshape(top[1].shape)
        top[2].data[...] = which.reshape(top[2].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1] or propagate_down[2]:
            raise self.error("cannot backpropagate to the boxes or the flags")
        if not propagate_down[0]:
            return
        n, _, npred = bottom[0].shape[:3]
        p = bottom[0].data.reshape(n, 4, npred)
        b = bottom[1].data.reshape(n, 4, npred)
        g = float(top[0].diff.reshape(-1)[0]) / n
        dx = np.zeros((n, 4, npred))
        for s in range(n):
            rows = self.assign[s]
            real = rows < self.num_gt[s]
            i = np.flatnonzero(real)
            dx[s][:, i] = g * np.where(p[s][:, i] > b[s][:, rows[i]], 1.0, -1.0)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("NumpyData")
class NumpyDataLayer(Layer):
    """A top filled from the layer's runtime parameter (BestSonny/apollocaffe,
    src/caffe/layers/numpy_data_layer.cpp; ApolloCaffe's Python driver sets it before each
    forward): ``rp { numpy_data_param { shape: [dims > 0] data: [values] } }``. The top has
    that shape and the values in order; with fewer values the rest keeps what the top held
    (0 in a new top), as the fork copies only what it is given; more values than the shape
    holds are an error (the fork writes past its top). No bottoms, no backward.
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        p = self.layer_param.rp.numpy_data_param
        shape = tuple(int(d) for d in p.shape)
        if any(d <= 0 for d in shape):
            raise self.error("all rp.numpy_data_param.shape dimensions must be > 0, got %s"
                             % (shape,), ShapeError)
        if len(p.data) > int(np.prod(shape)):
            raise self.error("rp.numpy_data_param holds %d values for shape %s"
                             % (len(p.data), shape), ShapeError)
        top[0].reshape(shape)

    def forward_cpu(self, bottom, top):
        values = np.asarray(self.layer_param.rp.numpy_data_param.data, dtype=np.float64)
        top[0].data.reshape(-1)[:values.size] = values
