"""DataTransformer: Caffe's ``transform_param`` applied to a whole batch at once.

For every item of an N x C x H x W batch (uint8 or float), exactly as Caffe's DataTransformer:

    mirror_i = mirror and rand(2)                       # drawn first, then the crop offsets
    crop:  TRAIN: h_off = rand(H - crop + 1), w_off = rand(W - crop + 1)
           TEST:  h_off = (H - crop) // 2,    w_off = (W - crop) // 2
    out[c, h, w'] = (x[c, h_off + h, w_off + w] - mean) * scale
        mean = mean_file[c, h_off + h, w_off + w]  (the mean is indexed before the crop)
             | mean_value[c]  (one value is used for every channel)
        w' = crop_w - 1 - w when mirrored, else w

transform_param fields: ``scale`` (1), ``mirror`` (false), ``crop_size`` (0 = no crop),
``mirror_v`` (false; xavigibert/caffe: a random vertical flip too, drawn after ``mirror``; needs
``crop_size``), ``mean_file`` (a .binaryproto of shape 1 x C x H x W, the uncropped item shape)
or ``mean_value`` (once or once per channel; not both), ``force_color`` / ``force_gray``
(decode encoded datums as 3 / 1 channels; not both; ignored, as in Caffe, for raw datums).

Random draws come from the transformer's own generator, seeded from the process generator
(``caffepy.common``) when the transformer is built, so a seeded run is reproducible even though
batches are prepared on the prefetch thread (Caffe reseeds its prefetch thread the same way).
"""
import numpy as np

from .. import common
from ..errors import CaffeError
from ..proto import caffe_pb2
from .datum import datum_to_array, read_mean

_LEGACY_FIELDS = ("scale", "mean_file", "crop_size", "mirror")


def effective_transform_param(layer_param, legacy=None):
    """``layer_param.transform_param`` plus the deprecated copies in data/image/window params.

    Fields set in ``transform_param`` win; the legacy ``scale / mean_file / crop_size / mirror`` of
    ``legacy`` (e.g. ``layer_param.data_param``) fill in what it leaves unset (Caffe's
    UpgradeNetDataTransformation).
    """
    tp = caffe_pb2.TransformationParameter()
    tp.CopyFrom(layer_param.transform_param)
    if legacy is not None:
        for f in _LEGACY_FIELDS:
            if legacy.HasField(f) and not tp.HasField(f):
                setattr(tp, f, getattr(legacy, f))
    return tp


