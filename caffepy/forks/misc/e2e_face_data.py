"""mikuhatsune/e2e_face's data-side changes (caffe_modification/): its HDF5Data with image
transforms (hdf5_data_layer.cpp: the same as L-GM-loss's, computed by
caffepy.forks.misc.lgm_hdf5.CropMirrorHDF5DataLayer) and its ``value`` filler (filler.hpp). Its SpatialTransformer is
caffepy.forks.misc.spatial_transformer.
"""
import numpy as np

from ... import fillers
from ...errors import CaffeError
from .lgm_hdf5 import CropMirrorHDF5DataLayer


class ValueFiller(fillers.Filler):
    """``type: "value" values: v0 values: v1 ...``: the first len(values) entries of the blob (in
    memory order) are the values, the rest 0 (Caffe's fresh blob memory); more values than
    entries is an error (the fork writes past the blob)."""

    def values(self, shape):
        vals = np.asarray(self.param.values, dtype=np.float64)
        count = self._count(shape)
        if len(vals) > count:
            raise CaffeError("filler 'value': %d values for a blob of %d entries (shape %s)"
                             % (len(vals), count, shape))
        out = np.zeros(count)
        out[:len(vals)] = vals
        return out.reshape(shape)


fillers.FILLERS.setdefault("value", ValueFiller)


def crop_offsets(h, w, c):
    """(h_off, w_off) of the fork's test-time crops of an H x W image: centre, top left, bottom
    right, top right, bottom left."""
    return [((h - c) // 2, (w - c) // 2), (0, 0), (h - c, w - c), (0, w - c), (h - c, 0)]


# e2e_face's HDF5Data transforms (crop, mean, mirror, scale, test-time crops) are the same code
# as WeitaoVan/L-GM-loss's: one class computes both (caffepy.forks.misc.lgm_hdf5).
TransformingHDF5DataLayer = CropMirrorHDF5DataLayer
