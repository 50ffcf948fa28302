"""Face-landmark regression layers of goodluckcwl/custom-caffe (the Caffe of
goodluckcwl/Face-alignment-mobilenet-v2): the ImageFloatData reader with its regression transform
(``transform_param.pad_ratio``) and WeightEuclideanLoss.

Landmark vectors are laid out as the fork's: K x coordinates, then K y coordinates.
"""
import re

import numpy as np

from ... import common
from ...data.datum import read_mean
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import LossLayer, register_layer
from ...layers.data import BasePrefetchingDataLayer
from ...proto import caffe_pb2

_FLOAT = re.compile(r"\s*([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)")


def _atof(text):
    m = _FLOAT.match(text)
    return float(m.group(1)) if m else 0.0


def parse_line(line):
    """The fork's list-line parse: the name up to the first space, then one value per space,
    atof of what follows it (so a doubled or trailing space adds a value, as in the fork)."""
    pos = line.find(" ")
    if pos < 0:
        return line, []
    name, rest = line[:pos], line[pos:]
    values, at = [], rest.find(" ")
    while at >= 0:
        values.append(_atof(rest[at + 1:]))
        rest = rest[at + 1:]
        at = rest.find(" ")
    return name, values


def _crop(tp):
    ch = cw = int(tp.crop_size) if tp.HasField("crop_size") else 0
    if tp.HasField("crop_h"):
        ch = int(tp.crop_h)
    if tp.HasField("crop_w"):
        cw = int(tp.crop_w)
    return ch, cw


def top_shapes(lp, default_shape, batch_size=None):
    """ImageFloatData's tops (DataLayerSetUp): data N x C x H x W (C 3 or 1 by is_color, + 1
    with with_heatmap; H x W the crop, else new_height x new_width, else the image's),
    labels N x label_dim, with a third top the weights N."""
    idp, fp, tp = lp.image_data_param, lp.image_float_data_param, lp.transform_param
    n = int(batch_size) if batch_size is not None else int(idp.batch_size or 1)
    c = (3 if idp.is_color else 1) + (1 if fp.with_heatmap else 0)
    h, w = default_shape[1:]
    if idp.new_height and idp.new_width:
        h, w = int(idp.new_height), int(idp.new_width)
    ch, cw = _crop(tp)
    h, w = ch or h, cw or w
    return [(n, c, h, w), (n, int(fp.label_dim)), (n,)][:len(lp.top)]


