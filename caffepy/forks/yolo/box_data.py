"""caffe-yolo's ``BoxData`` reader (yeahkun/caffe-yolo: src/caffe/layers/box_data_layer.cpp and the
box form of DataTransformer::Transform in src/caffe/data_transformer.cpp)."""
import numpy as np

from ...data.image import resize_bilinear
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import DataLayer, _DBLoader, _ensure

#: a TRAIN crop is drawn again while it holds no box centre; this many draws, then an error
MAX_CROP_DRAWS = 1000


class _BoxLoader(_DBLoader):
    """Datums with an encoded image and float_data rows [class, difficult, x, y, w, h]."""

    def __init__(self, param, transformer, phase, what, sides):
        super().__init__(param, transformer, phase, what)
        self.sides, self.train = sides, not self.keep_all

    def _boxes(self, d):
        f = np.asarray(d.float_data, dtype=np.float32)
        if f.size == 0 or f.size % 6:
            raise CaffeError("%s: float_data holds %d values; each box needs 6 (class, difficult, "
                             "x, y, w, h) and every image one box at least"
                             % (self._record(), f.size))
        if not d.encoded:
            raise CaffeError("%s: BoxData needs an encoded image in each Datum" % self._record())
        return f.reshape(-1, 6)

    def _crop(self, item, boxes):
        """The fork's TRAIN crop: scale 1 - U{0..29} / 100, keep the boxes whose centre pixel falls
        inside, resize the crop back to the image's size."""
        C, H, W = item.shape
        rng = self.transformer.rng
        for _ in range(MAX_CROP_DRAWS):
            s = 1.0 - int(rng.integers(0, 30)) / 100.0
            rw, rh = int(W * s) - 1, int(H * s) - 1
            rx, ry = int(rng.integers(0, W - rw)), int(rng.integers(0, H - rh))
            kept = []
            for cls, diff, x, y, w, h in boxes:
                ox, oy = int(np.float32(x * W)), int(np.float32(y * H))
                ow, oh = int(np.float32(w * W)), int(np.float32(h * H))
                if rx <= ox < rx + rw and ry <= oy < ry + rh:
                    kept.append([cls, diff] + [np.float32(v) / np.float32(d) for v, d in
                                               ((ox - rx, rw), (oy - ry, rh), (ow, rw), (oh, rh))])
            if kept:
                crop = item[:, ry:ry + rh, rx:rx + rw].transpose(1, 2, 0)
                out = resize_bilinear(crop, H, W)
                out = out.reshape(H, W, C)
                return np.ascontiguousarray(out.transpose(2, 0, 1)), np.array(kept, np.float32)
        raise CaffeError("%s: no crop of %d draws holds a box centre (the fork draws forever)"
                         % (self._record(), MAX_CROP_DRAWS))

    def _grid(self, boxes, side):
        K = side * side
        lab = np.zeros(7 * K, np.float32)
        lab[2 * K:3 * K] = -1
        for cls, diff, x, y, w, h in boxes:
            if cls < 0:
                raise CaffeError("%s: class label %g must be >= 0" % (self._record(), cls))
            j = side * min(int(np.floor(y * side)), side - 1) + min(int(np.floor(x * side)),
                                                                    side - 1)
            lab[j], lab[K + j], lab[2 * K + j] = diff, 1, cls
            lab[3 * K + 4 * j:3 * K + 4 * j + 4] = x, y, w, h
        return lab

    def load_batch(self, buf):
        items, grids = [], []
        for _ in range(self.batch_size):
            d, item = self._datum(items[0].shape if items else None)
            if self.sides:
                try:
                    boxes = self._boxes(d)
                    if self.train:
                        item, boxes = self._crop(item, boxes)
                except CaffeError as e:
                    raise CaffeError("%s: %s" % (self.what, e)) from None
                grids.append([self._grid(boxes, s) for s in self.sides])
            items.append(item)
        shape = (self.batch_size,) + self.transformer.infer_shape(items[0].shape)
        self.transformer.transform_arrays(items, _ensure(buf, "data", shape, self.transformer.dtype))
        for i, side in enumerate(self.sides):
            key = "label%d" % i
            buf.setdefault(key, np.zeros(0, self.transformer.dtype))
            out = _ensure(buf, key, (self.batch_size, 7 * side * side), self.transformer.dtype)
            out[...] = [g[i] for g in grids]


@register_layer("BoxData")
class BoxDataLayer(DataLayer):
    """YOLOv1 training data: images from an LMDB / LevelDB of Datums, box labels on a grid.

    Each Datum holds an encoded image and float_data rows [class, difficult, x, y, w, h] (centre
    and size relative to the image). TRAIN: a crop of scale s = 1 - U{0 .. 29} / 100 (width
    int(W s) - 1, the same for the height) at a random offset keeps the boxes whose centre pixel
    (int(x W), int(y H)) lies inside, their values made relative to the crop; it is drawn again
    while it keeps none (here at most 1000 times, then an error), and resized back to W x H with
    bilinear interpolation. TEST: the image and boxes as stored. Then transform_param as for Data
    (its mirror flips the image only, as the fork's). Label top i (``data_param.side`` [i],
    default [7]): 7 S^2 values per image -- difficult at cell j, objectness 1 at S^2 + j, class
    at 2 S^2 + j (-1 where no box), x y w h at 3 S^2 + 4 j -- for the cell j = S min(floor(y S),
    S - 1) + min(floor(x S), S - 1) of each box in order (a later box overwrites a cell).

    prototxt: ``data_param { source backend batch_size side: 7 (repeated: one label top each) }``
    and ``transform_param``. Tops: data (N x C x H x W) and one label (N x 7 S^2) per side; the
    fork requires as many label tops as sides. Bad Datums stop with one line naming the record.
    """
    max_top_blobs = None

    def layer_setup(self, bottom, top):
        p = self.layer_param.data_param
        self.sides = ([int(s) for s in p.side] or [7]) if len(top) > 1 else []
        if len(top) > 1 and len(self.sides) != len(top) - 1:
            raise self.error("data_param has %d side value(s) for %d label top(s)"
                             % (len(self.sides), len(top) - 1))
        self.top_keys = ("data",) + tuple("label%d" % i for i in range(len(self.sides)))
        super().layer_setup(bottom, top)
        for i, s in enumerate(self.sides):
            top[1 + i].reshape((top[0].shape[0], 7 * s * s))

    def make_loader(self, top):
        p = self.layer_param.data_param
        if not p.source:
            raise self.error("data_param.source is not set")
        if p.batch_size < 1:
            raise self.error("data_param.batch_size must be positive")
        try:
            return _BoxLoader(p, self.make_transformer(p), self.phase, self.describe(),
                              self.sides)
        except CaffeError as e:
            if str(e).startswith(self.describe()):
                raise
            raise self.error(str(e))
