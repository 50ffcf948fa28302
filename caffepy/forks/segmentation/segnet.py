"""SegNet's layers (alexgkendall/caffe-segnet): its BN, the pooling-mask Upsample, DenseImageData,
and Bayesian SegNet's test-time dropout.

``BN`` and ``Upsample`` are type names that PSPNet (BN) and the YOLO forks (Upsample) use too, with
other math; SegNet's classes are variants chosen per layer (``register_variant``):
- BN is SegNet's when its ``bn_param`` sets ``bn_mode``, ``scale_filler`` or ``shift_filler``,
  when the layer has more than one top, or when it sets none of PSPNet's fields (``slope_filler``,
  ``bias_filler``, ``momentum``, ``eps``, ``frozen``) and declares exactly 2 ParamSpecs (SegNet's
  scale and shift); a bare ``type: "BN"`` stays PSPNet's; one that sets ``var_eps``,
  ``moving_average``, ``decay`` or ``axis`` is ChenglongChen/caffe-windows' (caffepy.forks.misc.ewma_bn);
- Upsample is SegNet's when it has two bottoms (values and pooling mask).
"""
import numpy as np

from ... import common, fillers
from ...data.image import read_image
from ...data.state import ListLoaderState
from ...errors import CaffeError, ShapeError
from ...layers.base import Layer, register_layer, register_variant
from ...layers.data import BasePrefetchingDataLayer, _ensure
from ...layers.loss import FLT_MIN, SoftmaxWithLossLayer
from ...layers.neuron import DropoutLayer

_PSP_FIELDS = ("slope_filler", "bias_filler", "momentum", "eps", "frozen")
_SEG_FIELDS = ("bn_mode", "scale_filler", "shift_filler")
_EWMA_FIELDS = ("var_eps", "moving_average", "decay", "axis")


def _is_segnet_bn(lp):
    p = lp.bn_param
    if any(p.HasField(f) for f in _EWMA_FIELDS):       # ChenglongChen/caffe-windows' 4-blob BN
        return False
    if any(p.HasField(f) for f in _SEG_FIELDS) or len(lp.top) > 1:
        return True
    return not any(p.HasField(f) for f in _PSP_FIELDS) and len(lp.param) == 2


def _legacy(shape):
    """Caffe's num / channels / height / width of a blob of at most 4 axes (1 for a missing
    axis), the 4-d shape SegNet's BN reads and gives its top."""
    return tuple(shape) + (1,) * (4 - len(shape))


