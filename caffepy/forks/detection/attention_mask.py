"""Layers of the AttentionMask object-proposal forks (chwilms/AttentionMask,
chwilms/superpixelRefinement, harm-matthias-harms/AttentionBox): TopK (the k best-scored
windows), NormalizedSigmoidCrossEntropyLoss, SlidingWindow (every window of a feature map),
FlagsToIndices and ArgMaxMy (counts taken from the data)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer
from ...layers.eltwise import ArgMaxLayer


def _sigmoid_ce(x, t):
    """Caffe's stable -[t log s(x) + (1 - t) log(1 - s(x))], element by element."""
    pos = (x >= 0).astype(x.dtype)
    return -(x * (t - pos) - np.log1p(np.exp(x - 2 * x * pos)))


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


@register_layer("TopK")
class TopKLayer(Layer):
    """The k best-scored rows of bottom 0 (chwilms/AttentionMask,
    caffe/src/caffe/layers/top_k_layer.cu; the fork's CPU path is NOT_IMPLEMENTED, this is its
    GPU path). Bottoms: x (N x ...), scores (M x S, M >= N), and any blob whose first axis K
    gives the count. With s_i = scores[i] when S = 1, else max(0, scores[i, 1:]) (the
    background column 0 ignored), the rows of x are ordered by s descending (ties: lower index
    first; the fork's std::sort leaves their order unspecified), the first k = min(K, N) of
    that order are sorted by index, and

        y[b] = x[ids[b]]  (b < k);   top[1] (optional, K x 1 x 1 x 1) = the same ids as floats
        dL/dx[ids[b]] = dL/dy[b];    the rows not chosen get 0

    Past position k, top[1] holds the rest of the score order as the fork's buffer does; a K
    greater than N (the fork would read unset ids there) is refused when top[1] is asked for.
    No prototxt fields. The scores and the count get no gradient.
    """
    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        x, s, k = bottom
        if x.num_axes == 0 or s.num_axes == 0 or k.num_axes == 0:
            raise self.error("the three bottoms need a first axis", ShapeError)
        n = x.shape[0]
        if s.shape[0] < n:
            raise self.needs("the scores need a row for each of the %d rows of bottom[0], got "
                             "shape %s" % (n, s.shape), [(1, (n,) + tuple(s.shape[1:]), None)])
        if len(top) == 2 and k.shape[0] > n:
            raise self.error("bottom[2]'s first axis (%d) exceeds bottom[0]'s (%d): the fork's "
                             "second top would read unset ids" % (k.shape[0], n), ShapeError)
        self.k = min(k.shape[0], n)
        top[0].reshape((self.k,) + tuple(x.shape[1:]))
        if len(top) == 2:
            top[1].reshape((k.shape[0], 1, 1, 1))

    def _ids(self, bottom):
        n = bottom[0].shape[0]
        s = bottom[1].data.reshape(bottom[1].shape[0], -1)
        score = s[:, 0] if s.shape[1] == 1 else np.maximum(0, s[:, 1:].max(axis=1))
        order = np.argsort(-score[:n], kind="stable")
        order[:self.k] = np.sort(order[:self.k])
        return order

    def forward_cpu(self, bottom, top):
        self.ids = self._ids(bottom)
        top[0].data[...] = bottom[0].data[self.ids[:self.k]]
        if len(top) == 2:
            top[1].data.reshape(-1)[...] = self.ids[:top[1].shape[0]]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            bottom[0].diff[self.ids[:self.k]] = top[0].diff
        for i in (1, 2):
            if propagate_down[i]:
                bottom[i].diff[...] = 0

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("NormalizedSigmoidCrossEntropyLoss")
class NormalizedSigmoidCrossEntropyLossLayer(LossLayer):
    """Sigmoid cross-entropy summed over all elements and divided by N H W (not C)
    (chwilms/AttentionMask, caffe/src/caffe/layers/normalized_sigmoid_cross_entropy_loss_layer.cpp;
    also chwilms/superpixelRefinement and harm-matthias-harms/AttentionBox). For x N x C x H x W
    and targets t of x's count:

        loss = -sum [t log s(x) + (1 - t) log(1 - s(x))] / (N H W)
        dL/dx = loss_weight (s(x) - t) / (N H W)

    No prototxt fields. Bottoms: x (4 axes, as the fork reads shape(2) and shape(3)), t.
    The targets get no gradient.
    """

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom[0] must be N x C x H x W, got shape %s" % (x.shape,),
                             ShapeError)
        if bottom[1].count != x.count:
            raise self.needs("the targets must have the count of the scores (%s vs %s)"
                             % (bottom[1].shape, x.shape), [(1, x.shape, 0)])
        self.norm = float(x.shape[0] * x.shape[2] * x.shape[3])

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        t = bottom[1].data.reshape(x.shape)
        top[0].data[...] = np.sum(_sigmoid_ce(x, t), dtype=np.float64) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the targets (bottom 1)")
        if propagate_down[0]:
            x = bottom[0].data
            g = _sigmoid(x) - bottom[1].data.reshape(x.shape)
            bottom[0].diff[...] = g * (float(top[0].diff.reshape(())) / self.norm)


