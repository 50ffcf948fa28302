"""Data layers that read a database on a prefetch thread (Data); MemoryData is in
:mod:`caffepy.layers.data_memory`, ImageData in :mod:`caffepy.layers.data_image`.

Every prefetching layer (Caffe's BasePrefetchingDataLayer) prepares batches on a daemon thread
(``caffepy.data.prefetch``) into ``data_param.prefetch`` (default 4) buffers; ``forward`` copies the
oldest ready batch into the tops (reshaping them to the batch) and hands the buffer back. ``close()``
stops the thread; a dropped layer stops it too. Tops: ``data`` (N x C x h x w) and, when a second
top is given, ``label`` (N). No bottoms, no backward.
"""
import os
import weakref

import numpy as np

from .. import common
from ..data.datum import datum_to_array, parse_datum
from ..data.db import open_db
from ..data.prefetch import Prefetcher
from ..data.state import set_rng
from ..data.transformer import DataTransformer, effective_transform_param
from ..errors import CaffeError
from ..log import warning
from ..proto import caffe_pb2
from .base import Layer, register_layer


class BasePrefetchingDataLayer(Layer):
    """Owns the Prefetcher; subclasses build a loader with ``data_shape()`` and ``load_batch(buf)``
    (and optionally ``close()``, called once the thread has stopped). Forward gives top i the
    buffer's array ``top_keys[i]``."""
    exact_num_bottom_blobs = 0
    min_top_blobs = 1
    max_top_blobs = 2
    prefetcher = None
    top_keys = ("data", "label")

    def describe(self):
        return "layer '%s' (%s)" % (self.layer_param.name, self.layer_param.type)

    def make_transformer(self, legacy=None):
        tp = effective_transform_param(self.layer_param, legacy)
        return DataTransformer(tp, self.phase, self.dtype, what=self.describe())

    def make_loader(self, top):
        raise NotImplementedError

    def prefetch_count(self):
        return int(self.layer_param.data_param.prefetch)

    def layer_setup(self, bottom, top):
        self.close()
        self.output_labels = len(top) > 1
        self._top = top
        self._start(self.make_loader(top), top)

    def _start(self, loader, top):
        try:
            data_shape = loader.data_shape()
        except BaseException:
            if hasattr(loader, "close"):
                loader.close()
            raise
        top[0].reshape(data_shape)
        label_shape = tuple(data_shape[:1]) + tuple(getattr(loader, "label_item_shape", ()))
        if self.output_labels:
            top[1].reshape(label_shape)
        dtype = self.dtype
        self._data_state = loader.get_state()     # of the next batch forward will consume

        def make_buffer():
            return {"data": np.zeros(data_shape, dtype), "label": np.zeros(label_shape, dtype)}

        def load_batch(buf):
            loader.load_batch(buf)
            buf["state"] = loader.get_state()

        self.prefetcher = Prefetcher(load_batch, make_buffer, self.prefetch_count(),
                                     name="prefetch %s" % self.describe(),
                                     on_close=getattr(loader, "close", None))
        self._finalizer = weakref.finalize(self, self.prefetcher.close)

    def get_data_state(self):
        """The loader's state before the batch the next forward consumes (caffepy.data.state)."""
        return dict(self._data_state)

    def set_data_state(self, state):
        """Restart the prefetch thread from a saved state: a fresh loader, positioned there."""
        self.close()
        loader = self.make_loader(self._top)
        try:
            loader.set_state(state)
        except BaseException:
            if hasattr(loader, "close"):
                loader.close()
            raise
        self._start(loader, self._top)

    def reshape(self, bottom, top):
        """Tops take each batch's shape in forward."""

    def forward_cpu(self, bottom, top):
        """Each top takes the prefetched array of its key in ``top_keys`` (shape and values)."""
        buf = self.prefetcher.next()
        try:
            for blob, key in zip(top, self.top_keys):
                blob.reshape(buf[key].shape)
                np.copyto(blob.data, buf[key])
            self._data_state = buf["state"]
        finally:
            self.prefetcher.recycle(buf)

    def backward_cpu(self, top, propagate_down, bottom):
        """Data layers have no gradient."""

    def close(self):
        """Stop the prefetch thread (idempotent)."""
        if self.prefetcher is not None:
            self.prefetcher.close()


def _ensure(buf, key, shape, dtype):
    if buf[key].shape != tuple(shape):
        buf[key] = np.zeros(shape, dtype)
    return buf[key]


SKIP_ENV = "CAFFEPY_SKIP_BAD_RECORDS"