@register_variant("BN", _is_segnet_bn)
class SegNetBNLayer(Layer):
    """SegNet's BN: batch normalisation with its own scale and shift.

    LEARN:     y = scale (x - mu) / sqrt(var + 1e-9) + shift, mu and var = E[x^2] - E[x]^2 the
               batch statistics of each channel (over N, H, W), in every phase.
    INFERENCE: y = scale x + shift (SegNet's compute_bn_statistics.py folds the averaged
               statistics into scale and shift before a net is run this way).
    Gradients: d scale += sum(dy x_hat) (LEARN) or sum(dy x) (INFERENCE); d shift += sum(dy);
    LEARN dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + 1e-9) with g = scale dy;
    INFERENCE dx = scale dy.

    prototxt: ``bn_param { bn_mode: LEARN scale_filler shift_filler }`` (fillers default
    constant 0, as Caffe's FillerParameter). Blobs: bottom x (N, C, H, W; a bottom of fewer axes is
    read through Caffe's legacy accessors, its missing axes 1, as the fork reads it); top y
    (N, C, H, W, 4-d as the fork gives it) [, batch mean (1, C, 1, 1), batch variance
    (1, C, 1, 1): LEARN only].
    Params: scale, shift, each (1, C, 1, 1).
    """
    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 3
    eps = 1e-9

    def layer_setup(self, bottom, top):
        p = self.layer_param.bn_param
        self.learn = p.bn_mode == p.LEARN
        if len(top) > 1 and not self.learn:
            raise self.error("only bn_mode LEARN has the mean / variance tops")
        if not 1 <= bottom[0].num_axes <= 4:
            raise self.error("BN takes a bottom of at most 4 axes (N x C x H x W), got %s"
                             % (bottom[0].shape,), ShapeError)
        self.channels = _legacy(bottom[0].shape)[1]
        if not self.blobs:
            self.blobs = [self.new_blob((1, self.channels, 1, 1)) for _ in range(2)]
            fillers.fill(self.blobs[0], p.scale_filler)
            fillers.fill(self.blobs[1], p.shift_filler)
        for b in self.blobs:
            if b.count != self.channels:
                raise self.error("scale / shift have %d values, the bottom %d channels"
                                 % (b.count, self.channels), ShapeError)
        self.param_propagate_down = [True, True]

    def reshape(self, bottom, top):
        if not 1 <= bottom[0].num_axes <= 4 or _legacy(bottom[0].shape)[1] != self.channels:
            raise self.error("bottom shape %s does not fit %d channels"
                             % (bottom[0].shape, self.channels), ShapeError)
        top[0].reshape(_legacy(bottom[0].shape))
        for t in top[1:]:
            t.reshape(1, self.channels, 1, 1)

    def _params(self):
        return [b.data.reshape(1, -1, 1, 1) for b in self.blobs]

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(top[0].shape)
        scale, shift = self._params()
        if not self.learn:
            top[0].data[...] = scale * x + shift
            return
        mu = x.mean(axis=(0, 2, 3), keepdims=True)
        var = np.square(x).mean(axis=(0, 2, 3), keepdims=True) - np.square(mu)
        self.std = np.sqrt(var + self.eps)
        self.x_hat = (x - mu) / self.std
        top[0].data[...] = scale * self.x_hat + shift
        if len(top) > 1:
            top[1].data[...] = mu
        if len(top) > 2:
            top[2].data[...] = var

    def backward_cpu(self, top, propagate_down, bottom):
        dy = top[0].diff
        scale = self._params()[0]
        x_hat = self.x_hat if self.learn else bottom[0].data.reshape(dy.shape)
        if self.param_propagate_down[0]:
            self.blobs[0].diff.reshape(-1)[...] += (dy * x_hat).sum(axis=(0, 2, 3))
        if self.param_propagate_down[1]:
            self.blobs[1].diff.reshape(-1)[...] += dy.sum(axis=(0, 2, 3))
        if not propagate_down[0]:
            return
        g = dy * scale
        if not self.learn:
            bottom[0].diff[...] = g.reshape(bottom[0].shape)
            return
        axes = (0, 2, 3)
        bottom[0].diff[...] = ((g - g.mean(axis=axes, keepdims=True)
                                - x_hat * (g * x_hat).mean(axis=axes, keepdims=True))
                               / self.std).reshape(bottom[0].shape)


@register_variant("Upsample", lambda lp: len(lp.bottom) == 2)
class SegNetUpsampleLayer(Layer):
    """SegNet's Upsample: max-unpooling driven by a Pooling layer's mask top.

        y = 0;  y[n, c].flat[mask[n, c, i]] = x[n, c].flat[i];   dx[n, c, i] = dy[n, c].flat[mask]

    Output size: ``upsample_h`` x ``upsample_w`` when both are set; else H scale_h - pad_out_h by
    W scale_w - pad_out_w, with scale_h = scale_w = ``scale`` (default 2) unless scale_h and
    scale_w are given (pad_out_* only with a scale of 2).
    prototxt: ``upsample_param { scale: 2 scale_h scale_w pad_out_h: false pad_out_w: false
    upsample_h upsample_w }``. Bottoms: x (N, C, H, W), mask (N, C, H, W) (the index h W' + w
    into each output plane, as Pooling's second top). Top: (N, C, Ho, Wo).
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.upsample_param
        has = p.HasField
        self.size = None
        if has("upsample_h") and has("upsample_w"):
            self.size = (int(p.upsample_h), int(p.upsample_w))
            if min(self.size) <= 1:
                raise self.error("upsample_h and upsample_w must be > 1")
            return
        if has("scale_h") != has("scale_w") or (has("scale_h") and has("scale")):
            raise self.error("give upsample_h and upsample_w, or scale, or scale_h and scale_w")
        s = int(p.scale) if has("scale") else 2
        self.scales = (int(p.scale_h), int(p.scale_w)) if has("scale_h") else (s, s)
        self.pads = (int(p.pad_out_h), int(p.pad_out_w))
        if min(self.scales) <= 1:
            raise self.error("the upsampling scale must be > 1, got %s" % (self.scales,))
        for pad, scale in zip(self.pads, self.scales):
            if pad and scale != 2:
                raise self.error("pad_out_h / pad_out_w need a scale of 2")

    def reshape(self, bottom, top):
        x, mask = bottom
        if x.num_axes != 4 or x.shape != mask.shape:
            raise self.error("values %s and mask %s must be equal N x C x H x W shapes"
                             % (x.shape, mask.shape), ShapeError)
        N, C, H, W = x.shape
        if self.size is not None:
            ho, wo = self.size
        else:
            ho, wo = H * self.scales[0] - self.pads[0], W * self.scales[1] - self.pads[1]
        top[0].reshape(N, C, ho, wo)

    def _index(self, bottom, top):
        N, C = bottom[0].shape[:2]
        plane = top[0].shape[2] * top[0].shape[3]
        idx = bottom[1].data.reshape(N * C, -1).astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= plane):
            raise self.error("mask index %d out of range for a %dx%d output: the scale does not "
                             "match the pooling layer's" % (idx.max() if idx.max() >= plane
                                                           else idx.min(), *top[0].shape[2:]))
        return idx + (np.arange(N * C) * plane)[:, None]

    def forward_cpu(self, bottom, top):
        self.idx = self._index(bottom, top)
        top[0].data[...] = 0
        top[0].data.reshape(-1)[self.idx.reshape(-1)] = bottom[0].data.reshape(-1)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff.reshape(-1)[...] = top[0].diff.reshape(-1)[self.idx.reshape(-1)]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_variant("Dropout", lambda lp: lp.dropout_param.sample_weights_test)
class SampledDropoutLayer(DropoutLayer):
    """Bayesian SegNet's Monte Carlo dropout: with ``dropout_param { sample_weights_test: true }``
    the layer drops units in TEST exactly as in TRAIN (mask, scale 1 / (1 - p)), so that repeated
    forward passes sample the posterior. Otherwise it is Caffe's Dropout."""

    def layer_setup(self, bottom, top):
        super(SampledDropoutLayer, self).layer_setup(bottom, top)
        self.train = True

    def forward_gpu(self, bottom, top):  # the parent's GPU kernel would skip this variant's step
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)


