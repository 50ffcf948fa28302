"""WeitaoVan/L-GM-loss's HDF5Data: Caffe's HDF5Data plus cropping, mean subtraction, mirroring
and scaling of the first top (src/caffe/layers/hdf5_data_layer.cpp, Yuanyi Zhong's additions).

Each time a file is loaded, its first dataset (rows x C x H x W) is transformed as a whole, in
this order:
    crop (``crop_size`` c, when the effective crop_num <= 1): one c x c window for the whole
        file, at a random offset in TRAIN and the centred one ((H - c) / 2, (W - c) / 2) in TEST;
    mean: x -= mean_value[ch] (one value for every channel, or one per channel);
    mirror: every row, with probability 1/2, flipped left-right (in either phase);
    scale: x *= ``scale``.
The effective crop_num is ``crop_num`` (default 1), doubled in TEST when ``mirror`` is set, and 0
without ``crop_size``. In TEST with crop_num > 1 the file is not cropped at load; each served row
gives crop_num tops: with ``mirror`` first crop_num / 2 flipped windows, then crop_num / 2 plain
ones (else crop_num plain ones), the windows at the centre, top-left, bottom-right, top-right,
bottom-left, in that order. The first top then has batch_size x crop_num rows, the others
batch_size. Rows are served as caffepy's HDF5Data serves them (order, shuffle, several files);
a single listed file is reloaded, and so transformed anew, at the end of every pass (the fork
lists it twice).

prototxt: ``hdf5_data_param { source batch_size shuffle crop_size crop_num mean_value mirror
scale }``. Refused: crop_num > 1 in TRAIN (the fork then copies uncropped values into cropped
rows), more than 5 windows per half, a window larger than the images, a first dataset that is
not 4-D.
"""
import numpy as np

from ...layers.base import register_variant
from ...layers.data_hdf5 import HDF5DataLayer
from ...proto import caffe_pb2


def _forks_fields(lp):
    p = lp.hdf5_data_param
    return (p.HasField("crop_size") or p.mirror or len(p.mean_value) > 0
            or p.HasField("scale") or p.HasField("crop_num"))


@register_variant("HDF5Data", _forks_fields)
class CropMirrorHDF5DataLayer(HDF5DataLayer):
    __doc__ = __doc__

    def layer_setup(self, bottom, top):
        p = self.layer_param.hdf5_data_param
        test = self.phase == caffe_pb2.TEST
        self.crop = int(p.crop_size) if p.HasField("crop_size") else 0
        self.crop_num = int(p.crop_num) * (2 if test and p.mirror else 1) if self.crop else 0
        if self.crop_num > 1 and not test:
            raise self.error("hdf5_data_param.crop_num > 1 is served in TEST only")
        if self.crop_num // (2 if p.mirror else 1) > 5:
            raise self.error("hdf5_data_param.crop_num: at most 5 windows (centre and corners)")
        super().layer_setup(bottom, top)

    def _load(self, path):
        super()._load(path)
        p = self.layer_param.hdf5_data_param
        x = self.data[0]
        if x.ndim != 4:
            raise self.error("%s: '%s' must be rows x C x H x W for crop / mean / mirror / scale, "
                             "got %s" % (path, self.names[0], x.shape))
        n, c, h, w = x.shape
        if self.crop and (self.crop > h or self.crop > w):
            raise self.error("%s: crop_size %d is larger than the images (%d x %d)"
                             % (path, self.crop, h, w))
        if self.crop and self.crop_num <= 1:
            if self.phase == caffe_pb2.TRAIN:
                y0, x0 = (int(v) for v in self.rng.integers(0, [h - self.crop + 1,
                                                                  w - self.crop + 1]))
            else:
                y0, x0 = (h - self.crop) // 2, (w - self.crop) // 2
            x = x[:, :, y0:y0 + self.crop, x0:x0 + self.crop].copy()
        if len(p.mean_value):
            if len(p.mean_value) not in (1, c):
                raise self.error("give 1 mean_value or one per channel (%d)" % c)
            x = x - np.asarray(p.mean_value, dtype=x.dtype).reshape(-1, 1, 1)
        if p.mirror:
            flip = self.rng.integers(0, 2, size=n).astype(bool)
            x[flip] = x[flip][..., ::-1]
        if p.scale != 1:
            x = x * x.dtype.type(p.scale)
        self.data[0] = np.ascontiguousarray(x)

    def _next(self):
        if len(self.files) == 1 and self.current_row + 1 == self.data[0].shape[0]:
            # the fork lists a single file twice: every pass reloads it (new crop offset, flips)
            self.offset += 1
            self.current_row = 0
            self._load(self.files[0])
            return
        super()._next()

    def reshape(self, bottom, top):
        super().reshape(bottom, top)
        if self.crop_num > 1:
            c = self.data[0].shape[1]
            top[0].reshape((self.batch_size * self.crop_num, c, self.crop, self.crop))

    def forward_cpu(self, bottom, top):
        if self.crop_num <= 1:
            return super().forward_cpu(bottom, top)
        mirror = self.layer_param.hdf5_data_param.mirror
        per = self.crop_num // 2 if mirror else self.crop_num
        h, w = self.data[0].shape[2:]
        k = self.crop
        offsets = [((h - k) // 2, (w - k) // 2), (0, 0), (h - k, w - k), (0, w - k), (h - k, 0)]
        for i in range(self.batch_size):
            r = self.row_order[self.current_row]
            img = self.data[0][r]
            wins = [img[:, a:a + k, b:b + k] for a, b in offsets[:per]]
            if mirror:
                wins = [v[..., ::-1] for v in wins] + wins
            top[0].data[i * self.crop_num:(i + 1) * self.crop_num] = np.stack(wins)
            for t, d in zip(top[1:], self.data[1:]):
                t.data[i] = d[r]
            self._next()
