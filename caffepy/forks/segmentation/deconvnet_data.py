"""DeconvNet's caffe (HyeonwooNoh/caffe) data layers of its 2014 enum-only types:
``WindowSegBinary`` (WINDOW_SEG_BINARY) and ``SelectSegBinary`` (SELECT_SEG_BINARY).

Both read list lines ``<image> [<label>] x1 y1 x2 y2`` (SelectSegBinary then ``label_dim`` class
labels, ``window_cls_data_param { label_dim }``); ``<label>`` as DeepLab's ImageSegData:
``image_data_param { label_type }`` PIXEL (a label image), IMAGE (a class filling the plane) or
NONE (no token; all ``ignore_label``). Per line the window (x1, y1)-(x2, y2), corners included,
is cut from the image and its label plane -- where it leaves the image, the image is padded with
0 and the labels with ``ignore_label`` -- and, with new_height and new_width, resized (the image
bilinearly, the labels to the nearest pixel). Then DeepLab's TransformImgAndSeg
(``deeplab.py``): padding to ``crop_size`` with the mean values / ignore_label, a random (TRAIN) or
centred crop, a random mirror, ``(x - mean_value) * scale``.
"""
import numpy as np

from ...data.image import read_image, resize_bilinear
from ...errors import CaffeError
from ...layers.base import register_layer
from .deeplab import ImageSegDataLayer, _SegLoader


def _resize_nearest(a, height, width):
    """OpenCV's INTER_NEAREST: destination pixel x reads source floor(x * src / dst)."""
    h, w = a.shape[:2]
    rows = np.minimum((np.arange(height) * (h / float(height))).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(width) * (w / float(width))).astype(np.int64), w - 1)
    return a[rows][:, cols]


class _WindowLoader(_SegLoader):
    """Lines with a window (and class labels); each item is its window."""
    label_dim = 0

    def __init__(self, layer):
        self.label_dim = self._label_dim(layer)
        self.consumed = []           # the class labels of the lines read, in order
        super(_WindowLoader, self).__init__(layer)

    def _label_dim(self, layer):
        return 0

    def read_lines(self, source, want, usage, exact=True):
        seg = self.kind != self.p.NONE
        usage = "'<image> %sx1 y1 x2 y2%s'" % ("<label> " if seg else "",
                                              " <%d class labels>" % self.label_dim
                                              if self.label_dim else "")
        super(_WindowLoader, self).read_lines(source, 1 + seg + 4 + self.label_dim, usage,
                                              exact=False)

    def _parse(self, i):
        tokens = self.lines[i]
        seg = self.kind != self.p.NONE
        try:
            box = [int(t) for t in tokens[1 + seg:5 + seg]]
            cls = [int(t) for t in tokens[5 + seg:]]
        except ValueError:
            raise CaffeError("list line %r: the window and class labels must be integers"
                             % " ".join(tokens))
        return tokens[0], tokens[1] if seg else "", box, cls

    def _pair(self, i):
        p = self.p
        name, seg, (x1, y1, x2, y2), cls = self._parse(i)
        img = read_image(p.root_folder + name, 0, 0, p.is_color)
        if self.kind == p.PIXEL:
            lab = read_image(p.root_folder + seg, 0, 0, False)[:, :, 0]
            if lab.shape != img.shape[:2]:
                raise CaffeError("image %s and label %s differ in size" % (name, seg))
        else:   # the fork fills a CV_8UC1 plane: the class saturates to 0..255
            value = min(max(int(seg), 0), 255) if self.kind == p.IMAGE else p.ignore_label
            lab = np.full(img.shape[:2], value, dtype=np.int64)
        raw = img.shape[:2]
        if x2 < x1 or y2 < y1:
            raise CaffeError("line of %s: empty window (%d, %d)-(%d, %d)" % (name, x1, y1, x2, y2))
        H, W = raw
        px1, py1 = max(0, -x1), max(0, -y1)
        px2, py2 = max(0, x2 - W + 1), max(0, y2 - H + 1)
        if px1 or py1 or px2 or py2:
            img = np.pad(img, [(py1, py2), (px1, px2), (0, 0)], constant_values=0)
            lab = np.pad(lab, [(py1, py2), (px1, px2)], constant_values=p.ignore_label)
        x1, x2, y1, y2 = x1 + px1, x2 + px1, y1 + py1, y2 + py1
        img, lab = img[y1:y2 + 1, x1:x2 + 1], lab[y1:y2 + 1, x1:x2 + 1]
        if p.new_height > 0 and p.new_width > 0:
            img = resize_bilinear(img, p.new_height, p.new_width)
            lab = _resize_nearest(lab, p.new_height, p.new_width)
        lab = self._labels(np.asarray(lab, dtype=np.int64), cls)
        self.consumed.append(cls)
        return img.transpose(2, 0, 1).astype(np.float64), lab.astype(np.float64), raw

    def _labels(self, lab, cls):
        return lab

    def load_batch(self, buf):
        self.data_shape()
        self.consumed = []
        super(_WindowLoader, self).load_batch(buf)
        if self.label_dim:
            n = self.shape[0]
            cls = buf.setdefault("cls", np.zeros((n, self.label_dim, 1, 1), self.dtype))
            cls[...] = np.asarray(self.consumed, dtype=np.float64).reshape(cls.shape)