class DataTransformer(object):
    """Applies a TransformationParameter to batches; see the module docstring for the maths.

    Args:
        param: a ``TransformationParameter``.
        phase: ``caffe_pb2.TRAIN`` (random crops) or ``TEST`` (centre crops).
        dtype: output float dtype.
        what: a prefix for error messages (the layer's description).
        seed: seed of the transformer's generator (default: drawn from caffepy.common's).
    """

    def __init__(self, param, phase=caffe_pb2.TRAIN, dtype=np.float32, what="transform_param",
                 seed=None):
        self.param = param
        self.phase = phase
        self.dtype = np.dtype(dtype)
        self.what = what
        self.scale = float(param.scale)
        self.mirror = bool(param.mirror)
        self.crop_size = int(param.crop_size)
        # xavigibert/caffe's mirror_v (src/caffe/data_transformer.cpp): a random vertical flip of
        # the crop, drawn after the mirror; the fork indexes rows by crop_size, so it needs one.
        self.mirror_v = bool(getattr(param, "mirror_v", False))
        if self.mirror_v and not self.crop_size:
            raise CaffeError("%s: mirror_v (xavigibert/caffe's vertical flip) needs crop_size; the "
                             "fork flips rows of the crop only" % what)
        if param.HasField("mean_file") and len(param.mean_value):
            raise CaffeError("%s: cannot specify mean_file and mean_value at the same time" % what)
        if param.force_color and param.force_gray:
            raise CaffeError("%s: cannot set both force_color and force_gray" % what)
        self.mean = read_mean(param.mean_file).astype(self.dtype) if param.HasField("mean_file") else None
        self.mean_values = np.asarray(param.mean_value, dtype=self.dtype) if len(param.mean_value) else None
        if seed is None:
            seed = int(common.rng().integers(0, 2 ** 63))
        self.rng = np.random.default_rng(seed)

    @property
    def color(self):
        """How encoded datums decode: True (force_color), False (force_gray) or None (native)."""
        if self.param.force_color:
            return True
        if self.param.force_gray:
            return False
        return None

    def infer_shape(self, item_shape):
        """The transformed (C, h, w) of an item of shape (C, H, W)."""
        c, h, w = item_shape
        if self.crop_size:
            if h < self.crop_size or w < self.crop_size:
                raise CaffeError("%s: crop_size %d is larger than the %dx%d input"
                                 % (self.what, self.crop_size, h, w))
            return (c, self.crop_size, self.crop_size)
        return (c, h, w)

    def _check(self, shape):
        n, c, h, w = shape
        if self.mean is not None and self.mean.shape != (c, h, w):
            raise CaffeError("%s: mean_file %s has shape %s but the data items are %s"
                             % (self.what, self.param.mean_file, self.mean.shape, (c, h, w)))
        if self.mean_values is not None and len(self.mean_values) not in (1, c):
            raise CaffeError("%s: specify either 1 mean_value or as many as channels (%d), got %d"
                             % (self.what, c, len(self.mean_values)))

    def transform(self, batch, out=None):
        """Transform an N x C x H x W array; returns (or fills) the N x C x h x w result."""
        batch = np.asarray(batch)
        if batch.ndim != 4:
            raise CaffeError("%s: expected an N x C x H x W batch, got shape %s" % (self.what, batch.shape))
        self._check(batch.shape)
        n, c, h, w = batch.shape
        _, oh, ow = self.infer_shape((c, h, w))
        mirror = (self.rng.integers(0, 2, size=n).astype(bool) if self.mirror
                  else np.zeros(n, dtype=bool))
        flip_v = self.rng.integers(0, 2, size=n).astype(bool) if self.mirror_v else None
        if self.crop_size and self.phase == caffe_pb2.TRAIN:
            h_off = self.rng.integers(0, h - oh + 1, size=n)
            w_off = self.rng.integers(0, w - ow + 1, size=n)
        else:
            h_off = np.full(n, (h - oh) // 2)
            w_off = np.full(n, (w - ow) // 2)
        if out is None:
            out = np.empty((n, c, oh, ow), dtype=self.dtype)
        elif out.shape != (n, c, oh, ow):
            raise CaffeError("%s: output shape %s, expected %s" % (self.what, out.shape, (n, c, oh, ow)))
        uniform = (oh, ow) == (h, w) or (np.all(h_off == h_off[0]) and np.all(w_off == w_off[0]))
        if uniform:
            hs, ws = slice(h_off[0], h_off[0] + oh), slice(w_off[0], w_off[0] + ow)
            out[...] = batch[:, :, hs, ws]
            if self.mean is not None:
                out -= self.mean[None, :, hs, ws]
        else:
            win = np.lib.stride_tricks.sliding_window_view(batch, (oh, ow), axis=(2, 3))
            out[...] = win[np.arange(n), :, h_off, w_off]
            if self.mean is not None:
                mwin = np.lib.stride_tricks.sliding_window_view(self.mean, (oh, ow), axis=(1, 2))
                out -= mwin[:, h_off, w_off].transpose(1, 0, 2, 3)
        if self.mean_values is not None:
            mv = np.broadcast_to(self.mean_values, (c,)) if len(self.mean_values) == 1 else self.mean_values
            out -= mv[None, :, None, None]
        if self.scale != 1.0:
            out *= self.dtype.type(self.scale)
        if mirror.any():
            out[mirror] = out[mirror][..., ::-1]
        if flip_v is not None and flip_v.any():
            out[flip_v] = out[flip_v][..., ::-1, :]
        return out

    def transform_arrays(self, items, out=None):
        """Transform a list of C x H x W arrays of one shape (stacked, then ``transform``)."""
        shapes = {a.shape for a in items}
        if len(shapes) != 1:
            raise CaffeError("%s: items of one batch have different shapes %s (use batch_size 1 or "
                             "resize them)" % (self.what, sorted(shapes)))
        return self.transform(np.stack(items), out)

    def transform_datums(self, datums, out=None):
        return self.transform_arrays([datum_to_array(d, self.color, self.what) for d in datums], out)