@register_variant("SoftmaxWithLoss", lambda lp: lp.loss_param.weight_by_label_freqs)
class ClassWeightedSoftmaxWithLossLayer(SoftmaxWithLossLayer):
    """SegNet's class-balanced SoftmaxWithLoss (``loss_param { weight_by_label_freqs: true
    class_weighting: w_0 ... w_{C-1} }``, one weight per class):

        loss = -sum_{i valid} w[label_i] log(max(p[i, label_i], FLT_MIN)) / normalizer
        dx_i = w[label_i] (p_i - onehot(label_i)) * top_diff / normalizer

    The normalizer is Caffe's (``normalize: true``: the number of non-ignored labels, not the sum
    of their weights). Everything else is SoftmaxWithLoss.
    """

    def layer_setup(self, bottom, top):
        super(ClassWeightedSoftmaxWithLossLayer, self).layer_setup(bottom, top)
        self.class_weight = np.asarray(self.layer_param.loss_param.class_weighting, np.float64)

    def reshape(self, bottom, top):
        super(ClassWeightedSoftmaxWithLossLayer, self).reshape(bottom, top)
        if self.class_weight.size != self.channels:
            raise self.error("%d class_weighting values for %d classes"
                             % (self.class_weight.size, self.channels))

    def forward_cpu(self, bottom, top):
        self._softmax(bottom, top)
        p = self._label_prob()
        self.w = np.where(self.valid, self.class_weight[np.where(self.valid, self.labels, 0)], 0)
        self.norm = self._normalizer(int(self.valid.sum()))
        top[0].data[...] = -np.sum(np.log(np.maximum(p, FLT_MIN)) * self.w) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        valid = self.valid
        self.valid = self.w  # the parent scales each position's gradient by this mask
        try:
            super(ClassWeightedSoftmaxWithLossLayer, self).backward_cpu(top, propagate_down,
                                                                        bottom)
        finally:
            self.valid = valid

    def forward_gpu(self, bottom, top):  # the parent's GPU kernel has no class weights
        self.forward_cpu(bottom, top)

    def backward_gpu(self, top, propagate_down, bottom):
        self.backward_cpu(top, propagate_down, bottom)