def skip_bad_records():
    """Whether a record that cannot be read (a damaged Datum, an image that does not decode) is
    skipped with one WARNING per record (``CAFFEPY_SKIP_BAD_RECORDS=1``, or ``caffepy train
    --skip_bad_records``) instead of stopping with one line naming it."""
    return os.environ.get(SKIP_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _bad_record(loader, record, error):
    """Stop naming ``record`` (source and key or line), or, when asked, warn once and go on."""
    why = str(error)
    if not skip_bad_records():
        raise CaffeError("%s: bad record %s: %s (set %s=1 or pass --skip_bad_records to skip such "
                         "records)" % (loader.what, record, why, SKIP_ENV))
    if record not in loader.warned:
        loader.warned.add(record)
        warning("data.py", "%s: skipping bad record %s: %s" % (loader.what, record, why))
    loader.skipped += 1
    if loader.skipped > loader.n_records:
        raise CaffeError("%s: every record of %s is bad (last: %s: %s)"
                         % (loader.what, loader.source, record, why))


class _DBLoader(object):
    """Reads Datums from a cursor that wraps around; runs on the prefetch thread after setup."""

    def __init__(self, param, transformer, phase, what):
        self.what = what
        self.batch_size = int(param.batch_size)
        self.transformer = transformer
        self.db = open_db(param.source, param.backend, "r")
        self.cursor = self.db.cursor()
        if not self.cursor.valid:
            raise CaffeError("%s: database %s is empty" % (what, param.source))
        self.keep_all = phase == caffe_pb2.TEST
        self.rank = getattr(common._state, "solver_rank", 0)
        self.size = max(1, getattr(common._state, "solver_count", 1))
        self.offset = 0
        self.source, self.warned, self.skipped = param.source, set(), 0
        self.n_records = len(self.db)
        if param.rand_skip:
            for _ in range(int(common.rng().integers(0, param.rand_skip))):
                self._next()

    def close(self):
        self.db.close()

    def get_state(self):
        return {"offset": self.offset, "key": bytes(self.cursor.key),
                "transform": self.transformer.rng.bit_generator.state}

    def set_state(self, state):
        self.cursor.seek(state["key"])
        if not self.cursor.valid:
            raise CaffeError("%s: the saved position (key %r) is not in the database"
                             % (self.what, state["key"]))
        self.offset = int(state["offset"])
        set_rng(self.transformer.rng, state["transform"])

    def _next(self):
        self.cursor.next()
        if not self.cursor.valid:
            self.cursor.seek_to_first()
        self.offset += 1

    def _skip(self):
        return not (self.keep_all or self.offset % self.size == self.rank)

    def _record(self):
        return "%s key %r" % (self.source, bytes(self.cursor.key))

    def _decode(self, shape=None):
        """(datum, C x H x W array) at the cursor; the record's errors name its source and key."""
        d = parse_datum(self.cursor.value, self._record())
        item = datum_to_array(d, self.transformer.color, self._record())
        if shape is not None and item.shape != shape:
            raise CaffeError("%s: shape %s, the batch's is %s" % (self._record(), item.shape, shape))
        return d, item

    def _datum(self, shape=None):
        while True:
            while self._skip():
                self._next()
            try:
                d, item = self._decode(shape)
            except CaffeError as e:
                record = self._record()
                _bad_record(self, record, str(e).replace(record + ": ", ""))
                self._next()
                continue
            self._next()
            self.skipped = 0
            return d, item

    def data_shape(self):
        while True:
            try:
                item = self._decode()[1].shape
                break
            except CaffeError as e:
                record = self._record()
                _bad_record(self, record, str(e).replace(record + ": ", ""))
                self._next()
        return (self.batch_size,) + self.transformer.infer_shape(item)

    def load_batch(self, buf):
        datums, items = [], []
        for _ in range(self.batch_size):
            d, item = self._datum(items[0].shape if items else None)
            datums.append(d)
            items.append(item)
        shape = (self.batch_size,) + self.transformer.infer_shape(items[0].shape)
        self.transformer.transform_arrays(items, _ensure(buf, "data", shape, self.transformer.dtype))
        shape = (self.batch_size,) + self.label_item_shape
        labels = _ensure(buf, "label", shape, self.transformer.dtype)
        labels[...] = np.reshape([self.label(d) for d in datums], shape)

    label_item_shape = ()   # per item: () for Caffe's one label; a fork reader may give more

    def label(self, datum):
        return datum.label


@register_layer("Data")
class DataLayer(BasePrefetchingDataLayer):
    """Reads Datums from an LMDB or LevelDB, as Caffe's DataLayer.

    prototxt: ``data_param { source: "<db dir>" backend: LEVELDB|LMDB (LEVELDB) batch_size: N
    rand_skip: 0 prefetch: 4 }`` and ``transform_param { ... }`` (see caffepy.data.transformer).
    Datums may hold uint8 ``data``, ``float_data`` or an ``encoded`` PNG/JPEG (decoded to BGR).
    Each batch takes the shape of its first datum; the cursor wraps to the first key at the end.
    ``rand_skip: K`` skips a random number in [0, K) of items at start. With several solvers
    (solver_count > 1) in TRAIN, solver r reads items r, r + count, ... as Caffe does.
    """

    def make_loader(self, top):
        p = self.layer_param.data_param
        if not p.source:
            raise self.error("data_param.source is not set")
        if p.batch_size < 1:
            raise self.error("data_param.batch_size must be positive")
        try:
            return _DBLoader(p, self.make_transformer(p), self.phase, self.describe())
        except CaffeError as e:
            if str(e).startswith(self.describe()):
                raise
            raise self.error(str(e))