@register_layer("SlidingWindow")
class SlidingWindowLayer(Layer):
    """Every window_h x window_w window of a feature map, one per position (chwilms/AttentionMask,
    caffe/src/caffe/layers/sliding_window_layer.cu; the fork's CPU path is NOT_IMPLEMENTED, this
    is its GPU path). For x 1 x C x H x W the top is ((H + 1)(W + 1)) x C x wh x ww; window
    n = a (W + 1) + b (0 <= a <= H, 0 <= b <= W) is centred at (a, b):

        y[n, c, i, j] = x[0, c, a + i - wh/2, b + j - ww/2]   (0 outside x)
        dL/dx = the sum of dL/dy over the windows that read each element

    prototxt: ``sliding_window_param { window_h: <even, > 0> window_w: <even, > 0> stride_h: 1
    stride_w: 1 }``; the strides must be > 0 and are not used (the fork's kernels take every
    position). Bottom: 1 x C x H x W.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.sliding_window_param
        self.wh, self.ww = int(p.window_h), int(p.window_w)
        for name, v in (("window_h", self.wh), ("window_w", self.ww)):
            if v <= 0 or v % 2:
                raise self.error("sliding_window_param.%s must be even and > 0, got %d"
                                 % (name, v))
        if p.stride_h <= 0 or p.stride_w <= 0:
            raise self.error("sliding_window_param: stride_h and stride_w must be > 0")

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4 or x.shape[0] != 1:
            fit = (1,) + tuple(x.shape[1:4]) if x.num_axes == 4 else None
            message = "bottom must be 1 x C x H x W, got shape %s" % (x.shape,)
            if fit is None:
                raise self.error(message, ShapeError)
            raise self.needs(message, [(0, fit, None)])
        _, c, h, w = x.shape
        top[0].reshape(((h + 1) * (w + 1), c, self.wh, self.ww))

    def _padded_view(self, a):
        """The windows as a view (H+1, W+1, C, wh, ww) of ``a`` (C x H x W) padded by wh/2, ww/2."""
        from numpy.lib.stride_tricks import sliding_window_view
        v = sliding_window_view(a, (self.wh, self.ww), axis=(1, 2))
        return np.moveaxis(v, 0, 2)

    def forward_cpu(self, bottom, top):
        _, c, h, w = bottom[0].shape
        ph, pw = self.wh // 2, self.ww // 2
        pad = np.zeros((c, h + self.wh, w + self.ww), dtype=bottom[0].data.dtype)
        pad[:, ph:ph + h, pw:pw + w] = bottom[0].data[0]
        windows = self._padded_view(pad)[:h + 1, :w + 1]
        top[0].data[...] = windows.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        _, c, h, w = bottom[0].shape
        ph, pw = self.wh // 2, self.ww // 2
        dy = top[0].diff.reshape(h + 1, w + 1, c, self.wh, self.ww)
        pad = np.zeros((c, h + self.wh, w + self.ww), dtype=np.float64)
        for i in range(self.wh):
            for j in range(self.ww):
                pad[:, i:i + h + 1, j:j + w + 1] += np.moveaxis(dy[:, :, :, i, j], 2, 0)
        bottom[0].diff[0] = pad[:, ph:ph + h, pw:pw + w]


@register_layer("FlagsToIndices")
class FlagsToIndicesLayer(Layer):
    """The positions of the flags set to 1 (chwilms/AttentionMask,
    caffe/src/caffe/layers/flagsToIndices_layer.cpp). Of a bottom with 4 axes, the first
    L = shape[3] values f_0 .. f_{L-1} (in memory order) are read:

        K = f_0 + ... + f_{L-1} (the fork adds them into an int, truncating at each step)
        y = the indices i with f_i == 1, in order;   top K x 1 x 1 x 1

    A K that differs from the number of ones (flags other than 0 and 1) is an error: the fork
    would leave part of its top unset or write past it. The top's size comes from the data. No
    prototxt fields. Backward: nothing flows (the fork's backward is empty; here the bottom's
    gradient is 0).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def _flags(self, bottom):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must have 4 axes (the flags are its first shape[3] values), "
                             "got shape %s" % (x.shape,), ShapeError)
        return x.data.reshape(-1)[:x.shape[3]]

    def reshape(self, bottom, top):
        flags = self._flags(bottom)
        k = 0
        for f in flags:
            k = int(k + float(f))
        self.ids = np.flatnonzero(flags == 1)
        if k != len(self.ids):
            raise self.error("the flags add up to %d but %d of them are 1 (flags must be 0 or 1)"
                             % (k, len(self.ids)))
        top[0].reshape((k, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        top[0].data.reshape(-1)[...] = self.ids

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0


@register_layer("ArgMaxMy")
class ArgMaxMyLayer(ArgMaxLayer):
    """ArgMax whose top_k is counted from the data (chwilms/AttentionMask,
    caffe/src/caffe/layers/argmax_layer_2.cpp). Bottoms: x, and a blob with 4 axes; with
    L = bottom[1].shape[3] and a, b the first L values of x and of bottom[1] (memory order),

        top_k = #{ i < L : a_i > b_i }   (objectness above no-objectness)

    then as ``ArgMax`` on x with that top_k (the top's size comes from the data; top_k 0 gives
    an empty top). prototxt: ``argmax_param { out_max_val top_k axis }``; the fork checks the
    given top_k (>= 1, at most the searched dimension) at setup and then uses the counted one.
    Backward: nothing flows (the fork's backward is empty; here the gradients are 0).
    """
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        b = bottom[0]
        if self.has_axis:
            axis = self.layer_param.argmax_param.axis
            dim = b.shape[axis] if -b.num_axes <= axis < b.num_axes else None
        else:
            dim = b.count_range(1)
        if dim is not None and self.top_k > dim:
            raise self.error("argmax_param.top_k %d exceeds the %d values to search"
                             % (self.top_k, dim), ShapeError)

    def reshape(self, bottom, top):
        noobj = bottom[1]
        if noobj.num_axes != 4:
            raise self.error("bottom[1] must have 4 axes, got shape %s" % (noobj.shape,),
                             ShapeError)
        n = noobj.shape[3]
        if bottom[0].count < n:
            raise self.error("bottom[0] has %d values, fewer than bottom[1]'s shape[3] (%d)"
                             % (bottom[0].count, n), ShapeError)
        a = bottom[0].data.reshape(-1)[:n]
        self.top_k = int(np.sum(a > noobj.data.reshape(-1)[:n]))
        super().reshape(bottom, top)

    def backward_cpu(self, top, propagate_down, bottom):
        for i, blob in enumerate(bottom):
            if propagate_down[i]:
                blob.diff[...] = 0
