"""TSN caffe's ``SegData`` reader (yjxiong/caffe src/caffe/layers/seg_data_layer.cpp and the
two-datum DataTransformer::Transform of src/caffe/data_transformer.cpp)."""

import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
from ...errors import CaffeError
from ...layers.base import Layer, register_layer


def _resize_nearest(img, height, width):
    """OpenCV's INTER_NEAREST: source index floor(d * src / dst), clipped."""
    h, w = img.shape[:2]
    ys = np.minimum((np.arange(height) * (h / height)).astype(int), h - 1)
    xs = np.minimum((np.arange(width) * (w / width)).astype(int), w - 1)
    return img[ys][:, xs]


@register_layer("SegData")
class SegDataLayer(Layer):
    """Image / label-image pairs for segmentation, one pair per forward.

    The list ``source`` holds whitespace-separated pairs ``image label`` (each prefixed with
    ``root_dir``; an unpaired last token is ignored, as the fork's stream reading). ``shuffle``
    shuffles it at start and at each wrap (seeded: the fork seeds its shuffle with 17). Each
    forward reads the image in colour and the label as gray and transforms both, in every phase:
    ratio r = l + U{0 .. int((u - l) 1000)} / 1000 for ``scale_ratios: l scale_ratios: u``
    (exactly two values; else 1), size (int(H r + 0.5), int(W r + 0.5)), crop = size floored to
    ``stride``, then min(``upper_size``) (or ``upper_height`` / ``upper_width`` when both are
    set), at a random offset; the image resized bilinearly, the label by nearest neighbour;
    ``mirror`` flips both with probability 1/2; image values (v - mean_value[c]) * ``scale``
    (``mean_file`` is NOT_IMPLEMENTED in the fork and refused). ``balance``: while one label value
    covers more than 80% of the crop, the transform is drawn again (10 times at most).
    Tops: data 1 x C x h x w, label 1 x 1 x h x w (setup: the first image's size floored to the
    stride and capped, as the fork).

    prototxt: ``seg_data_param { source root_dir shuffle: false balance: false }`` and
    ``transform_param { stride: 1 scale_ratios upper_size upper_height upper_width mirror
    mean_value scale }``.
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.seg_data_param
        self.tp = self.layer_param.transform_param
        if self.tp.mean_file:
            raise self.error("transform_param.mean_file is NOT_IMPLEMENTED in the fork's SegData")
        try:
            with open(p.source) as f:
                tokens = f.read().split()
        except OSError as e:
            raise self.error("cannot open seg_data_param.source %s: %s"
                             % (p.source, e.strerror or e))
        self.lines = [(p.root_dir + tokens[i], p.root_dir + tokens[i + 1])
                      for i in range(0, len(tokens) - 1, 2)]
        if not self.lines:
            raise self.error("%s holds no image / label pair" % p.source)
        self.shuffle = bool(p.shuffle)
        self._rng = np.random.default_rng(17)
        if self.shuffle:
            self._rng.shuffle(self.lines)
        self.pos = 0
        img, lab = self._read(self.lines[0])
        s = self._stride()
        h, w = self._cap(img.shape[0] // s * s, img.shape[1] // s * s)
        top[0].reshape((1, img.shape[2], h, w))
        top[1].reshape((1, 1, h, w))

    def _stride(self):
        s = int(self.tp.stride)
        if s <= 0:
            raise self.error("transform_param.stride must be > 0, got %d" % s)
        return s

    def _cap(self, h, w):
        if self.tp.HasField("upper_size"):
            return min(h, self.tp.upper_size), min(w, self.tp.upper_size)
        if self.tp.HasField("upper_height") and self.tp.HasField("upper_width"):
            return min(h, self.tp.upper_height), min(w, self.tp.upper_width)
        return h, w

    def _read(self, pair):
        try:
            img = read_image(pair[0], is_color=True)
            lab = read_image(pair[1], is_color=False)
        except CaffeError as e:
            raise self.error(str(e)) from None
        if lab.shape[:2] != img.shape[:2]:
            raise self.error("%s is %dx%d, its label %s %dx%d" % (
                pair[0], img.shape[0], img.shape[1], pair[1], lab.shape[0], lab.shape[1]))
        return img, lab.reshape(lab.shape[:2])

    def reshape(self, bottom, top):
        """Tops take each pair's crop size in forward."""

    def _transform(self, img, lab):
        rng = common.rng()
        tp = self.tp
        H, W, C = img.shape
        lo, hi = (float(tp.scale_ratios[0]), float(tp.scale_ratios[1])) \
            if len(tp.scale_ratios) == 2 else (1.0, 1.0)
        mirror = bool(tp.mirror) and bool(rng.integers(0, 2))
        ratio = max(int(rng.integers(0, int((hi - lo) * 1000.0) + 1)) / 1000.0, 0.0) + lo
        h, w = int(H * ratio + 0.5), int(W * ratio + 0.5)
        s = self._stride()
        ch, cw = self._cap(h // s * s, w // s * s)
        if ch <= 0 or cw <= 0 or ch > h or cw > w:
            raise self.error("crop %dx%d does not fit the %dx%d resized image" % (ch, cw, h, w))
        ho, wo = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        data = resize_bilinear(img, h, w).reshape(h, w, C)[ho:ho + ch, wo:wo + cw]
        label = _resize_nearest(lab, h, w)[ho:ho + ch, wo:wo + cw]
        if mirror:
            data, label = data[:, ::-1], label[:, ::-1]
        data = data.transpose(2, 0, 1).astype(np.float64)
        means = list(tp.mean_value)
        if means:
            if len(means) not in (1, C):
                raise self.error("give 1 mean_value or %d (one per channel), got %d"
                                 % (C, len(means)))
            data = data - np.resize(np.asarray(means, np.float64), C)[:, None, None]
        return data * float(tp.scale), label.astype(np.float64)

    def forward_cpu(self, bottom, top):
        pair = self.lines[self.pos]
        img, lab = self._read(pair)
        data, label = self._transform(img, lab)
        if self.layer_param.seg_data_param.balance:
            for _ in range(10):
                counts = np.bincount(label.astype(np.int64).ravel(), minlength=256)
                if counts.max() > 0.8 * label.size:
                    data, label = self._transform(img, lab)
                else:
                    break
        top[0].reshape((1,) + data.shape)
        top[1].reshape((1, 1) + label.shape)
        top[0].data[0] = data
        top[1].data[0, 0] = label
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.shuffle:
                self._rng.shuffle(self.lines)

    def backward_cpu(self, top, propagate_down, bottom):
        """Data layers have no gradient."""


