"""Small channel and shape layers that several forks share: happynear/caffe-windows' Slope
(coordinate channels), MONet / DDPN's MyTile (Tile with the count from a second bottom), segaware's
ChannelReduce (sum or max over channel groups), SROWN / TransferNet's LinearSum (a per-sample
matrix-vector product with one of two weight maps), py-faster / BWN-XNOR-caffe's SplitConcat
(K copies concatenated) and Ask_Attend_and_Answer's MatrixProd (batched matrix product)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...layers.shape import TileLayer, _axis


def _nchw(layer, blob):
    """Caffe's legacy num / channels / height / width of a blob of at most 4 axes."""
    if blob.num_axes > 4:
        raise layer.error("bottom must have at most 4 axes, got shape %s" % (blob.shape,),
                          ShapeError)
    return tuple(blob.shape) + (1,) * (4 - blob.num_axes)


@register_layer("Slope")
class SlopeLayer(Layer):
    """Appends two coordinate channels (happynear/caffe-windows, src/caffe/layers/slope_layer.cpp;
    also Centerus/caffe-windows). For a bottom N x C x H x W the top is N x (C + 2) x H x W:

        y[:, :C] = x;    y[:, C, h, w] = h / H;    y[:, C + 1, h, w] = w / W
        dL/dx = dL/dy[:, :C]

    No parameters. The fork computes the coordinate planes once in LayerSetUp for the first
    bottom's size; here they follow the bottom's size at each reshape.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        n, c, h, w = _nchw(self, bottom[0])
        top[0].reshape((n, c + 2, h, w))
        self.hw = (h, w)

    def forward_cpu(self, bottom, top):
        n, c, h, w = _nchw(self, bottom[0])
        y = top[0].data
        y[:, :c] = bottom[0].data.reshape(n, c, h, w)
        y[:, c] = (np.arange(h, dtype=np.float64) / h)[:, None]
        y[:, c + 1] = (np.arange(w, dtype=np.float64) / w)[None, :]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            c = _nchw(self, bottom[0])[1]
            bottom[0].diff[...] = top[0].diff[:, :c].reshape(bottom[0].shape)


@register_layer("MyTile")
class MyTileLayer(TileLayer):
    """Tile whose count is the num of a second bottom (GT9505/MONet and XiangChenchao/DDPN,
    src/caffe/layers/my_tile_layer.cpp): with tiles = bottom[1].shape[0], the same as
    ``Tile`` (the block of axes [axis, end) repeated ``tiles`` times along ``axis``; dL/dx sums
    the tiles' gradients). prototxt: ``my_tile_param { axis: 1 tiles: <must be set> }``: the
    fork checks that ``tiles`` is set but does not use its value. Bottoms: x, and any blob whose
    first axis gives the count (only its shape is read: its gradient is 0).
    """
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        if not self.layer_param.my_tile_param.HasField("tiles"):
            raise self.error("my_tile_param.tiles must be set (the fork requires it; the count "
                             "itself is bottom[1]'s first axis)")

    def reshape(self, bottom, top):
        if bottom[1].num_axes == 0 or bottom[1].shape[0] <= 0:
            raise self.error("bottom[1] gives the number of tiles by its first axis and must "
                             "have one > 0, got shape %s" % (bottom[1].shape,), ShapeError)
        self.tiles = bottom[1].shape[0]
        self.axis = _axis(self, bottom[0], self.layer_param.my_tile_param.axis)
        shape = list(bottom[0].shape)
        self.outer = bottom[0].count_range(0, self.axis)
        self.inner = bottom[0].count_range(self.axis)
        shape[self.axis] *= self.tiles
        top[0].reshape(shape)

    def backward_cpu(self, top, propagate_down, bottom):
        super().backward_cpu(top, propagate_down[:1], bottom[:1])
        if propagate_down[1]:
            bottom[1].diff[...] = 0


@register_layer("ChannelReduce")
class ChannelReduceLayer(Layer):
    """Sum or max over groups of consecutive channels (aharley/segaware and
    jialinwu17/segawareatt, src/caffe/layers/channel_reduce_layer.cpp). For a bottom
    N x C x H x W and K = ``num_channels`` the top is N x K x H x W, channel k reducing the
    channels [k G, (k + 1) G) with G = C / K:

        SUM:  y_k = sum_g x_{kG+g};        dL/dx_{kG+g} = dL/dy_k
        MAX:  y_k = max_g x_{kG+g};        dL/dx = dL/dy_k at the first maximum, else 0

    prototxt: ``channel_reduce_param { num_channels: 1 operation: MAX }`` (operation SUM or MAX).
    K must divide C and differ from it: the fork's check ``num_channels % channels != 0``
    refuses K = C, and a K that does not divide C makes its loops index past the top.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.channel_reduce_param
        self.k = int(p.num_channels)
        self.op = p.operation
        if self.op not in (p.SUM, p.MAX):
            raise self.error("channel_reduce_param.operation must be SUM or MAX")

    def reshape(self, bottom, top):
        n, c, h, w = _nchw(self, bottom[0])
        if self.k <= 0 or c % self.k or self.k == c:
            raise self.error("channel_reduce_param.num_channels (%d) must divide the %d bottom "
                             "channels and be smaller than them" % (self.k, c), ShapeError)
        self.groups = (n, self.k, c // self.k, h, w)
        top[0].reshape((n, self.k, h, w))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.groups)
        if self.op == self.layer_param.channel_reduce_param.SUM:
            top[0].data[...] = x.sum(axis=2)
        else:
            self.argmax = x.argmax(axis=2)
            top[0].data[...] = x.max(axis=2)

    def backward_cpu(self, top, propagate_down, bottom):
        if not propagate_down[0]:
            return
        dy = top[0].diff[:, :, None]
        dx = bottom[0].diff.reshape(self.groups)
        if self.op == self.layer_param.channel_reduce_param.SUM:
            dx[...] = dy
        else:
            pick = np.arange(self.groups[2])[None, None, :, None, None] == self.argmax[:, :, None]
            dx[...] = np.where(pick, dy, 0)


@register_layer("LinearSum")
class LinearSumLayer(Layer):
    """Per-sample matrix-vector product (src/caffe/layers/linear_sum_layer.cpp of
    maga33/TransferNet and of LeYangNwpu/SROWN). X is N x H x ... and M the count of its axes
    after the second; sample i computes y_i = X_i W_i (X_i: H x M, W_i: M).

    Two bottoms (TransferNet): X and W (N x 1 x ..., X's other axes); top N x H.
    Four bottoms (SROWN): X, W_other, W_same (both N x 1 x ...) and a flag (N x 1 x ..., the same
    number of axes, all but the first of size 1); top N x H x 1 x 1, and

        W_i = W_same[i]  if int(flag[i]) == 1 and (i + 1) % 3 == 0,  else W_other[i]

    Backward: dL/dX_i = dL/dy_i W_i^T, dL/dW_i = X_i^T dL/dy_i; the map not used for sample i
    gets 0. No parameters; the flag gets no gradient (SROWN stops with a fatal error when
    asked for one).
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 4
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 2:
            raise self.error("bottom[0] needs at least 2 axes, got %s" % (x.shape,), ShapeError)
        want = (x.shape[0], 1) + tuple(x.shape[2:])
        if len(bottom) == 3:
            raise self.error("takes 2 bottoms (X, W) or 4 (X, W_other, W_same, flag), got 3")
        for j in range(1, min(len(bottom), 3)):
            self.check_shape("bottom[%d] (a weight map)" % j, want, bottom[j].shape, j)
        if len(bottom) == 2:
            top[0].reshape(x.shape[:2])
            return
        flag = (x.shape[0],) + (1,) * (x.num_axes - 1)
        self.check_shape("bottom[3] (the class flag)", flag, bottom[3].shape, 3)
        top[0].reshape((x.shape[0], x.shape[1], 1, 1))

    def _select(self, bottom):
        n = bottom[0].shape[0]
        if len(bottom) == 2:
            return np.zeros((n, 1), dtype=bool)
        flag = np.trunc(bottom[3].data.reshape(n)).astype(np.int64)
        same = (flag == 1) & ((np.arange(n) + 1) % 3 == 0)
        return same[:, None]

    def _parts(self, bottom):
        n, h = bottom[0].shape[:2]
        x = bottom[0].data.reshape(n, h, -1)
        w_other, w_same = (bottom[j].data.reshape(n, -1) for j in (1, len(bottom) // 2))
        same = self._select(bottom)
        return x, np.where(same, w_same, w_other), same

    def forward_cpu(self, bottom, top):
        x, w, _ = self._parts(bottom)
        top[0].data[...] = np.einsum("nhm,nm->nh", x, w).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if len(bottom) == 4 and propagate_down[3]:
            raise self.error("cannot backpropagate to the class flag (bottom 3)")
        x, w, same = self._parts(bottom)
        dy = top[0].diff.reshape(x.shape[:2])
        if propagate_down[0]:
            bottom[0].diff[...] = (dy[:, :, None] * w[:, None, :]).reshape(bottom[0].shape)
        dw = np.einsum("nhm,nh->nm", x, dy)
        for j, use in ((1, ~same), (2, same))[:len(bottom) - 1]:
            if propagate_down[j]:
                bottom[j].diff[...] = np.where(use, dw, 0).reshape(bottom[j].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index != 3


@register_layer("SplitConcat")
class SplitConcatLayer(TileLayer):
    """K copies of the bottom concatenated along the concat axis (src/caffe/ex_layers/
    split_concat_layer.cpp of FreemanZhao/py-faster and loswensiana/BWN-XNOR-caffe: a Split
    into K tops, then a Concat of them), K = ``convolution_param.num_output``:

        y = concat([x] * K, axis);    dL/dx = the sum of the K slices of dL/dy

    (the same as Tile with ``tiles`` K on that axis). prototxt: ``convolution_param
    { num_output: K }`` (> 0; its other fields are not read), ``concat_param { axis: 1 }`` (or
    the legacy ``concat_dim``). Bottom: any blob; top: its shape with the axis K times as long.
    """

    def layer_setup(self, bottom, top):
        self.tiles = int(self.layer_param.convolution_param.num_output)
        if self.tiles <= 0:
            raise self.error("convolution_param.num_output (the number of copies) must be > 0, "
                             "got %d" % self.tiles)

    def reshape(self, bottom, top):
        p = self.layer_param.concat_param
        axis = p.concat_dim if p.HasField("concat_dim") else p.axis
        self.axis = _axis(self, bottom[0], axis)
        shape = list(bottom[0].shape)
        self.outer = bottom[0].count_range(0, self.axis)
        self.inner = bottom[0].count_range(self.axis)
        shape[self.axis] *= self.tiles
        top[0].reshape(shape)


@register_layer("MatrixProd")
class MatrixProdLayer(Layer):
    """Batched matrix product (VisionLearningGroup/Ask_Attend_and_Answer,
    caffe/src/caffe/layers/matrix_prod_layer.cpp; 3DMM-ICME2024/tc3d registers the type too).
    With b (L x M x N) and a either L x K x M, or 1 x L x M (then K = 1, row i of a times b_i):

        y_i = a_i b_i   (top: a's shape with the last axis N)
        dL/da_i = dL/dy_i b_i^T;   dL/db_i = a_i^T dL/dy_i

    No prototxt fields. Bottoms: a, b with three axes each.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        a, b = bottom
        if a.num_axes != 3 or b.num_axes != 3:
            raise self.error("both bottoms need three axes, got %s and %s" % (a.shape, b.shape),
                             ShapeError)
        lead = a.shape[1] if a.shape[0] == 1 else a.shape[0]
        if a.shape[2] != b.shape[1] or lead != b.shape[0]:
            raise self.error("cannot multiply %s by %s (L x K x M or 1 x L x M times L x M x N)"
                             % (a.shape, b.shape), ShapeError)
        self.k = 1 if a.shape[0] == 1 else a.shape[1]
        top[0].reshape((a.shape[0], a.shape[1], b.shape[2]))

    def forward_cpu(self, bottom, top):
        a, b = bottom
        a3 = a.data.reshape(b.shape[0], self.k, b.shape[1])
        top[0].data[...] = np.matmul(a3, b.data).reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        a, b = bottom
        dy = top[0].diff.reshape(b.shape[0], self.k, b.shape[2])
        if propagate_down[0]:
            a.diff[...] = np.matmul(dy, b.data.transpose(0, 2, 1)).reshape(a.shape)
        if propagate_down[1]:
            a3 = a.data.reshape(b.shape[0], self.k, b.shape[1])
            b.diff[...] = np.matmul(a3.transpose(0, 2, 1), dy)
