"""RCF's ImageLabelmapData (yun-liu/rcf commit ce460ff,
``src/caffe/layers/image_labelmap_data_layer.cpp`` and its DataTransformer's ``LocTransform`` /
``LabelmapTransform``, the HED reader): an image and its edge map per list line.
"""
import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer


class _LabelmapLoader(ListLoaderState):
    def __init__(self, layer):
        p = layer.layer_param.image_data_param
        tp = layer.layer_param.transform_param
        self.p, self.dtype = p, layer.dtype
        self.crop, self.scale, self.mirror = int(tp.crop_size), np.float32(tp.scale), tp.mirror
        self.mean = np.asarray(tp.mean_value, dtype=np.float32)
        self.read_lines(p.source, 2, "'<image> <edge map>'")
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        if p.shuffle:
            self.shuffle_lines()
        self.pos = 0
        if p.rand_skip:
            skip = int(self.rng.integers(0, 2 ** 32)) % int(p.rand_skip)
            if skip >= len(self.lines):
                raise CaffeError("rand_skip %d: not enough lines (%d) to skip" % (skip,
                                                                                len(self.lines)))
            self.pos = skip

    def _shape(self, pos):
        p = self.p
        img = read_image(p.root_folder + self.lines[pos][0], p.new_height, p.new_width, p.is_color)
        if self.mean.size not in (0, 1, img.shape[2]):
            raise CaffeError("%d mean_value entries for %d channels" % (self.mean.size,
                                                                       img.shape[2]))
        h, w = (self.crop, self.crop) if self.crop else img.shape[:2]
        return (int(p.batch_size), img.shape[2], h, w)

    def data_shape(self):
        shape = self._shape(self.pos)
        self.label_item_shape = (1,) + shape[2:]
        return shape

    def _pair(self, pos):
        p = self.p
        name, gt_name = self.lines[pos]
        img = read_image(p.root_folder + name, 0, 0, p.is_color)
        gt = read_image(p.root_folder + gt_name, 0, 0, False)
        if gt.shape[:2] != img.shape[:2]:
            raise CaffeError("edge map %s is %dx%d, image %s %dx%d" % (
                gt_name, gt.shape[0], gt.shape[1], name, img.shape[0], img.shape[1]))
        if p.new_height > 0 and p.new_width > 0:
            img = resize_bilinear(img, p.new_height, p.new_width)
            gt = resize_bilinear(gt, p.new_height, p.new_width)
        return name, img, gt[:, :, 0]

    def load_batch(self, buf):
        shape = self._shape(self.pos)
        n, c, h, w = shape
        for key, want in (("data", shape), ("label", (n, 1, h, w))):
            if buf.get(key) is None or buf[key].shape != want:
                buf[key] = np.zeros(want, self.dtype)
        data, label = buf["data"], buf["label"]
        mean = np.broadcast_to(self.mean, (c,)) if self.mean.size else None
        for b in range(n):
            name, img, gt = self._pair(self.pos)
            H, W = img.shape[:2]
            mirror = bool(self.mirror and self.rng.integers(0, 2))
            if self.crop:
                if H < self.crop or W < self.crop:
                    raise CaffeError("image %s is %dx%d, smaller than crop_size %d"
                                     % (name, H, W, self.crop))
                y0 = int(self.rng.integers(0, H - self.crop + 1))
                x0 = int(self.rng.integers(0, W - self.crop + 1))
                img, gt = img[y0:y0 + h, x0:x0 + w], gt[y0:y0 + h, x0:x0 + w]
            elif (H, W) != (h, w):
                raise CaffeError("image %s is %dx%d, the batch %dx%d (its first image's size; "
                                 "set crop_size, new_height / new_width or batch_size: 1)"
                                 % (name, H, W, h, w))
            x = img.transpose(2, 0, 1).astype(np.float32)
            if mean is not None:
                x = x - mean[:, None, None]
            edge = gt.astype(np.float32) / np.float32(255)
            edge[edge > 0.5] = 1
            if mirror:
                x, edge = x[:, :, ::-1], edge[:, ::-1]
            data[b] = x * self.scale
            label[b, 0] = edge
            self.pos += 1
            if self.pos >= len(self.lines):
                self.pos = 0
                if self.p.shuffle:
                    self.shuffle_lines()


@register_layer("ImageLabelmapData")
class ImageLabelmapDataLayer(BasePrefetchingDataLayer):
    """RCF's (and HED's) image + edge-map reader.

    Each list line is ``<image> <edge map>`` (under ``root_folder``); the edge map is read gray and
    must have the image's size; both are resized (INTER_LINEAR) when new_height / new_width are
    set. Per item: a random crop of ``crop_size`` (in every phase, as the fork's LocTransform,
    which draws the offsets whatever the phase), a random mirror (``mirror``) of both, the image
    ``(x - mean_value) * scale``, the edge map ``e / 255`` with values above 0.5 set to 1 (so
    0, 1, or the fraction of annotators up to 0.5, which RCF's loss ignores).
    Each batch takes the size of its first image (crop_size when set); an image of another size
    in the batch is an error, as the fork's CHECK. The list is reshuffled at each wrap when
    ``shuffle``.

    prototxt: ``image_data_param { source batch_size (> 0) shuffle rand_skip root_folder
    new_height new_width (both or neither) is_color }`` + ``transform_param { crop_size mirror
    scale mean_value }``. Tops: data (N, C, H, W), label (N, 1, H, W).
    Other forks' ImageLabelmapData, under the same name and fields and not built here:
    HED's original (Anna0509/caffe_) divides the 8-bit map by 255 in 8 bits, so its labels are
    0 or 1 (1 from 128 up) where RCF's keep the fractions up to 0.5; zeakey/DeepSkeleton's
    quantises the raw map into 5 scale classes.
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        if bool(p.new_height) != bool(p.new_width) or p.new_height < 0 or p.new_width < 0:
            raise self.error("new_height and new_width must be set together")
        if self.layer_param.transform_param.mean_file:
            raise self.error("mean_file is not supported here; give transform_param mean_value")
        if p.normalize or p.label_channel != 1:
            raise self.error("image_data_param.normalize / label_channel are caffe_dss's "
                             "ImageLabelmapData fields; RCF's reader does not read them")
        try:
            return _LabelmapLoader(self)
        except CaffeError as e:
            raise self.error(str(e))