class _WindowSegBinaryLoader(_WindowLoader):
    def _labels(self, lab, cls):
        # the fork sets labels 1..254 to 1 in a loop over new_width x new_height: with a resize the
        # whole window, without one no pixel
        if self.p.new_height > 0 and self.p.new_width > 0:
            lab = np.where((lab > 0) & (lab < 255), 1, lab)
        return lab


class _SelectSegBinaryLoader(_WindowLoader):
    def __init__(self, layer):
        self.base = int(layer.layer_param.select_seg_binary_param.cls_label_base)
        super(_SelectSegBinaryLoader, self).__init__(layer)

    def _label_dim(self, layer):
        return int(layer.layer_param.window_cls_data_param.label_dim)

    def _labels(self, lab, cls):
        # a label s other than 0 and ignore_label becomes cls[s - base - 1] when base < s <= base +
        # label_dim, else 0
        out = lab.copy()
        fg = (lab != 0) & (lab != self.p.ignore_label)
        inside = fg & (lab > self.base) & (lab - 1 < self.label_dim + self.base)
        table = np.asarray(cls, dtype=np.int64)
        out[fg & ~inside] = 0
        out[inside] = table[lab[inside] - self.base - 1]
        return out


class _WindowDataLayer(ImageSegDataLayer):
    exact_num_top_blobs = 3
    min_top_blobs = max_top_blobs = None
    auto_top_blobs = True
    loader = None

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if self.layer_param.transform_param.mean_file:
            raise self.error("mean_file is not supported here; give transform_param mean_value")
        try:
            return self.loader(self)
        except CaffeError as e:
            raise self.error(str(e))


@register_layer("WindowSegBinary")
class WindowSegBinaryLayer(_WindowDataLayer):
    """DeconvNet's WindowSegBinary: per list line a window and its labels, the object labels
    1..254 set to 1 (only when new_height / new_width resize the window, as the fork).
    prototxt: ``image_data_param { source batch_size shuffle root_folder new_height new_width
    is_color label_type ignore_label }`` + ``transform_param``. Tops: data (N, C, h, w), label
    (N, 1, h, w), data_dim (N, 1, 1, 2): the image's rows and columns, capped at h, w.
    """
    loader = _WindowSegBinaryLoader


@register_layer("SelectSegBinary")
class SelectSegBinaryLayer(_WindowDataLayer):
    """DeconvNet's SelectSegBinary: per list line a window, its labels and ``label_dim`` class
    labels; a label s (not 0, not ignore_label) becomes the line's class label number s - base
    (base = ``select_seg_binary_param { cls_label_base }``) when base < s <= base + label_dim,
    else 0. prototxt: as WindowSegBinary's, plus ``window_cls_data_param { label_dim }``. Tops:
    data (N, C, h, w), label (N, 1, h, w), class labels (N, label_dim, 1, 1).
    """
    top_keys = ("data", "label", "cls")
    loader = _SelectSegBinaryLoader

    def layer_setup(self, bottom, top):
        super(SelectSegBinaryLayer, self).layer_setup(bottom, top)
        label_dim = int(self.layer_param.window_cls_data_param.label_dim)
        top[2].reshape((top[0].shape[0], label_dim, 1, 1))
