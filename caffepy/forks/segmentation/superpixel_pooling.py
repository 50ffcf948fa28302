"""Akrit2013/caffe-dev-160608's SuperpixelPooling: features pooled per superpixel label."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer

FLT_MIN = float(np.finfo(np.float32).tiny)


@register_layer("SuperpixelPooling")
class SuperpixelPoolingLayer(Layer):
    """Pooling of x (N x C x H x W) over the superpixels of a label map S (N x 1 x Hs x Ws)
    (Akrit2013/caffe-dev-160608, src/caffe/layers/superpixel_pooling_layer.cpp; Charleen777/
    caffecode registers the type too). Cell (h, w) of x reads the label at
    (round(Hs/H (h + 0.5)), round(Ws/W (w + 0.5))) as a flat index into S's data (as the
    fork does: past a row's end it reads the next row's start, past the sample the next
    sample's map; past the blob is an error), label k in [0, K). Top N x C x K x 1.

        AVE: y_k = sum of the cells of label k / their count; then, for k = 1 .. K-2 in
             order, a label with no cell takes y_{k-1} + y_{k+1} and count_{k-1} + count_{k+1}
             (sums before the division; the earlier filled value is used); a count 0 is 1.
             Backward: dL/dx[cell] = dL/dy[its label] (not divided by the count, as the fork)
        MAX: y_k starts at FLT_MIN (the smallest positive float), and a cell replaces it when
             larger; the index of the winner starts at cell 0. Backward: for k = 0 .. K-1 in
             order, dL/dx[winner_k] = dL/dy_k (assigned, a later k overwrites)

    prototxt: ``superpixel_pooling_param { num_output: K (required) pool: AVE (MAX) }``; pool
    unset is AVE, STOCHASTIC is refused. The label map gets no gradient.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.superpixel_pooling_param
        if not p.HasField("num_output") or p.num_output <= 0:
            raise self.error("superpixel_pooling_param.num_output must be set to the number of "
                             "superpixels")
        self.k = int(p.num_output)
        if p.HasField("pool") and p.pool not in (p.MAX, p.AVE):
            raise self.error("superpixel_pooling_param.pool must be MAX or AVE")
        self.max = p.HasField("pool") and p.pool == p.MAX

    def reshape(self, bottom, top):
        x, sp = bottom
        if x.num_axes != 4 or sp.num_axes != 4:
            raise self.error("both bottoms must be N x C x H x W, got %s and %s"
                             % (x.shape, sp.shape), ShapeError)
        if sp.shape[0] != x.shape[0] or sp.shape[1] != 1:
            raise self.needs("the superpixel map must be N x 1 x Hs x Ws, got %s for %s"
                             % (sp.shape, x.shape),
                             [(1, (x.shape[0], 1) + tuple(sp.shape[2:]), None)])
        n, c, h, w = x.shape
        hs, ws = sp.shape[2:]
        hc = np.floor(np.float32(hs) / np.float32(h) * (np.arange(h) + 0.5) + 0.5).astype(int)
        wc = np.floor(np.float32(ws) / np.float32(w) * (np.arange(w) + 0.5) + 0.5).astype(int)
        flat = (np.arange(n)[:, None, None] * hs * ws + hc[None, :, None] * ws
                + wc[None, None, :])
        if flat.max() >= sp.count:
            raise self.error("the %d x %d map to %d x %d superpixel labels reads past the "
                             "label blob (the fork reads out of bounds there)" % (h, w, hs, ws),
                             ShapeError)
        self.flat = flat.reshape(n, h * w)
        top[0].reshape((n, c, self.k, 1))

    def _labels(self, bottom):
        lab = np.trunc(bottom[1].data.reshape(-1)[self.flat]).astype(np.int64)
        if lab.min() < 0 or lab.max() >= self.k:
            raise self.error("superpixel label outside [0, %d)" % self.k)
        return lab

    def forward_cpu(self, bottom, top):
        n, c = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, c, -1).astype(np.float64)
        lab = self._labels(bottom)
        self.lab = lab
        if self.max:
            y = np.full((n, c, self.k), FLT_MIN)
            win = np.zeros((n, c, self.k), dtype=np.int64)
            for i in range(x.shape[2]):
                k = lab[:, i]
                cur = y[np.arange(n), :, k]
                better = cur < x[:, :, i]
                y[np.arange(n), :, k] = np.where(better, x[:, :, i], cur)
                win[np.arange(n), :, k] = np.where(better, i, win[np.arange(n), :, k])
            self.win = win
        else:
            s = np.zeros((n, c, self.k))
            cnt = np.zeros((n, c, self.k))
            for b in range(n):
                np.add.at(s[b], (slice(None), lab[b]), x[b])
                np.add.at(cnt[b], (slice(None), lab[b]), 1.0)
            for k in range(1, self.k - 1):
                empty = cnt[:, :, k] == 0
                s[:, :, k] = np.where(empty, s[:, :, k + 1] + s[:, :, k - 1], s[:, :, k])
                cnt[:, :, k] = np.where(empty, cnt[:, :, k + 1] + cnt[:, :, k - 1], cnt[:, :, k])
            y = s / np.where(cnt == 0, 1.0, cnt)
        top[0].data[...] = y[..., None]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the superpixel labels (bottom 1)")
        if not propagate_down[0]:
            return
        n, c = bottom[0].shape[:2]
        dy = top[0].diff.reshape(n, c, self.k)
        dx = np.zeros((n, c, bottom[0].count_range(2)))
        if self.max:
            for k in range(self.k):
                dx[np.arange(n)[:, None], np.arange(c)[None, :], self.win[:, :, k]] = dy[:, :, k]
        else:
            dx[...] = np.take_along_axis(dy, np.broadcast_to(self.lab[:, None, :], dx.shape),
                                         axis=2)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0
