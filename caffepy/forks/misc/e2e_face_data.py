"""mikuhatsune/e2e_face's data-side changes (caffe_modification/): its HDF5Data with image
transforms (hdf5_data_layer.cpp) and its ``value`` filler (filler.hpp). Its SpatialTransformer is
caffepy.forks.misc.spatial_transformer.
"""
import numpy as np

from ... import fillers
from ...errors import CaffeError
from ...layers.base import register_variant
from ...layers.data_hdf5 import HDF5DataLayer
from ...proto import caffe_pb2


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


def _transformed(p):
    return any(p.HasField(f) for f in ("scale", "mirror", "crop_size", "crop_num")) \
        or len(p.mean_value) > 0


@register_variant("HDF5Data", lambda lp: _transformed(lp.hdf5_data_param))
class TransformingHDF5DataLayer(HDF5DataLayer):
    """Caffe's HDF5Data whose first top (images, rows x C x H x W) is transformed as each file is
    loaded, in this order (e2e_face's LoadHDF5FileData):

        crop:   with crop_size c and crop_num <= 1: one c x c window per file, at a random offset
                in TRAIN (h_off in [0, H - c], w_off in [0, W - c]), centred in TEST
        mean:   x[:, ch] -= mean_value[ch]  (one value, or one per channel)
        mirror: each row flipped left-right with probability 1/2
        scale:  x *= scale

    The file is reloaded, and the random draws made again, at the end of every pass over it.
    In TEST with crop_size and crop_num > 1 (``mirror`` doubles crop_num in TEST, as the fork's
    LayerSetUp does) no crop is made at load: each row gives crop_num / (2 if mirror) crops at
    the centre, top left, bottom right, top right and bottom left, preceded with ``mirror`` by
    the same crops flipped; the image top is (batch_size * crop_num) x C x c x c and the other
    tops one row per image. Without crop_size crop_num is 0 (no crops).

    prototxt: ``hdf5_data_param { source batch_size shuffle scale: 1 mirror: false mean_value
    crop_size crop_num: 1 }``; as the fork, no transform_param. A crop_num the fork would read
    out of bounds (over 5 crops, or over 1 in TRAIN) is refused.
    """

    def layer_setup(self, bottom, top):
        p = self.layer_param.hdf5_data_param
        if self.layer_param.HasField("transform_param"):
            raise self.error("HDF5Data does not transform data with transform_param (e2e_face's "
                             "hdf5_data_param has scale, mirror, mean_value, crop_size)")
        self.crop = int(p.crop_size) if p.HasField("crop_size") else 0
        num = int(p.crop_num)
        if self.phase == caffe_pb2.TEST and p.mirror:
            num *= 2
        self.crop_num = num if self.crop else 0
        self.multi = self.phase == caffe_pb2.TEST and self.crop_num > 1
        if self.crop and self.crop_num > 1 and not self.multi:
            raise self.error("crop_num %d with crop_size in TRAIN: the fork's TRAIN batches hold "
                             "one crop per image" % self.crop_num)
        if self.multi and self.crop_num // (2 if p.mirror else 1) > 5:
            raise self.error("crop_num %d: the fork has 5 crop positions" % p.crop_num)
        super().layer_setup(bottom, top)

    def _read(self, f, path):
        data = super()._read(f, path)
        p = self.layer_param.hdf5_data_param
        x = data[0]
        if x.ndim != 4:
            raise self.error("%s: '%s' must be rows x C x H x W to be transformed, got shape %s"
                             % (path, self.names[0], x.shape))
        n, c, h, w = x.shape
        if self.crop and (self.crop > h or self.crop > w):
            raise self.error("%s: crop_size %d is larger than the %d x %d images"
                             % (path, self.crop, h, w))
        if self.crop and self.crop_num <= 1:
            if self.phase == caffe_pb2.TRAIN:
                h_off = int(self.rng.integers(0, h - self.crop + 1))
                w_off = int(self.rng.integers(0, w - self.crop + 1))
            else:
                h_off, w_off = (h - self.crop) // 2, (w - self.crop) // 2
            x = x[:, :, h_off:h_off + self.crop, w_off:w_off + self.crop].copy()
        if len(p.mean_value):
            if len(p.mean_value) not in (1, c):
                raise self.error("specify either 1 mean_value or as many as channels (%d), got %d"
                                 % (c, len(p.mean_value)))
            x -= np.broadcast_to(np.asarray(p.mean_value, x.dtype), (c,))[None, :, None, None]
        if p.mirror:
            flip = self.rng.integers(0, 2, size=n).astype(bool)
            x[flip] = x[flip][..., ::-1]
        if p.scale != 1:
            x *= x.dtype.type(p.scale)
        data[0] = x
        return data

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if self.multi:
            c = self.data[0].shape[1]
            top[0].reshape(self.batch_size * self.crop_num, c, self.crop, self.crop)

    def _next(self):
        last = self.current_row + 1 == self.data[0].shape[0]
        if last and len(self.files) == 1:   # the fork lists a single file twice: reloaded
            self.offset += 1
            self._load(self.files[0])
            self.current_row = 0
            return
        super()._next()

    def _crops(self, img):
        """The test crops of one image (C x H x W): flipped ones first with ``mirror``."""
        c, h, w = img.shape
        k = self.crop_num // (2 if self.layer_param.hdf5_data_param.mirror else 1)
        out = [img[:, ho:ho + self.crop, wo:wo + self.crop]
               for ho, wo in crop_offsets(h, w, self.crop)[:k]]
        if self.layer_param.hdf5_data_param.mirror:
            out = [o[..., ::-1] for o in out] + out
        return out

    def forward_cpu(self, bottom, top):
        if not self.multi:
            return super().forward_cpu(bottom, top)
        for i in range(self.batch_size):
            while self._skip():
                self._next()
            r = self.row_order[self.current_row]
            top[0].data[i * self.crop_num:(i + 1) * self.crop_num] = self._crops(self.data[0][r])
            for name, t, d in zip(self.names[1:], top[1:], self.data[1:]):
                if d.shape[1:] != t.shape[1:]:
                    raise self.error("file %s changes the shape of top '%s' from %s to %s"
                                     % (self.files[self.file_order[self.current_file]],
                                        name, t.shape[1:], d.shape[1:]))
                t.data[i] = d[r]
            self._next()
