"""DeepLab v1 (deeplab-public; e.g. TheLegendAli/DeepLab-Context): its ``Padding`` layer and its
SoftmaxWithLoss with ``softmaxloss_param``. Its ``hole`` convolution field is read by the
Convolution layer (``conv_base._hole``); its V1 types load through ``caffepy.proto.upgrade``.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer, register_variant
from ...layers.loss import SoftmaxWithLossLayer, class_labels


@register_layer("Padding")
class PaddingLayer(Layer):
    """y[n, c, h, w] = x[n, c, h - pad_beg, w - pad_beg] where that is inside x, else 0; the output
    is (H + pad_beg + pad_end) x (W + pad_beg + pad_end). Negative pads crop. dx is dy read back.

    prototxt: ``padding_param { pad_beg: 0 pad_end: 0 }``. Bottom (N x C x H x W), top.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.padding_param
        self.beg, self.end = int(p.pad_beg), int(p.pad_end)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes != 4:
            raise self.error("bottom must be N x C x H x W, got %s" % (x.shape,), ShapeError)
        h, w = (s + self.beg + self.end for s in x.shape[2:])
        if h <= 0 or w <= 0:
            raise self.error("padding makes the output %d x %d" % (h, w), ShapeError)
        top[0].reshape(x.shape[:2] + (h, w))
        # the overlapping window: source and destination slices per spatial axis
        self.src, self.dst = [], []
        for size in x.shape[2:]:
            lo, hi = max(0, -self.beg), min(size, size + self.end)
            self.src.append(slice(lo, hi))
            self.dst.append(slice(lo + self.beg, hi + self.beg))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = 0
        top[0].data[(Ellipsis,) + tuple(self.dst)] = bottom[0].data[(Ellipsis,) + tuple(self.src)]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            bottom[0].diff[(Ellipsis,) + tuple(self.src)] = top[0].diff[(Ellipsis,) + tuple(self.dst)]


@register_variant("SoftmaxWithLoss", lambda lp: lp.HasField("softmaxloss_param"))
class DeepLabV1SoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """DeepLab v1's SoftmaxWithLoss: several ignored labels, loss normalised by the pixels kept.

        loss = -sum_{i kept} log(max(p[i, label_i], FLT_MIN)) / (number kept)
        dx = (p - onehot(label)) * top_diff / (number kept), 0 at ignored pixels

    prototxt: ``softmaxloss_param { ignore_label: [] weight_source }`` (the fork's per-class
    weights file ``weight_source`` is refused). Bottoms and tops as SoftmaxWithLoss.
    """

    def layer_setup(self, bottom, top):
        SoftmaxWithLossLayer.layer_setup(self, bottom, top)
        p = self.layer_param.softmaxloss_param
        if p.weight_source:
            raise self.error("softmaxloss_param.weight_source (DeepLab v1 class weights) is not "
                             "supported")
        self.ignored = set(int(v) for v in p.ignore_label)
        self.normalization = type(self.layer_param.loss_param).VALID

    def forward_cpu(self, bottom, top):
        labels = bottom[1].data.reshape(self.outer, self.inner).astype(np.int64)
        self.ignore_label = None
        mask = ~np.isin(labels, list(self.ignored)) if self.ignored else None
        SoftmaxWithLossLayer._softmax(self, bottom, top) if mask is None else self._softmax_masked(
            bottom, top, labels, mask)
        p = self._label_prob()
        self.norm = float(max(1, int(self.valid.sum())))
        top[0].data[...] = -np.sum(np.log(np.maximum(p, np.finfo(np.float32).tiny))[self.valid]) \
            / self.norm

    def _softmax_masked(self, bottom, top, labels, mask):
        from ...layers.softmax import softmax
        self.prob = softmax(bottom[0].data.reshape(self.outer, self.channels, self.inner), axis=1)
        if len(top) >= 2:
            top[1].data[...] = self.prob.reshape(top[1].shape)
        kept = np.where(mask, labels, 0)
        self.labels, _ = class_labels(self, _Data(kept), kept.shape, self.channels, None)
        self.valid = mask


class _Data(object):
    def __init__(self, data):
        self.data = data
