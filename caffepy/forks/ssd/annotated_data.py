"""SSD's AnnotatedData layer (weiliu89/caffe): images with their boxes from an LMDB / LevelDB of
``AnnotatedDatum``, augmented as SSD trains.

prototxt::

    layer { type: "AnnotatedData" top: "data" top: "label"
      data_param { source: "<db>" backend: LMDB batch_size: N }
      transform_param { mirror, mean_value / mean_file, scale, crop_size / crop_h + crop_w,
                        resize_param, distort_param, expand_param, emit_constraint, noise_param }
      annotated_data_param { batch_sampler { ... } ... label_map_file anno_type } }

Per image, in SSD's order (caffepy.forks.ssd.augment and caffepy.forks.ssd.boxes have the
details): decode; ``distort_param``;
``expand_param``; one of the boxes the ``batch_sampler``s generate, picked at random, cropped
(none generated: the whole image); then the transform: mirror drawn, ``resize_param``, crop
(``crop_size`` or ``crop_h`` x ``crop_w``: random in TRAIN, centred in TEST), mean subtracted
(the mean file indexed at the crop), ``scale``; the boxes follow every step (resize policy, emit
constraint, projection onto the crop, mirror) and boxes that leave the image are dropped.

Tops: ``data`` N x C x H x W; ``label`` 1 x 1 x B x 8, one row per box of the batch
``[item_id, group_label, instance_id, xmin, ymin, xmax, ymax, difficult]``, or one row of -1 when
the batch has no box. A database whose records carry no ``type`` (and no ``anno_type`` given) gives
the datums' labels (N) instead, as SSD does. All items of a batch must end at one size (give a
``resize_param``, or batch_size 1); FIT_SMALL_SIZE takes batch_size 1 as in SSD.
``label_map_file`` is read by nothing here (SSD only logs it); other forks' annotated_data_param
fields (MobileNet-YOLO's ``yolo_data_type``, ``seg_scales``, ...) are refused when set.
``noise_param`` supports ``decolorize``, ``posterize`` and ``inverse`` (others refused). Random
draws come from the layer's seeded generator (caffepy.common's seed), so a seeded run is
reproducible, and the position and generator state are saved with snapshots as the Data layer's.
"""
import numpy as np

from ...data.datum import datum_to_array
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer, _DBLoader, _bad_record, _ensure
from ...proto import caffe_pb2
from ...proto.harvest_policy import unread_fields
from . import augment

RP = caffe_pb2.ResizeParameter
_NOISE_OK = ("decolorize", "posterize", "inverse", "prob")
_SSD_FIELDS = ("batch_sampler", "label_map_file", "anno_type")


def parse_annotated_datum(value, what):
    a = caffe_pb2.AnnotatedDatum()
    try:
        a.ParseFromString(bytes(value))
    except Exception as e:
        raise CaffeError("%s: not a valid AnnotatedDatum (%s)" % (what, e))
    if not a.HasField("datum"):
        raise CaffeError("%s: the AnnotatedDatum has no datum" % what)
    return a


def groups_of(anno):
    return [(g.group_label, [(a.instance_id, [a.bbox.xmin, a.bbox.ymin, a.bbox.xmax, a.bbox.ymax],
                              bool(a.bbox.difficult)) for a in g.annotation])
            for g in anno.annotation_group]


