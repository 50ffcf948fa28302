"""FloData of the segmentation-aware nets (aharley/segaware, caffe/src/caffe/layers/
flo_data_layer.cpp; also jialinwu17/segawareatt): optical flow fields in FlowNet's ``.flo`` format
(:func:`files.read_flo`) named in a list file.
"""
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _ensure
from ...layers.data_image import _ImageListLoader
from .files import read_flo


class _FloLoader(_ImageListLoader):
    def read_list(self, param):
        """Every whitespace-separated word of the list file is a file name (``infile >> name``)."""
        try:
            with open(param.source, encoding="utf-8", errors="surrogateescape") as f:
                return [(name, 0) for name in f.read().split()]
        except OSError as e:
            raise CaffeError("%s: cannot open the list: %s" % (param.source, e.strerror or e))

    def _read(self, name):
        return read_flo(self.param.root_folder + name)

    def data_shape(self):
        return (self.batch_size,) + self._first_readable()[0].shape

    def load_batch(self, buf):
        items = []
        while len(items) < self.batch_size:
            got = self._checked(items[0].shape if items else None)
            if got is not None:
                items.append(got[0])
            self._advance()
        data = _ensure(buf, "data", (self.batch_size,) + items[0].shape, self.transformer.dtype)
        for n, item in enumerate(items):
            data[n] = item


@register_layer("FloData")
class FloDataLayer(BasePrefetchingDataLayer):
    """Flow fields from ``.flo`` files: the list file's words are file names (no labels), read as
    ``root_folder + name``; each batch is N x 2 x H x W, (u, v) planes, H and W those of its first
    file (a file of another size in the batch is an error here; the fork would read past the
    item). No transform is applied (the fork's Transform call is commented out). A file without
    the ``PIEH`` tag (202021.25) or cut short is a one-line error.

    prototxt: ``image_data_param { source root_folder batch_size shuffle rand_skip }``. Top: data.
    """
    exact_num_top_blobs = 1
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        try:
            return _FloLoader(p, self.make_transformer(), self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
