"""TSN's SegData (yjxiong/caffe at 9831a2b, ``src/caffe/layers/seg_data_layer.cpp``, its two-datum
``DataTransformer::Transform`` and ``ReadSegDataToDatum``; also BannyStone/Caffe and
mzolfaghari/ECO-efficient-video-understanding): one image and its label map per forward, randomly
rescaled and cropped to a multiple of ``stride``.
"""
import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer


def resize_nearest(img, height, width):
    """OpenCV's INTER_NEAREST: source index floor(x * src / dst), clamped to the last one."""
    h, w = img.shape[:2]
    ys = np.minimum(np.floor(np.arange(height) * (1.0 / (height / h))).astype(np.int64), h - 1)
    xs = np.minimum(np.floor(np.arange(width) * (1.0 / (width / w))).astype(np.int64), w - 1)
    return img[ys][:, xs]


class _SegLoader(ListLoaderState):
    def __init__(self, layer):
        p = layer.layer_param.seg_data_param
        tp = layer.layer_param.transform_param
        self.p, self.tp, self.dtype = p, tp, layer.dtype
        self.mean = np.asarray(tp.mean_value, dtype=np.float32)
        self.stride = int(tp.stride)
        if self.stride <= 0:
            raise CaffeError("transform_param.stride must be positive (got %d)" % self.stride)
        ratios = list(tp.scale_ratios)
        self.lower, self.upper = (ratios[0], ratios[1]) if len(ratios) == 2 else (1.0, 1.0)
        self.read_lines(p.source, 2, "'<image> <label image>'")
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        if p.shuffle:
            self.shuffle_lines()
        self.pos = 0

    def _cap(self, h, w):
        h, w = h // self.stride * self.stride, w // self.stride * self.stride
        tp = self.tp
        if tp.HasField("upper_size"):
            h, w = min(h, tp.upper_size), min(w, tp.upper_size)
        elif tp.HasField("upper_height") and tp.HasField("upper_width"):
            h, w = min(h, tp.upper_height), min(w, tp.upper_width)
        return h, w

    def _read(self, pos):
        root = self.p.root_dir
        name, lab_name = self.lines[pos]
        img = read_image(root + name, 0, 0, True)
        lab = read_image(root + lab_name, 0, 0, False)[:, :, 0]
        if lab.shape != img.shape[:2]:
            raise CaffeError("label %s is %dx%d, image %s %dx%d" % (
                lab_name, lab.shape[0], lab.shape[1], name, img.shape[0], img.shape[1]))
        return img, lab

    def data_shape(self):
        img, _ = self._read(self.pos)
        h, w = self._cap(*img.shape[:2])
        self.label_item_shape = (1, h, w)
        return (1, 3, h, w)

    def _transform(self, img, lab):
        mirror = bool(self.tp.mirror and self.rng.integers(0, 2))
        step = int(self.rng.integers(0, int((self.upper - self.lower) * 1000.0) + 1))
        ratio = np.float32(max(step / 1000.0, 0.0) + self.lower)
        H, W = img.shape[:2]
        height = int(float(np.float32(H) * ratio) + 0.5)
        width = int(float(np.float32(W) * ratio) + 0.5)
        ch, cw = self._cap(height, width)
        if ch <= 0 or cw <= 0:
            raise CaffeError("the rescaled image is %dx%d: nothing left at stride %d"
                             % (height, width, self.stride))
        y0 = int(self.rng.integers(0, height - ch + 1))
        x0 = int(self.rng.integers(0, width - cw + 1))
        img = resize_bilinear(img, height, width)[y0:y0 + ch, x0:x0 + cw]
        lab = resize_nearest(lab, height, width)[y0:y0 + ch, x0:x0 + cw]
        x = img.transpose(2, 0, 1).astype(np.float32)
        if self.mean.size:
            x = x - np.broadcast_to(self.mean, (3,))[:, None, None]
        if mirror:
            x, lab = x[:, :, ::-1], lab[:, ::-1]
        return x * np.float32(self.tp.scale), lab.astype(np.float32)

    def load_batch(self, buf):
        img, lab = self._read(self.pos)
        x, y = self._transform(img, lab)
        if self.p.balance:              # up to 10 redraws while one label covers > 80 %
            for _ in range(10):
                if np.bincount(y.astype(np.int64).ravel()).max() > 0.8 * y.size:
                    x, y = self._transform(img, lab)
                else:
                    break
        buf["data"] = x[None].astype(self.dtype)
        buf["label"] = y[None, None].astype(self.dtype)
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.p.shuffle:
                self.shuffle_lines()


@register_layer("SegData")
class SegDataLayer(BasePrefetchingDataLayer):
    """TSN's image / label-map reader, one pair per forward (batch 1, sizes vary per forward).

    List lines ``<image> <label>`` under ``root_dir``; the image is read in colour, the label
    gray, both must have the same size. Per forward: a ratio r = lower + k / 1000, k uniform in
    0 .. (upper - lower) 1000 (``scale_ratios: lower scale_ratios: upper``; r = 1 unless exactly
    two are given); the pair is resized to h = int(H r + 0.5), w = int(W r + 0.5) (the image
    bilinear, the label nearest); the crop is (h, w) floored to multiples of ``stride`` and capped
    by ``upper_size`` (or ``upper_height`` and ``upper_width``), taken at a random offset; a
    random mirror (``mirror``); the image becomes ``(x - mean_value) * scale``. ``balance``:
    while one label value covers more than 80 % of the crop, the transform is drawn again (up to
    10 times). The setup shape is the first image's size floored to the stride and capped.
    The fork draws all of this from a generator it creates only with ``mirror`` (or
    ``crop_size`` in TRAIN) and stops without one; caffepy draws from its own generator in every
    case. The fork shuffles with a fixed seed (17); caffepy with its seeded generator.

    prototxt: ``seg_data_param { source root_dir shuffle balance }`` + ``transform_param {
    mirror scale mean_value stride: 1 scale_ratios upper_size upper_height upper_width }``
    (mean_file: not implemented in the fork, an error here).
    Tops: data (1, 3, h, w), label (1, 1, h, w).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        tp = self.layer_param.transform_param
        if tp.mean_file:
            raise self.error("mean_file is not implemented by the fork's SegData transform")
        if tp.mean_value and len(tp.mean_value) not in (1, 3):
            raise self.error("give 1 or 3 mean_value entries (got %d)" % len(tp.mean_value))
        try:
            return _SegLoader(self)
        except CaffeError as e:
            raise self.error(str(e))
