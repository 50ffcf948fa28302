"""DeepLab v2's data layer ImageSegData. (DeepLab v2's Interp is PSPNet's, which derives from it:
same InterpParameter numbers, same size rules and interpolation; see ``forks.misc.vision.InterpLayer``.)
"""
import numpy as np

from ... import common
from ...data.image import read_image
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer


def _ensure(buf, key, shape, dtype):
    if key not in buf or buf[key].shape != tuple(shape):
        buf[key] = np.zeros(shape, dtype)
    return buf[key]


class _SegLoader(ListLoaderState):
    """Image / segmentation pairs as DeepLab's ImageSegDataLayer + TransformImgAndSeg."""

    def __init__(self, layer):
        p = layer.layer_param.image_data_param
        tp = layer.layer_param.transform_param
        self.what, self.p, self.dtype = layer.describe(), p, layer.dtype
        self.train = layer.phase == layer._caffe_pb2.TRAIN
        self.crop, self.scale, self.mirror = int(tp.crop_size), tp.scale, tp.mirror
        self.mean = np.asarray(tp.mean_value, dtype=np.float64)
        self.kind = p.label_type
        self.read_lines(p.source, 1 if self.kind == p.NONE else 2,
                        "'<image>'" if self.kind == p.NONE else "'<image> <label>'", exact=False)
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        if p.shuffle:
            self.shuffle_lines()
        self.pos = int(self.rng.integers(0, p.rand_skip)) % len(self.lines) if p.rand_skip else 0
        self.shape = None

    def _pair(self, i):
        p = self.p
        name, seg = self.lines[i]
        raw = read_image(p.root_folder + name, 0, 0, p.is_color)
        img = read_image(p.root_folder + name, p.new_height, p.new_width, p.is_color)
        if self.kind == p.PIXEL:
            lab = read_image(p.root_folder + seg, p.new_height, p.new_width, False)[:, :, 0]
            if lab.shape != img.shape[:2]:
                raise CaffeError("image %s and label %s differ in size" % (name, seg))
        else:
            value = int(seg) if self.kind == p.IMAGE else p.ignore_label
            lab = np.full(img.shape[:2], value)
        return img.transpose(2, 0, 1).astype(np.float64), lab.astype(np.float64), raw.shape[:2]

    def data_shape(self):
        if self.shape is None:
            img, _, _ = self._pair(self.pos)
            if self.mean.size not in (0, 1, img.shape[0]):
                raise CaffeError("%d mean_value entries for %d channels"
                                 % (self.mean.size, img.shape[0]))
            h, w = (self.crop, self.crop) if self.crop else img.shape[1:]
            self.shape = (int(self.p.batch_size), img.shape[0], h, w)
        return self.shape

    def load_batch(self, buf):
        shape = self.data_shape()
        n, c, h, w = shape
        data = _ensure(buf, "data", shape, self.dtype)
        label = _ensure(buf, "label", (n, 1, h, w), self.dtype)
        dims = _ensure(buf, "dim", (n, 1, 1, 2), self.dtype)
        mean = np.broadcast_to(self.mean if self.mean.size else np.zeros(1), (c,))
        for b in range(n):
            img, lab, (rows, cols) = self._pair(self.pos)
            dims[b, 0, 0] = min(h, rows), min(w, cols)
            if self.crop:
                ph, pw = max(self.crop - img.shape[1], 0), max(self.crop - img.shape[2], 0)
                img = np.concatenate([np.pad(img[k], [(0, ph), (0, pw)], constant_values=mean[k])
                                      [None] for k in range(c)])
                lab = np.pad(lab, [(0, ph), (0, pw)], constant_values=self.p.ignore_label)
                H, W = img.shape[1:]
                if self.train:
                    y0 = int(self.rng.integers(0, H - h + 1))
                    x0 = int(self.rng.integers(0, W - w + 1))
                else:
                    y0, x0 = (H - h) // 2, (W - w) // 2
                img, lab = img[:, y0:y0 + h, x0:x0 + w], lab[y0:y0 + h, x0:x0 + w]
            elif img.shape[1:] != (h, w):
                raise CaffeError("image %s is %dx%d, the batch %dx%d (set crop_size or new_height "
                                 "/ new_width)" % (self.lines[self.pos][0], img.shape[1],
                                                   img.shape[2], h, w))
            if self.mirror and self.rng.integers(0, 2):
                img, lab = img[:, :, ::-1], lab[:, ::-1]
            data[b] = (img - mean[:, None, None]) * self.scale if self.mean.size else \
                img * self.scale
            label[b, 0] = lab
            self.pos += 1
            if self.pos >= len(self.lines):
                self.pos = 0
                if self.p.shuffle:
                    self.shuffle_lines()


@register_layer("ImageSegData")
class ImageSegDataLayer(BasePrefetchingDataLayer):
    """DeepLab v2's ImageSegData: an image and its segmentation per list line.

    Lines are ``<image> <label image>`` (``label_type: PIXEL``), ``<image> <class>`` (IMAGE, the
    default: the label plane is that class) or ``<image>`` (NONE: all ``ignore_label``), read from
    ``root_folder``; both resized when new_height / new_width are set. With ``transform_param
    crop_size`` an image smaller than the crop is padded at the bottom and right with the mean
    values (the label with ``ignore_label``), then cropped (random in TRAIN, centred otherwise);
    a random mirror (``mirror``) flips both; the image gets ``(x - mean_value) * scale``.
    prototxt: ``image_data_param { source batch_size shuffle root_folder new_height new_width
    is_color label_type: IMAGE ignore_label: 255 }`` + ``transform_param``.
    Tops: data (N, C, h, w), label (N, 1, h, w) [, data_dim (N, 1, 1, 2): the image's rows and
    columns before resizing, capped at h, w].
    """
    top_keys = ("data", "label", "dim")
    exact_num_top_blobs = None
    min_top_blobs = 2
    max_top_blobs = 3

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if self.layer_param.transform_param.mean_file:
            raise self.error("mean_file is not supported here; give transform_param mean_value")
        try:
            return _SegLoader(self)
        except CaffeError as e:
            raise self.error(str(e))

    def layer_setup(self, bottom, top):
        super(ImageSegDataLayer, self).layer_setup(bottom, top)
        n, _, h, w = top[0].shape
        top[1].reshape(n, 1, h, w)
        if len(top) > 2:
            top[2].reshape(n, 1, 1, 2)
