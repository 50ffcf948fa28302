"""ImageData: images named in a list file (``image_data_param { source root_folder new_height
new_width is_color shuffle batch_size }``), decoded and transformed on the prefetch thread, as
Caffe's ImageDataLayer. Tops: ``data`` (N x C x h x w) and ``label`` (N). The prefetching base, the
bad-record policy and the database reader are in :mod:`caffepy.layers.data`.
"""
import numpy as np

from .. import common
from ..data.image import read_image, read_image_list, resize_bilinear
from ..data.state import set_rng
from ..errors import CaffeError
from .base import register_layer
from .data import BasePrefetchingDataLayer, _bad_record, _ensure

class _ImageListLoader(object):
    def __init__(self, param, transformer, what):
        self.what = what
        self.param = param
        self.transformer = transformer
        self.batch_size = int(param.batch_size)
        self.lines = self.read_list(param)
        if not self.lines:
            raise CaffeError("%s: image list %s is empty" % (what, param.source))
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.order = np.arange(len(self.lines))      # list position -> line (replaced, never mutated)
        if param.shuffle:
            self._shuffle()
        self.pos = 0
        if param.rand_skip:
            self.pos = int(common.rng().integers(0, param.rand_skip)) % len(self.lines)
        self.source, self.warned, self.skipped = param.source, set(), 0
        self.n_records = len(self.lines)

    label_item_shape = ()   # per item: () for Caffe's one label; a fork reader may give more

    def read_list(self, param):
        """[(path, label)] of the list file (a fork reader may read another form)."""
        return read_image_list(param.source)

    def _shuffle(self):
        self.order = self.order[self.rng.permutation(len(self.lines))]

    def get_state(self):
        return {"pos": self.pos, "order": self.order, "shuffle": self.rng.bit_generator.state,
                "transform": self.transformer.rng.bit_generator.state}

    def set_state(self, state):
        if len(state["order"]) != len(self.lines):
            raise CaffeError("%s: the saved state is of a list of %d images, %s has %d"
                             % (self.what, len(state["order"]), self.param.source, len(self.lines)))
        self.pos, self.order = int(state["pos"]), np.asarray(state["order"], np.int64)
        set_rng(self.rng, state["shuffle"])
        set_rng(self.transformer.rng, state["transform"])

    def _read(self, name):
        p = self.param
        img = read_image(p.root_folder + name, p.new_height, p.new_width, p.is_color)
        new_dim = getattr(p, "new_dim", 0)        # yihui-he/caffe-pro: shorter side -> new_dim
        if new_dim > 0:
            h, w = img.shape[:2]
            f = np.float32(new_dim) / np.float32(min(h, w))
            size = (int(round(f * h)), new_dim) if h >= w else (new_dim, int(round(f * w)))
            img = resize_bilinear(img, *size)
        return np.ascontiguousarray(img.transpose(2, 0, 1))

    def _checked(self, shape=None):
        """The image at ``pos`` (a C x H x W array) and its label, or None for a bad one that is
        skipped (``pos`` not moved)."""
        line = self.order[self.pos]
        name, label = self.lines[line]
        try:
            item = self._read(name)
            if shape is not None and item.shape != shape:
                raise CaffeError("shape %s, the batch's is %s" % (item.shape, shape))
        except (CaffeError, OSError, ValueError) as e:
            path = self.param.root_folder + name
            _bad_record(self, "%s line %d (%s)" % (self.source, line + 1, path),
                        " ".join(str(e).split()).replace(path + ": ", ""))
            return None
        self.skipped = 0
        return item, label

    def _advance(self):
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.param.shuffle:
                self._shuffle()

    def _first_readable(self):
        """The (item, label) of the first line from the cursor on that reads (bad lines skipped)."""
        got = self._checked()
        while got is None:
            self._advance()
            got = self._checked()
        return got

    def data_shape(self):
        return (self.batch_size,) + self.transformer.infer_shape(self._first_readable()[0].shape)

    def load_batch(self, buf):
        items, labels = [], []
        while len(items) < self.batch_size:
            got = self._checked(items[0].shape if items else None)
            if got is not None:
                items.append(got[0])
                labels.append(got[1])
            self._advance()
        shape = (self.batch_size,) + self.transformer.infer_shape(items[0].shape)
        self.transformer.transform_arrays(items, _ensure(buf, "data", shape, self.transformer.dtype))
        shape = (self.batch_size,) + self.label_item_shape
        _ensure(buf, "label", shape, self.transformer.dtype)[...] = np.reshape(labels, shape)


@register_layer("ImageData")
class ImageDataLayer(BasePrefetchingDataLayer):
    """Reads images named in a list file, as Caffe's ImageDataLayer.

    prototxt: ``image_data_param { source: "<list>" batch_size: 1 shuffle: false rand_skip: 0
    new_height: 0 new_width: 0 is_color: true root_folder: "" }`` and ``transform_param``.
    Each list line is ``<path> <label>``, split at the last space; the file read is
    ``root_folder + path`` (plain concatenation, as Caffe). Images are BGR (1 channel when
    ``is_color: false``), resized (bilinear) when both new_height and new_width are set. With
    ``shuffle`` the list is reshuffled at every pass. Tops: data, label.
    yihui-he/caffe-pro's ``new_dim: 0`` (when > 0: the shorter side is resized to new_dim, the
    other to round(side * new_dim / shorter), bilinear; not with new_height / new_width) is
    read; its ``bicubic: true`` (INTER_CUBIC) is refused, as are caffe_dss's ``normalize`` and
    ``label_channel`` (fields of its ImageLabelmapData, which caffepy.zoo replaces by inputs:
    normalize divides the label map by 255 and changes no shape, image_labelmap_data_layer.cpp).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if getattr(p, "new_dim", 0) and p.new_height:
            raise self.error("new_dim and new_height / new_width cannot be set together")
        if getattr(p, "bicubic", False):
            raise self.error("image_data_param.bicubic (caffe-pro's INTER_CUBIC resize) is not "
                             "supported; caffepy resizes bilinearly (bicubic: false)")
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        if p.normalize or p.label_channel != 1:
            raise self.error("image_data_param.normalize / label_channel are read by "
                             "Andrew-Qibin/caffe_dss's ImageLabelmapData (label maps), not by "
                             "ImageData")
        try:
            return _ImageListLoader(p, self.make_transformer(p), self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