class _DenseLoader(ListLoaderState):
    """Image / label-image pairs for DenseImageData (runs on the prefetch thread after setup)."""

    def __init__(self, layer):
        p = layer.layer_param.dense_image_data_param
        tp = layer.layer_param.transform_param
        self.what, self.p, self.dtype = layer.describe(), p, layer.dtype
        self.train = layer.phase == layer._caffe_pb2.TRAIN
        self.mirror = tp.mirror
        self.scale = tp.scale
        self.mean = np.asarray(tp.mean_value, dtype=np.float64)
        crop = int(tp.crop_size)
        self.crop = (crop, crop) if crop else (int(p.crop_height), int(p.crop_width))
        self.read_lines(p.source, 2, "'<image> <label image>'")
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.pos = int(self.rng.integers(0, p.rand_skip)) % len(self.lines) if p.rand_skip else 0
        if p.shuffle:
            self.shuffle_lines()

    def _pair(self, i):
        p = self.p
        img = read_image(p.root_folder + self.lines[i][0], p.new_height, p.new_width, p.is_color)
        lab = read_image(p.root_folder + self.lines[i][1], p.new_height, p.new_width, False)
        if img.shape[:2] != lab.shape[:2]:
            raise CaffeError("%s: image %s and label %s differ in size" % ((self.what,)
                                                                          + self.lines[i]))
        return img.transpose(2, 0, 1).astype(np.float64), lab[:, :, 0].astype(np.float64)

    def data_shape(self):
        img, _ = self._pair(self.pos)
        if self.mean.size not in (0, 1, img.shape[0]):
            raise CaffeError("%s: %d mean_value entries for %d channels"
                             % (self.what, self.mean.size, img.shape[0]))
        h, w = self.crop if self.crop[0] else img.shape[1:]
        if h > img.shape[1] or w > img.shape[2]:
            raise CaffeError("%s: crop %dx%d exceeds the image %dx%d"
                             % (self.what, h, w, img.shape[1], img.shape[2]))
        return (int(self.p.batch_size), img.shape[0], h, w)

    def load_batch(self, buf):
        shape = self.data_shape()
        data = _ensure(buf, "data", shape, self.dtype)
        label = _ensure(buf, "label", (shape[0], 1) + shape[2:], self.dtype)
        for b in range(shape[0]):
            img, lab = self._pair(self.pos)
            H, W = img.shape[1:]
            h, w = shape[2:]
            if self.train:
                y0, x0 = int(self.rng.integers(0, H - h + 1)), int(self.rng.integers(0, W - w + 1))
            else:
                y0, x0 = (H - h) // 2, (W - w) // 2
            img, lab = img[:, y0:y0 + h, x0:x0 + w], lab[y0:y0 + h, x0:x0 + w]
            if self.mirror and self.train and self.rng.integers(0, 2):
                img, lab = img[:, :, ::-1], lab[:, ::-1]
            if self.mean.size:
                img = img - self.mean.reshape(-1, 1, 1)
            data[b] = img * self.scale
            label[b, 0] = lab
            self.pos = (self.pos + 1) % len(self.lines)
            if self.pos == 0 and self.p.shuffle:
                self.shuffle_lines()


@register_layer("DenseImageData")
class DenseImageDataLayer(BasePrefetchingDataLayer):
    """SegNet's data layer: an image and its per-pixel label image per list line.

    Each line of ``source`` is ``<image> <label image>`` (paths after ``root_folder``). Images are
    BGR (gray when ``is_color: false``), labels gray; both resized (bilinear, as SegNet's
    cv::resize) when new_height and new_width are set. The same crop (``transform_param
    crop_size``, or ``crop_height`` x ``crop_width``; random in TRAIN, centred in TEST) and the same
    random mirror (TRAIN, ``transform_param mirror``) apply to both; the image then has
    ``transform_param mean_value`` subtracted and is multiplied by ``transform_param scale``.
    prototxt: ``dense_image_data_param { source batch_size rand_skip: 0 shuffle: false
    new_height: 0 new_width: 0 is_color: true root_folder: "" crop_width: 0 crop_height: 0 }``.
    Tops: data (N, C, h, w), label (N, 1, h, w).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.dense_image_data_param
        if p.batch_size < 1:
            raise self.error("dense_image_data_param.batch_size must be positive")
        if bool(p.crop_height) != bool(p.crop_width):
            raise self.error("crop_height and crop_width must be set together")
        if self.layer_param.transform_param.mean_file or p.mean_file:
            raise self.error("mean_file is not supported here; give transform_param mean_value")
        if getattr(p, "label_divide_factor", 1) != 1:      # ENet's caffe: labels read smaller
            raise self.error("label_divide_factor %d (ENet) is not supported by this reader; "
                             "its nets build with data layers swapped for inputs"
                             % p.label_divide_factor)
        try:
            return _DenseLoader(self)
        except CaffeError as e:
            raise self.error(str(e))

    def layer_setup(self, bottom, top):
        super(DenseImageDataLayer, self).layer_setup(bottom, top)
        shape = top[0].shape
        top[1].reshape((shape[0], 1) + tuple(shape[2:]))
