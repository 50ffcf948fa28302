"""FlowNet 2's DisparityData (lmb-freiburg/flownet2, src/caffe/layers/disparity_data_layer.cpp;
the same file in twhui/LiteFlowNet, JingchunCheng/SegFlow, adamtwig/segpred): ImageData's list
reader for PFM disparity maps, read as the bundled CImg 1.6.0's ``load_pfm`` does.
"""

from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _ensure
from ...layers.data_image import _ImageListLoader
from .image_writers import read_pfm


def load_pfm_cimg(path):
    """A PFM file as CImg 1.6.0 loads it: a (C, H, W) float32 array with the file's rows
    reversed (PFM stores the bottom row first; CImg mirrors in y after reading)."""
    return read_pfm(path)[:, ::-1].copy()


class _DisparityLoader(_ImageListLoader):
    def _read(self, name):
        p = self.param
        path = p.root_folder + name
        img = load_pfm_cimg(path)
        want = (3 if p.is_color else 1, int(p.new_height), int(p.new_width))
        if img.shape != want:
            raise CaffeError("%s: %d x %d x %d, the layer needs %d x %d x %d (is_color, "
                             "new_height, new_width)" % ((path,) + img.shape + want))
        return -img

    def data_shape(self):
        return (self.batch_size,) + self._first_readable()[0].shape

    def load_batch(self, buf):
        first = None
        labels = []
        data = None
        while len(labels) < self.batch_size:
            got = self._checked(first)
            if got is not None:
                if data is None:
                    first = got[0].shape
                    data = _ensure(buf, "data", (self.batch_size,) + first, self.transformer.dtype)
                data[len(labels), 0] = got[0][0]
                data[len(labels), 1:] = 0
                labels.append(got[1])
            self._advance()
        _ensure(buf, "label", (self.batch_size,), self.transformer.dtype)[...] = labels


@register_layer("DisparityData")
class DisparityDataLayer(BasePrefetchingDataLayer):
    """Disparity maps named in a list file (``<path> <label>`` lines, as ImageData), each a PFM
    file read as CImg does (bottom row first in the file, either byte order by the scale's sign)
    and NEGATED (DispNet's disparities are x offsets). Every map must be new_width x new_height
    and have 3 channels (``PF``) with is_color (the default), 1 (``Pf``) without.

    As the fork: only the map's first channel is copied, into the first channel of its item;
    the other channels of a 3-channel top stay 0; transform_param is not applied (the fork's
    Transform call is commented out) and crop_size, which would change the top's shape without
    the copy following it, is refused. prototxt: ``image_data_param { source root_folder
    batch_size shuffle rand_skip new_height new_width is_color }``. Tops: data (N x C x
    new_height x new_width), label (N).
    """
    exact_num_top_blobs = 2
    min_top_blobs = max_top_blobs = None

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.new_height <= 0 or p.new_width <= 0:
            raise self.error("image_data_param.new_height and new_width are required (the PFM "
                             "maps must have that size)")
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        tf = self.make_transformer()
        if tf.crop_size:
            raise self.error("transform_param.crop_size is not supported (the fork copies the "
                             "whole map into the cropped top)")
        try:
            return _DisparityLoader(p, tf, self.describe())
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