class _Loader(ListLoaderState):
    def __init__(self, layer):
        lp = layer.layer_param
        self.p, self.fp, self.tp = lp.image_data_param, lp.image_float_data_param, lp.transform_param
        self.dtype, self.what, self.phase = layer.dtype, layer.describe(), layer.phase
        self.weights = len(layer._top) == 3
        self.dim = int(self.fp.label_dim)
        want = self.dim + (1 if self.fp.hard_sample else 0)
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        try:
            with open(self.p.source) as f:
                text = f.read().split("\n")
        except OSError as e:
            raise CaffeError("cannot open image list %s: %s" % (self.p.source, e))
        if text and text[-1] == "":
            text.pop()
        self.lines = []
        for lineno, line in enumerate(text, 1):
            name, values = parse_line(line.rstrip("\r"))
            if len(values) != want:
                raise CaffeError("%s:%d: %d values after the image name, label_dim%s wants %d"
                                 % (self.p.source, lineno, len(values),
                                    " + 1 (hard_sample)" if self.fp.hard_sample else "", want))
            self.lines.append((name, tuple(values)))
        if not self.lines:
            raise CaffeError("image list %s is empty" % self.p.source)
        self.remember_lines()
        if self.p.shuffle:
            self.shuffle_lines()
        self.pos = int(common.rng().integers(0, self.p.rand_skip)) if self.p.rand_skip else 0
        self.mean = read_mean(self.tp.mean_file) if self.tp.HasField("mean_file") else None
        self.means = list(self.tp.mean_value)
        self.shape = None
        self.shape = self._image(self.lines[self.pos][0]).shape

    def _image(self, name):
        """The image (H x W x C, BGR, resized) with the heat map as a last channel; None when
        the heat map cannot be read (the fork skips the line)."""
        p = self.p
        img = read_image(p.root_folder + name, p.new_height, p.new_width, p.is_color)
        if self.fp.with_heatmap:
            try:
                hm = read_image(self.fp.heatmap_dir + name, p.new_height, p.new_width, False)
            except CaffeError:
                if self.shape is None:      # setup: an empty map of the image's size
                    hm = np.zeros(img.shape[:2] + (1,), np.uint8)
                else:
                    return None
            img = np.concatenate([img, hm], axis=2)
        return img

    def data_shape(self):
        ih, iw, c = self.shape
        ch, cw = _crop(self.tp)
        return (int(self.p.batch_size), c, ch or ih, cw or iw)

    def transform(self, img, label, out):
        """DataTransformer::Transform(cv_img, blob, label, transformed_label): crop, or in TRAIN
        the random pad_ratio zoom-out; mirror (image only); (x - mean) * scale."""
        tp = self.tp
        ih, iw, c = img.shape
        ch, cw = _crop(tp)
        label = np.asarray(label, np.float32)
        h_off = w_off = 0
        if ch or cw:
            if self.phase == caffe_pb2.TRAIN:
                h_off = int(self.rng.integers(0, ih - ch + 1))
                w_off = int(self.rng.integers(0, iw - cw + 1))
            else:
                h_off, w_off = (ih - ch) // 2, (iw - cw) // 2
            img = img[h_off:h_off + ch, w_off:w_off + cw]
        elif self.phase == caffe_pb2.TRAIN and tp.pad_ratio > np.finfo(np.float32).tiny:
            interval = max(int(np.float32(ih) * np.float32(tp.pad_ratio)), 1)
            pad = int(self.rng.integers(0, 2 * interval + 1)) - interval
            if pad > 0:
                k = len(label) // 2
                label = label * np.float32(ih)
                left = int(self.rng.integers(0, 2 * pad + 1))
                top = int(self.rng.integers(0, 2 * pad + 1))
                padded = np.zeros((ih + 2 * pad, iw + 2 * pad, c), img.dtype)
                padded[top:top + ih, left:left + iw] = img
                label[:k] += left
                label[k:2 * k] += top
                img = resize_bilinear(padded, ih, iw)
                label = label / (np.float32(padded.shape[0]) / np.float32(ih) * np.float32(ih))
        mirror = bool(tp.mirror) and bool(self.rng.integers(0, 2))
        x = img.transpose(2, 0, 1).astype(np.float32)
        if self.mean is not None:
            if self.mean.shape != (c, ih, iw):
                raise CaffeError("mean_file %s has shape %s, the images are %s"
                                 % (tp.mean_file, self.mean.shape, (c, ih, iw)))
            x = x - self.mean[:, h_off:h_off + x.shape[1], w_off:w_off + x.shape[2]]
        elif self.means:
            if len(self.means) not in (1, c):
                raise CaffeError("specify either 1 mean_value or as many as channels: %d" % c)
            x = x - np.asarray(self.means * (c if len(self.means) == 1 else 1),
                               np.float32)[:, None, None]
        x = x * np.float32(tp.scale)
        out[...] = x[:, :, ::-1] if mirror else x
        return label

    def load_batch(self, buf):
        n, c, h, w = self.data_shape()
        data = buf.get("data")
        if data is None or data.shape != (n, c, h, w):
            data = buf["data"] = np.zeros((n, c, h, w), self.dtype)
        label = buf.get("label")
        if label is None or label.shape != (n, self.dim):
            label = buf["label"] = np.zeros((n, self.dim), self.dtype)
        weight = buf.setdefault("weight", np.zeros((n,), self.dtype))
        for b in range(n):
            while True:
                name, values = self.lines[self.pos]
                img = self._image(name)
                self._advance()
                if img is not None and img.shape[2] == c:
                    break
            vals = values[:self.dim]
            if self.fp.hard_sample:
                weight[b] = values[-1]
            label[b] = self.transform(img, vals, data[b])

    def _advance(self):
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.p.shuffle:
                self.shuffle_lines()


@register_layer("ImageFloatData")
class ImageFloatDataLayer(BasePrefetchingDataLayer):
    """Images with real-valued label vectors (goodluckcwl/custom-caffe,
    src/caffe/layers/image_float_data_layer.cpp and the regression Transform of
    src/caffe/data_transformer.cpp).

    ``image_data_param { source root_folder batch_size new_height new_width is_color shuffle
    rand_skip }``: list lines ``<image> v1 v2 ...`` (label_dim values; one more, the sample's
    weight, with ``hard_sample``). ``image_float_data_param { label_dim hard_sample with_heatmap
    heatmap_dir }``: with_heatmap appends heatmap_dir/<image> (gray, resized) as a last channel
    (a line whose map cannot be read is skipped). ``transform_param``: crop_size (or crop_h /
    crop_w; TRAIN random, TEST centred), else in TRAIN ``pad_ratio`` r: p uniform in
    [-i, i], i = max(int(H r), 1); when p > 0 the image is zero-padded by 2p (left and top
    uniform in [0, 2p]) and resized back to H x W, and the labels (taken as fractions of H) become
    (v H + left | top) / (H + 2p) (x values + left, y values + top); mirror flips the image only
    (the fork leaves the labels); then (pixel - mean) * scale. Tops: data (N x C x H x W), labels
    (N x label_dim), and with ``hard_sample`` a third top, the weights (N). ``balance_class``
    (the fork's balance branch reads no line) and ``center_crop`` are refused.
    """
    top_keys = ("data", "label", "weight")
    min_top_blobs = 2
    max_top_blobs = 3

    def prefetch_count(self):
        return 2

    def make_loader(self, top):
        lp = self.layer_param
        p, fp = lp.image_data_param, lp.image_float_data_param
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if p.batch_size < 1 or fp.label_dim < 1:
            raise self.error("image_data_param.batch_size and image_float_data_param.label_dim "
                             "must be positive")
        if p.balance_class:
            raise self.error("image_data_param.balance_class is not supported (the fork's "
                             "balanced branch reads no list line)")
        if lp.transform_param.center_crop:
            raise self.error("transform_param.center_crop is not supported")
        if fp.hard_sample != (len(top) == 3):
            raise self.error("a third top (the weights) goes with image_float_data_param."
                             "hard_sample, which the fork needs to fill it")
        try:
            return _Loader(self)
        except CaffeError as e:
            raise self.error(str(e))

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        n = int(self.layer_param.image_data_param.batch_size)
        top[1].reshape((n, int(self.layer_param.image_float_data_param.label_dim)))
        if len(top) == 3:
            top[2].reshape((n,))


