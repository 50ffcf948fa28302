"""DeconvNet's caffe (HyeonwooNoh/caffe): ``Unpooling``, the pixel-wise ``EltwiseAccuracy``, and
the layers of its 2014 enum-only types: ``BinaryAccuracy`` (BIN_ACCURACY), ``RedAccuracy``
(RED_ACCURACY), ``RedSoftmaxWithLoss`` (RED_SOFTMAX_LOSS) and ``DropoutChannel``
(DROPOUT_CHANNEL); its data layers SelectSegBinary and WindowSegBinary are in
``deconvnet_data.py``. Its V1 files (``type: UNPOOLING`` ...) load through
``caffepy.proto.upgrade``; its ``BN`` is SegNet's (``segnet.py``).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, NeuronLayer, register_layer

_FLT_MIN = np.finfo(np.float32).tiny


def _pair(p, name, h_name, w_name, default=None):
    if p.HasField(h_name) or p.HasField(w_name):
        return int(getattr(p, h_name)), int(getattr(p, w_name))
    if p.HasField(name) or default is None:
        v = int(getattr(p, name))
        return v, v
    return default, default


@register_layer("Unpooling")
class UnpoolingLayer(Layer):
    """Inverse of pooling on windows k (stride s, pad 0), N x C x h x w -> N x C x H x W.

    H x W is ``unpool_size`` (or unpool_h x unpool_w), else max((h - 1) s + k, h s + 1) per side.
    - MAX with a mask bottom (the pooling layer's argmax top: flat index into H x W):
      y[mask[i]] = x[i]; without a mask x[i] goes to the window's first cell
      (min(ph s, H - 1), min(pw s, W - 1)). Other cells are 0. Backward reads dy at those cells.
    - AVE: every window cell inside the map gets x / (window area, cells past the map counted).
    - TILE: every window cell inside the map gets x.
    Overlapping windows add up (AVE, TILE); backward of both sums dy over the window, with the
    same weights.

    prototxt: ``unpooling_param { unpool: MAX kernel_size (or kernel_h / kernel_w) stride: 1
    (or stride_h / stride_w) pad: 0 unpool_size (or unpool_h / unpool_w) }``; the fork allows pad
    0 only. ``engine`` (DEFAULT, CAFFE, CUDNN) changes nothing: HyeonwooNoh/caffe@d9e8494's
    layer factory builds this layer for DEFAULT and CAFFE, and the forks adding CUDNN
    (ArcherFMY/caffe-sal-ensemble@ff8e040) never read it. Bottoms: x (N x C x h x w),
    [mask (like x)]. Top: y.
    """
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.unpooling_param
        if not (p.HasField("kernel_size") or (p.HasField("kernel_h") and p.HasField("kernel_w"))):
            raise self.error("unpooling_param needs kernel_size or kernel_h and kernel_w")
        self.kernel = _pair(p, "kernel_size", "kernel_h", "kernel_w")
        self.stride = _pair(p, "stride", "stride_h", "stride_w", 1)
        pad = _pair(p, "pad", "pad_h", "pad_w", 0)
        if min(self.kernel) <= 0 or min(self.stride) <= 0:
            raise self.error("kernel and stride must be positive")
        if pad != (0, 0):
            raise self.error("only zero padding is supported (as the fork)")
        if p.HasField("unpool_size"):
            self.size = (int(p.unpool_size),) * 2
        elif p.HasField("unpool_h") and p.HasField("unpool_w"):
            self.size = (int(p.unpool_h), int(p.unpool_w))
        else:
            self.size = None
        self.method = p.unpool
        self.M = type(p)
        if len(bottom) > 1 and self.method != self.M.MAX:
            raise self.error("a mask bottom is used by MAX unpooling only")

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        if len(bottom) > 1 and bottom[1].shape != x.shape:
            raise self.error("mask %s must have the shape of the values %s"
                             % (bottom[1].shape, x.shape), ShapeError)
        h, w = x.shape[2:]
        if self.size is None:
            self.size = tuple(max((n - 1) * s + k, n * s + 1)
                              for n, s, k in zip((h, w), self.stride, self.kernel))
        top[0].reshape(x.shape[:2] + self.size)
        self._windows(h, w)

    def _windows(self, h, w):
        """Flat output index and weight of every (input cell, window cell) pair (AVE / TILE),
        or of each input cell's target (MAX without a mask)."""
        H, W = self.size
        (kh, kw), (sh, sw) = self.kernel, self.stride
        ph, pw = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        if self.method == self.M.MAX:
            self.target = (np.minimum(ph * sh, H - 1) * W + np.minimum(pw * sw, W - 1)).ravel()
            return
        src, dst, wt = [], [], []
        area = ((np.minimum(ph * sh + kh, H) - ph * sh) * (np.minimum(pw * sw + kw, W) - pw * sw))
        for i in range(kh):
            for j in range(kw):
                y, x = ph * sh + i, pw * sw + j
                ok = (y < H) & (x < W)
                src.append((ph * w + pw)[ok])
                dst.append((y * W + x)[ok])
                wt.append((1.0 / area[ok]) if self.method == self.M.AVE else np.ones(ok.sum()))
        self.src, self.dst, self.wt = (np.concatenate(a) for a in (src, dst, wt))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        N, C = x.shape[:2]
        xf = x.reshape(N * C, -1)
        y = np.zeros((N * C, self.size[0] * self.size[1]), dtype=np.float64)
        rows = np.arange(N * C)[:, None]
        if self.method == self.M.MAX:
            if len(bottom) > 1:
                self.index = bottom[1].data.reshape(N * C, -1).astype(np.int64)
                if self.index.size and (self.index.min() < 0 or self.index.max() >= y.shape[1]):
                    raise self.error("mask index outside the %d x %d output" % self.size)
            else:
                self.index = np.broadcast_to(self.target, xf.shape)
            y[rows, self.index] = xf
        else:
            np.add.at(y, (rows, self.dst[None, :]), xf[:, self.src] * self.wt)
        top[0].data[...] = y.reshape(top[0].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if len(bottom) > 1 and propagate_down[1]:
            raise self.error("cannot backpropagate to the mask (bottom 1)")
        if not propagate_down[0]:
            return
        N, C = bottom[0].shape[:2]
        dy = top[0].diff.reshape(N * C, -1)
        rows = np.arange(N * C)[:, None]
        if self.method == self.M.MAX:
            dx = dy[rows, self.index]
        else:
            dx = np.zeros((N * C, bottom[0].count // (N * C)))
            np.add.at(dx, (rows, self.src[None, :]), dy[:, self.dst] * self.wt)
        bottom[0].diff[...] = dx.reshape(bottom[0].shape)


@register_layer("EltwiseAccuracy")
class EltwiseAccuracyLayer(Layer):
    """Pixel-wise top-k accuracy of scores (N x C x H x W) against labels (N x 1 x H x W):
    the share of the non-ignored pixels whose label is among the k highest scores (on ties the
    higher class ranks first, as the fork's pair sort). Top: 1 x 1 x 1 x 1. No backward.

    prototxt: ``eltwise_accuracy_param { top_k: 1 ignore_label }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.eltwise_accuracy_param
        self.top_k = int(p.top_k)
        self.ignore = int(p.ignore_label) if p.HasField("ignore_label") else None

    def reshape(self, bottom, top):
        s, lab = bottom
        if s.num_axes != 4 or lab.num_axes != 4 or lab.shape[1] != 1 or \
                lab.shape[0] != s.shape[0] or lab.shape[2:] != s.shape[2:]:
            raise self.error("scores %s and labels %s: expected N x C x H x W and N x 1 x H x W"
                             % (s.shape, lab.shape), ShapeError)
        if not 0 < self.top_k <= s.shape[1]:
            raise self.error("top_k %d must be in [1, %d]" % (self.top_k, s.shape[1]))
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        s = bottom[0].data
        N, C = s.shape[:2]
        scores = s.reshape(N, C, -1).transpose(0, 2, 1).reshape(-1, C)
        top[0].data[...] = _top_k_rate(scores, bottom[1].data, self.top_k, self.ignore)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def _top_k_rate(scores, labels, top_k, ignore):
    """The share of rows of ``scores`` (rows x classes) whose label is among the top_k classes,
    rows labelled ``ignore`` left out. The fork sorts (score, class) pairs descending: on ties
    the higher class comes first."""
    labels = labels.reshape(-1).astype(np.int64)
    keep = np.ones(labels.shape, bool) if ignore is None else labels != ignore
    C = scores.shape[1]
    order = C - 1 - np.argsort(-scores[:, ::-1], axis=1, kind="stable")[:, :top_k]
    hit = (order == labels[:, None]).any(axis=1) & keep
    return hit.sum() / max(int(keep.sum()), 1)


@register_layer("BinaryAccuracy")
class BinaryAccuracyLayer(Layer):
    """Binary scores against 0 / 1 labels of the same shape: a score > 0 predicts 1. With the
    counts of true / false positives / negatives (labels other than 0 and 1 count in none) the
    top is, by ``binary_accuracy_param { accuracy_mode }``: Accuracy (tp + tn) / (all four),
    Precision tp / (tp + fp), Recall tp / (tp + fn) or F_measure 2 P R / (P + R); an empty
    denominator gives NaN, as the fork's 0 / 0. Top: 1 x 1 x 1 x 1. No backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].shape != bottom[1].shape:
            raise self.error("scores %s and labels %s must have one shape"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        pred = bottom[0].data.ravel() > 0
        lab = bottom[1].data.ravel().astype(np.int64)     # the fork's static_cast<int>
        tp = float(np.sum(pred & (lab == 1)))
        fn = float(np.sum(~pred & (lab == 1)))
        tn = float(np.sum(~pred & (lab == 0)))
        fp = float(np.sum(pred & (lab == 0)))
        P = self.layer_param.binary_accuracy_param
        mode = P.accuracy_mode
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.float64(tp) / (tp + fp)
            recall = np.float64(tp) / (tp + fn)
            if mode == P.Accuracy:
                value = np.float64(tp + tn) / (tp + fn + tn + fp)
            elif mode == P.Precision:
                value = precision
            elif mode == P.Recall:
                value = recall
            else:
                value = 2 * precision * recall / (precision + recall)
        top[0].data[...] = value

    def backward_cpu(self, top, propagate_down, bottom):
        pass


def _groups(red, cls):
    """The fork's channel ranges [k R / K, min(R, (k + 1) R / K)) of class k (R channels, K
    classes, integer division)."""
    return [(k * red // cls, min(red, (k + 1) * red // cls)) for k in range(cls)]


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _check_scores_labels(layer, s, lab):
    if s.num_axes != 4 or lab.count != s.shape[0] * s.shape[2] * s.shape[3] or \
            lab.shape[0] != s.shape[0]:
        raise layer.error("scores %s and labels %s: expected N x C x H x W and N x 1 x H x W"
                          % (s.shape, lab.shape), ShapeError)


@register_layer("RedAccuracy")
class RedAccuracyLayer(Layer):
    """Pixel-wise top-k accuracy over "reduced" classes: the softmax of R score channels is summed
    per class k over channels [k R / K, min(R, (k + 1) R / K)) (K = ``class_num``, default R), and
    a pixel is right when its label is among the k classes of highest sum (ties: the higher class
    first, as the fork's pair sort). Share of the non-ignored pixels. Top: 1 x 1 x 1 x 1.

    prototxt: ``red_accuracy_param { top_k: 1 ignore_label class_num }``. No backward.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.red_accuracy_param
        self.top_k = int(p.top_k)
        self.ignore = int(p.ignore_label) if p.HasField("ignore_label") else None
        self.red = bottom[0].shape[1]
        self.cls = int(p.class_num) if p.HasField("class_num") else self.red
        if not 0 < self.cls:
            raise self.error("class_num must be positive")

    def reshape(self, bottom, top):
        _check_scores_labels(self, bottom[0], bottom[1])
        if not 0 < self.top_k <= self.cls:
            raise self.error("top_k %d must be in [1, %d]" % (self.top_k, self.cls))
        top[0].reshape((1, 1, 1, 1))

    def forward_cpu(self, bottom, top):
        s = bottom[0].data.astype(np.float64)
        N, C = s.shape[:2]
        prob = _softmax(s).reshape(N, C, -1)
        sums = np.stack([prob[:, a:b].sum(axis=1) for a, b in _groups(self.red, self.cls)], 1)
        sums = sums.transpose(0, 2, 1).reshape(-1, self.cls)
        top[0].data[...] = _top_k_rate(sums, bottom[1].data, self.top_k, self.ignore)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("RedSoftmaxWithLoss")
class RedSoftmaxWithLossLayer(LossLayer):
    """Softmax loss over "reduced" classes: p = softmax of the R score channels per pixel, S the
    sum of p over the label's channel range [l R / K, min(R, (l + 1) R / K)) (K =
    ``red_softmax_loss_param { class_num }``, default R); loss = -sum log max(S, FLT_MIN) over the
    pixels whose label is not ``loss_param { ignore_label }``, divided by their count
    (``loss_param { normalize: true }``, the default) or by N. dL/dx_c = p_c - [c in range] p_c / S
    (0 at ignored pixels), times the loss weight over the same divisor. No pixel counted: 0 (the
    fork divides 0 by 0). Bottoms: scores N x R x H x W, labels N x 1 x H x W. Tops: loss
    [, the softmax].
    """
    exact_num_top_blobs = None
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        lp = self.layer_param.loss_param
        self.ignore = int(lp.ignore_label) if lp.HasField("ignore_label") else None
        self.normalize = lp.normalize if lp.HasField("normalize") else True   # the fork's
        p = self.layer_param.red_softmax_loss_param
        self.red = bottom[0].shape[1]
        self.cls = int(p.class_num) if p.HasField("class_num") else self.red
        if not 0 < self.cls:
            raise self.error("class_num must be positive")

    def reshape(self, bottom, top):
        _check_scores_labels(self, bottom[0], bottom[1])
        top[0].reshape(())
        if len(top) > 1:
            top[1].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        s = bottom[0].data.astype(np.float64)
        N, C = s.shape[:2]
        prob = _softmax(s).reshape(N, C, -1)
        labels = bottom[1].data.reshape(N, -1).astype(np.int64)
        keep = np.ones(labels.shape, bool) if self.ignore is None else labels != self.ignore
        if np.any(keep & ((labels < 0) | (labels >= self.cls))):
            raise self.error("a label is outside [0, %d)" % self.cls)
        member = np.zeros(prob.shape, bool)         # member[n, c, j]: c is in j's label range
        for k, (a, b) in enumerate(_groups(self.red, self.cls)):
            member[:, a:b] |= ((labels == k) & keep)[:, None, :]
        total = (prob * member).sum(axis=1)
        self.count = int(keep.sum())
        loss = -np.log(np.maximum(total[keep], _FLT_MIN)).sum()
        self.denom = max(self.count, 1) if self.normalize else N
        top[0].data[...] = loss / self.denom
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = prob - np.where(member, prob / total[:, None, :], 0.0)
        grad[np.broadcast_to(~keep[:, None, :], grad.shape)] = 0
        self.grad = grad
        if len(top) > 1:
            top[1].data[...] = prob.reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1]:
            raise self.error("cannot backpropagate to the label input")
        if propagate_down[0]:
            g = self.grad * (float(top[0].diff) / self.denom)
            bottom[0].diff[...] = g.reshape(bottom[0].shape)


@register_layer("DropoutChannel")
class DropoutChannelLayer(NeuronLayer):
    """Dropout of whole feature maps: in TRAIN each (n, c) map is kept when a uniform draw
    exceeds p (``dropout_param { dropout_ratio }``) and scaled by 1 / (1 - p); TEST passes x
    through. dL/dx uses the same mask and scale. Bottom and top: N x C x H x W.
    """

    def layer_setup(self, bottom, top):
        self.ratio = self.layer_param.dropout_param.dropout_ratio
        if not 0 < self.ratio < 1:
            raise self.error("dropout_ratio must be in (0, 1), got %g" % self.ratio)
        self.train = self.phase == self._caffe_pb2.TRAIN
        self.mask = None

    def _mask(self, shape):
        keep = self.rng().random(shape[:2]) > self.ratio
        return keep.reshape(shape[:2] + (1,) * (len(shape) - 2)) / (1.0 - self.ratio)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.train:
            self.mask = self._mask(x.shape)
            top[0].data[...] = x * self.mask
        else:
            top[0].data[...] = x

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            dy = top[0].diff
            bottom[0].diff[...] = dy * self.mask if self.train else dy