class _AnnotatedLoader(_DBLoader):
    """The Data layer's cursor, reading AnnotatedDatums and augmenting them one by one."""

    def __init__(self, layer, param, tp, ap, transformer):
        super().__init__(param, transformer, layer.phase, layer.describe())
        self.tp, self.ap = tp, ap
        other = unread_fields(ap, _SSD_FIELDS)
        if other:
            raise CaffeError("%s: annotated_data_param.%s is not SSD's (MobileNet-YOLO's and other "
                             "forks' AnnotatedData fields are not implemented)"
                             % (self.what, ", ".join(other)))
        self.samplers = list(self.ap.batch_sampler)
        self.crop_h = int(self.tp.crop_size or self.tp.crop_h)
        self.crop_w = int(self.tp.crop_size or self.tp.crop_w)
        for f, _ in self.tp.noise_param.ListFields() if self.tp.HasField("noise_param") else ():
            if f.name not in _NOISE_OK and f.name != "saltpepper_param":
                raise CaffeError("%s: noise_param.%s is not supported (only %s)"
                                 % (self.what, f.name, ", ".join(_NOISE_OK[:3])))
        if self.tp.HasField("resize_param"):
            rp = self.tp.resize_param
            if rp.height <= 0 or rp.width <= 0:
                raise CaffeError("%s: resize_param needs positive height and width" % self.what)
            if rp.resize_mode == RP.FIT_SMALL_SIZE and self.batch_size != 1:
                raise CaffeError("%s: resize_mode FIT_SMALL_SIZE needs batch_size 1" % self.what)
        if self.tp.HasField("expand_param") and self.tp.expand_param.max_expand_ratio <= 1:
            raise CaffeError("%s: expand_param.max_expand_ratio must be greater than 1" % self.what)
        first = self._first()
        self.has_type = first.HasField("type") or self.ap.HasField("anno_type")
        self.anno_type = self.ap.anno_type if self.ap.HasField("anno_type") else first.type
        if self.has_type and self.anno_type != caffe_pb2.AnnotatedDatum.BBOX:
            raise CaffeError("%s: annotation type %d is not BBOX, the only one SSD knows"
                             % (self.what, self.anno_type))
        self.first_boxes = sum(len(g.annotation) for g in first.annotation_group)
        self.phase_train = layer.phase == caffe_pb2.TRAIN

    def _decode(self, shape=None):
        rec = self._record()
        anno = parse_annotated_datum(self.cursor.value, rec)
        img = datum_to_array(anno.datum, self.transformer.color, rec).transpose(1, 2, 0)
        return anno, np.ascontiguousarray(img)

    def _first(self):
        while True:
            try:
                return self._decode()[0]
            except CaffeError as e:
                record = self._record()
                _bad_record(self, record, str(e).replace(record + ": ", ""))
                self._next()

    def item_shape(self, img_shape):
        h, w, c = img_shape
        if self.tp.HasField("resize_param"):
            w, h = augment.infer_new_size(self.tp.resize_param, w, h)
        if h < self.crop_h or w < self.crop_w:
            raise CaffeError("%s: crop %dx%d is larger than the %dx%d image"
                             % (self.what, self.crop_h, self.crop_w, h, w))
        return (c, self.crop_h or h, self.crop_w or w)

    def data_shape(self):
        while True:
            try:
                img = self._decode()[1]
                break
            except CaffeError as e:
                record = self._record()
                _bad_record(self, record, str(e).replace(record + ": ", ""))
                self._next()
        return (self.batch_size,) + self.item_shape(img.shape)

    def label_shape(self):
        if not self.has_type:
            return (self.batch_size,)
        return (1, 1, max(self.first_boxes, 1), 8)

    def _fill(self):
        t = self.transformer
        return t.mean if t.mean is not None else t.mean_values

    def _noise(self, img):
        npar = self.tp.noise_param
        if npar.decolorize and img.shape[2] == 3:
            gray = img.astype(np.float64) @ np.array([0.114, 0.587, 0.299])
            img = augment._store(np.repeat(gray[:, :, None], 3, 2), img)
        if npar.posterize and img.dtype == np.uint8:
            img = (img // 64 * 64 + 32).astype(np.uint8)
        if npar.inverse and img.dtype == np.uint8:
            img = 255 - img
        return img

    def augment(self, anno, img):
        """(C x h x w float array, groups) for one record."""
        rng, tp = self.transformer.rng, self.tp
        groups = groups_of(anno)
        if tp.HasField("distort_param"):
            img = augment.distort(img, tp.distort_param, rng)
        if tp.HasField("expand_param"):
            img, groups = augment.expand(img, groups, tp.expand_param, self._fill(), rng, tp)
        if self.samplers:
            boxes = augment.generate_batch_samples(groups, self.samplers, rng)
            if boxes:
                box = boxes[int(rng.integers(len(boxes)))]
                img = augment.crop_image(img, box)
                groups = augment.transform_annotation(groups, augment.clip(box), tp=tp)
        if img.shape[0] < 1 or img.shape[1] < 1:
            raise CaffeError("%s: an augmented image came out empty" % self.what)
        src_hw = img.shape[:2]
        mirror = bool(self.transformer.mirror and rng.integers(0, 2))
        if tp.HasField("resize_param"):
            img = augment.resize(img, tp.resize_param, rng)
        if tp.HasField("noise_param"):
            img = self._noise(img)
        h, w = img.shape[:2]
        ch, cw = self.crop_h or h, self.crop_w or w
        if h < ch or w < cw:
            raise CaffeError("%s: crop %dx%d is larger than the %dx%d image" % (self.what, ch, cw, h, w))
        if (self.crop_h and self.crop_w) and self.phase_train:
            h_off, w_off = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        elif self.crop_h and self.crop_w:
            h_off, w_off = (h - ch) // 2, (w - cw) // 2
        else:
            h_off = w_off = 0
        crop = [w_off / w, h_off / h, (w_off + cw) / w, (h_off + ch) / h]
        out = img[h_off:h_off + ch, w_off:w_off + cw].transpose(2, 0, 1).astype(self.transformer.dtype)
        t = self.transformer
        if t.mean is not None:
            if t.mean.shape[0] != out.shape[0] or t.mean.shape[1:] != (h, w):
                raise CaffeError("%s: mean_file has shape %s, the resized image is %s"
                                 % (self.what, t.mean.shape, (out.shape[0], h, w)))
            out -= t.mean[:, h_off:h_off + ch, w_off:w_off + cw]
        elif t.mean_values is not None:
            if len(t.mean_values) not in (1, out.shape[0]):
                raise CaffeError("%s: specify either 1 mean_value or as many as channels (%d)"
                                 % (self.what, out.shape[0]))
            out -= np.broadcast_to(t.mean_values, (out.shape[0],))[:, None, None]
        if t.scale != 1.0:
            out *= t.dtype.type(t.scale)
        if mirror:
            out = out[:, :, ::-1]
        groups = augment.transform_annotation(groups, crop, mirror, tp, src_hw)
        return out, groups

    def load_batch(self, buf):
        items, rows = [], []
        for item_id in range(self.batch_size):
            anno, img = self._datum()
            if self.has_type and anno.HasField("type") and not self.ap.HasField("anno_type") \
                    and anno.type != self.anno_type:
                raise CaffeError("%s: %s has annotation type %d, the first record's is %d"
                                 % (self.what, self._last, anno.type, self.anno_type))
            if self.has_type and not anno.HasField("type") and not self.ap.HasField("anno_type"):
                raise CaffeError("%s: %s has no annotation type" % (self.what, self._last))
            out, groups = self.augment(anno, img)
            if items and out.shape != items[0].shape:
                raise CaffeError("%s: %s gives a %s item, the batch's first is %s (give a "
                                 "resize_param or batch_size 1)"
                                 % (self.what, self._last, out.shape, items[0].shape))
            items.append(out)
            if self.has_type:
                rows.extend([item_id, label, inst] + box + [float(diff)]
                            for label, annos in groups for inst, box, diff in annos)
            else:
                rows.append(anno.datum.label)
        data = _ensure(buf, "data", (self.batch_size,) + items[0].shape, self.transformer.dtype)
        data[...] = np.stack(items)
        if not self.has_type:
            label = _ensure(buf, "label", (self.batch_size,), self.transformer.dtype)
            label[...] = rows
        elif rows:
            buf["label"] = np.asarray(rows, self.transformer.dtype).reshape(1, 1, len(rows), 8)
        else:
            buf["label"] = np.full((1, 1, 1, 8), -1, self.transformer.dtype)

    def _datum(self, shape=None):
        while True:
            while self._skip():
                self._next()
            self._last = self._record()
            try:
                d, item = self._decode()
            except CaffeError as e:
                _bad_record(self, self._last, str(e).replace(self._last + ": ", ""))
                self._next()
                continue
            self._next()
            self.skipped = 0
            return d, item


@register_layer("AnnotatedData")
class AnnotatedDataLayer(BasePrefetchingDataLayer):
    """SSD's AnnotatedData; see the module docstring."""

    def make_loader(self, top):
        p = self.layer_param.data_param
        if not p.source:
            raise self.error("data_param.source is not set")
        if p.batch_size < 1:
            raise self.error("data_param.batch_size must be positive")
        try:
            return _AnnotatedLoader(self, p, self.layer_param.transform_param,
                                    self.layer_param.annotated_data_param, self.make_transformer())
        except CaffeError as e:
            if str(e).startswith(self.describe()):
                raise
            raise self.error(str(e))

    def _start(self, loader, top):
        super()._start(loader, top)
        if self.output_labels:
            top[1].reshape(loader.label_shape())