COARSE = (18, 22, 23, 27, 37, 40, 43, 46, 28, 32, 36, 49, 55)   # 1-based 68-point indices


def point_weights(p):
    """The fork's l2_weight_ row (2 x 68): contour points 0-16 contour_weight, the others
    main_weight, the 13 coarse points coarse_weight; a zero weight leaves the previous (0)."""
    w = np.zeros(68, np.float32)
    if p.contour_weight != 0:
        w[:17] = p.contour_weight
    if p.main_weight != 0:
        w[17:] = p.main_weight
    if p.coarse_weight != 0:
        w[[i - 1 for i in COARSE]] = p.coarse_weight
    return np.concatenate([w, w])


@register_layer("WeightEuclideanLoss")
class WeightEuclideanLossLayer(LossLayer):
    """Weighted, normalised landmark error (goodluckcwl/custom-caffe,
    src/caffe/layers/weight_euclidean_loss_layer.cpp), for 68-point vectors (136 values:
    x1..x68, y1..y68):

        d = x - t;   u = w * s * d;   loss = sum(u * d') / (2 N)
        dL/dx = g u / N,   dL/dt = -g u / N

    w: :func:`point_weights`; s (per sample): 1, or with ``normalized: 1`` 1 / max(D, FLT_MIN),
    D = the distance between (t[36], t[68 + 39]) and (t[42], t[68 + 45]) (``normalized_type:
    0``, the fork's eye-corner indices) or the diagonal of the box of the target points
    clamped into [0, 1] (type 1: min from 1, max from 0); d' = d, times the third bottom when
    given. The gradient is the fork's: s is not differentiated and the third bottom does not
    enter it. Bottoms: x, t (N x 136 in any shape), optional weights (as x). Top: loss.
    ``weight_euclidean_loss_param { contour_weight main_weight coarse_weight normalized
    normalized_type }``.
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    exact_num_bottom_blobs = None

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        self.p = self.layer_param.weight_euclidean_loss_param

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        m = bottom[0].count_range(1)
        if m != 136 or bottom[1].count_range(1) != m:
            raise self.error("needs 68-point vectors (136 values per sample) in both bottoms, "
                             "got %s and %s" % (bottom[0].shape, bottom[1].shape))
        if len(bottom) == 3 and bottom[2].count != bottom[0].count:
            raise self.error("the weights %s must have as many values as x %s"
                             % (bottom[2].shape, bottom[0].shape))

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2

    def _scale(self, t):
        p = self.p
        if p.normalized != 1:
            return np.ones(t.shape[0], np.float32)
        m = t.shape[1] // 2
        if p.normalized_type == 0:
            x1, y1, x2, y2 = t[:, 36], t[:, m + 39], t[:, 42], t[:, m + 45]
        else:
            x1 = np.minimum(t[:, :m].min(axis=1), 1)
            x2 = np.maximum(t[:, :m].max(axis=1), 0)
            y1 = np.minimum(t[:, m:].min(axis=1), 1)
            y2 = np.maximum(t[:, m:].max(axis=1), 0)
        dis = np.sqrt((x1 - x2) ** 2 + (y1 - y2) ** 2)
        return 1 / np.maximum(dis, np.finfo(np.float32).tiny)

    def forward_cpu(self, bottom, top):
        n = bottom[0].shape[0]
        x, t = bottom[0].data.reshape(n, -1), bottom[1].data.reshape(n, -1)
        d = x - t
        self.u = point_weights(self.p)[None, :] * self._scale(t)[:, None] * d
        if len(bottom) == 3:
            d = d * bottom[2].data.reshape(n, -1)
        top[0].data[...] = np.sum(self.u * d) / n / 2

    def backward_cpu(self, top, propagate_down, bottom):
        g = float(top[0].diff) / bottom[0].shape[0]
        for i, sign in ((0, 1.0), (1, -1.0)):
            if propagate_down[i]:
                bottom[i].diff[...] = (sign * g * self.u).reshape(bottom[i].shape)
