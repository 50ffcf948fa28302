"""Fork fields of the Data and ImageData readers.

* ``label_size`` (bogger/caffe-multigpu, a field of the V1 layer: ``layers { type: DATA
  label_size: K ... }``; src/caffe/layers/data_layer.cpp, image_data_layer.cpp): every item has K
  labels and the label top is N x K x 1 x 1, item i's labels at [i, 0..K-1]. The fork's Datum
  holds them as ``repeated float label = 5`` (BVLC: one int32); an ImageData list line is
  ``<path> <l1> ... <lK>``, whitespace separated (read with ``>>``, so a path has no spaces).
  Set to 1 it still gives N x 1 x 1 x 1; left unset, the reader is Caffe's (N labels). The
  fork's ImageData shuffles its list once, at setup (its reshuffle at each pass is commented
  out), and so does this one when label_size is set.
* ``shared_file_system`` (sailing-pmls/pmls-caffe, Poseidon; src/caffe/layers/data_layer.cpp
  InitializeDB, image_data_layer.cpp DataLayerSetUp): true: every worker reads the one database /
  list at ``source``, worker r of W taking items r, r + W, ... in every phase (PMLS: thread
  ``client_id * num_threads + thread_id`` of ``num_clients * num_threads``); false: each client
  reads its own copy ``<source>_<client_id>``, its threads striding it. caffepy runs as PMLS
  client 0 with its solvers as the client's threads: false reads ``<source>_0``; W and r are
  caffepy's solver_count and solver_rank. PMLS reads an image list as whitespace-separated
  (path, label) pairs. Unset: Caffe's reader.
* ``source_map`` with ``backend: LMDB_FILE`` (xavigibert/caffe, src/caffe/layers/data_layer.cpp
  load_batch): the LMDB at ``source`` holds Datums without pixels, each naming a file
  (``file_idx``, an index into ``source_map``) and a byte offset (``src_offset``); the item's
  C * H * W uint8 pixels are read there. With LMDB_FILE every Datum must carry an offset; a
  Datum with one under another backend is an error (the fork's CHECKs).
* ``label: false`` of ImageData (Tyler-D/DeBlurNet's files; the fork defining it was not found):
  the layer has the image top only (DeBlurNet reads its sharp targets with a second ImageData).
  A list line is then a path, less a trailing number when it has one. ``label: true`` is
  Caffe's two-top reader.
* ``raw_hdf5`` of ImageData (serre-lab/rapid_categorization's files; the fork defining it was
  not found): false is Caffe's image list reader, as those files use it (a list of image files
  under ``root_folder``); true is refused, the fork's HDF5 reading being unknown.
"""
import struct

import numpy as np

from ... import common
from ...data.datum import datum_to_array, parse_datum
from ...errors import CaffeError
from ...layers.base import register_variant
from ...layers.data import DataLayer, _DBLoader
from ...layers.data_image import ImageDataLayer, _ImageListLoader
from ...proto import caffe_pb2

LMDB_FILE = caffe_pb2.DataParameter.DB.Value("LMDB_FILE")


def label_size(lp):
    """K when the layer sets bogger/caffe-multigpu's ``label_size``, else None."""
    return int(lp.label_size) if lp.HasField("label_size") else None


def _varint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def datum_labels(raw):
    """The values of field 5 (label) of a serialized Datum, in order: floats of the fork's
    ``repeated float label`` (wire type 5, or packed), or BVLC's int32 label (wire type 0)."""
    buf, pos, out = bytes(raw), 0, []
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            if field == 5:
                out.append(float(value - (1 << 64) if value >> 63 else value))
        elif wire == 1:
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if field == 5:
                if size % 4:
                    raise ValueError("packed labels of %d bytes" % size)
                out += [float(v) for v in struct.unpack("<%df" % (size // 4), buf[pos:pos + size])]
            pos += size
        elif wire == 5:
            if field == 5:
                out.append(struct.unpack("<f", buf[pos:pos + 4])[0])
            pos += 4
        else:
            raise ValueError("wire type %d" % wire)
        if pos > len(buf):
            raise ValueError("truncated field %d" % field)
    return out


def pmls_source(source, shared):
    """The file PMLS client 0 reads: ``source`` when shared, else its own copy ``source_0``."""
    return source if shared else "%s_0" % source


def _workers():
    return max(1, int(common._state.solver_count)), int(common._state.solver_rank)


class _ForkDBLoader(_DBLoader):
    """Caffe's database reader with the forks' label width, PMLS sharing and LMDB_FILE pixels."""

    def __init__(self, param, transformer, phase, what, k, shared):
        p = caffe_pb2.DataParameter()
        p.CopyFrom(param)
        self.source_map = list(param.source_map)
        self.files = param.backend == LMDB_FILE
        if self.files:
            if not self.source_map:
                raise CaffeError("%s: backend LMDB_FILE needs source_map (the data files the "
                                 "database points into)" % what)
            p.backend = caffe_pb2.DataParameter.LMDB
        if shared is not None:
            p.source = pmls_source(param.source, shared)
        self.k, self._labels = k, {}
        if k is not None:
            self.label_item_shape = (k, 1, 1)
        super().__init__(p, transformer, phase, what)
        if shared is not None:              # PMLS strides the database in every phase
            self.keep_all = False

    def _pixels(self, d):
        """The fork's LMDB_FILE read: C * H * W bytes of source_map[file_idx] at src_offset."""
        if not d.HasField("src_offset"):
            if self.files:
                raise CaffeError("%s: a Datum without src_offset under backend LMDB_FILE"
                                 % self._record())
            return
        if not self.files:
            raise CaffeError("%s: a Datum with src_offset needs backend LMDB_FILE" % self._record())
        if not d.HasField("file_idx") or not 0 <= d.file_idx < len(self.source_map):
            raise CaffeError("%s: file_idx %s is not an index of the %d source_map files"
                             % (self._record(), d.file_idx if d.HasField("file_idx") else "unset",
                                len(self.source_map)))
        path, size = self.source_map[d.file_idx], d.channels * d.height * d.width
        try:
            with open(path, "rb") as f:
                f.seek(d.src_offset)
                data = f.read(size)
        except OSError as e:
            raise CaffeError("%s: cannot read %s: %s" % (self._record(), path, e.strerror or e))
        if len(data) != size:
            raise CaffeError("%s: %s holds %d bytes at offset %d, the item needs %d"
                             % (self._record(), path, len(data), d.src_offset, size))
        d.data = data

    def _decode(self, shape=None):
        d = parse_datum(self.cursor.value, self._record())
        self._pixels(d)
        item = datum_to_array(d, self.transformer.color, self._record())
        if shape is not None and item.shape != shape:
            raise CaffeError("%s: shape %s, the batch's is %s"
                             % (self._record(), item.shape, shape))
        if self.k is not None:
            try:
                values = datum_labels(d.SerializeToString())
            except (ValueError, struct.error) as e:
                raise CaffeError("%s: cannot read its labels (%s)" % (self._record(), e))
            if len(values) < self.k:
                raise CaffeError("%s: %d labels, label_size is %d"
                                 % (self._record(), len(values), self.k))
            self._labels[id(d)] = values[:self.k]
        return d, item

    def load_batch(self, buf):
        self._labels.clear()                # labels of this batch's Datums, by object
        super().load_batch(buf)

    def label(self, datum):
        return datum.label if self.k is None else self._labels[id(datum)]


def _forks_data(lp):
    p = lp.data_param
    return (lp.HasField("label_size") or p.HasField("shared_file_system") or len(p.source_map) > 0
            or p.backend == LMDB_FILE)


@register_variant("Data", _forks_data)
class ForkDataLayer(DataLayer):
    """Caffe's Data layer with bogger/caffe-multigpu's ``label_size``, PMLS-Caffe's
    ``shared_file_system`` and xavigibert/caffe's ``source_map`` / ``backend: LMDB_FILE`` (module
    doc). Tops: data (N x C x h x w), label (N, or N x K x 1 x 1 with label_size K)."""

    def make_loader(self, top):
        p = self.layer_param.data_param
        k = label_size(self.layer_param)
        if k is not None and k < 1:
            raise self.error("label_size must be positive, got %d" % k)
        if not p.source:
            raise self.error("data_param.source is not set")
        if p.batch_size < 1:
            raise self.error("data_param.batch_size must be positive")
        shared = p.shared_file_system if p.HasField("shared_file_system") else None
        try:
            return _ForkDBLoader(p, self.make_transformer(p), self.phase, self.describe(), k,
                                 shared)
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))


def read_label_list(path, k, with_labels=True):
    """[(path, labels)] of an image list: ``<path> <l1> ... <lK>`` whitespace separated (k labels,
    floats; bogger/caffe-multigpu), or, ``with_labels`` false, a path per line (less a trailing
    number) with label 0."""
    try:
        with open(path, "r", encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError as e:
        raise CaffeError("%s: cannot open image list: %s" % (path, e.strerror or e))
    if not with_labels:
        out = []
        for line in text.splitlines():
            line = line.strip()
            head, _, tail = line.rpartition(" ")
            try:
                float(tail)
                line = head.strip() if head.strip() else line
            except ValueError:
                pass
            if line:
                out.append((line, 0))
        return out
    words, out = text.split(), []
    if len(words) % (k + 1):
        raise CaffeError("%s: %d words are not lines of a path and %d labels (label_size)"
                         % (path, len(words), k))
    for i in range(0, len(words), k + 1):
        try:
            labels = [float(w) for w in words[i + 1:i + k + 1]]
        except ValueError:
            raise CaffeError("%s: item %d (%s): labels %s are not all numbers"
                             % (path, i // (k + 1) + 1, words[i], " ".join(words[i + 1:i + k + 1])))
        out.append((words[i], labels))
    return out


class _ForkImageListLoader(_ImageListLoader):
    def __init__(self, param, transformer, what, k, shared, with_labels):
        self.k, self.shared, self.with_labels = k, shared, with_labels
        if k is not None:
            self.label_item_shape = (k, 1, 1)
        super().__init__(param, transformer, what)

    def read_list(self, param):
        from ...data.image import read_image_list
        source = param.source if self.shared is None else pmls_source(param.source, self.shared)
        if self.k is not None or not self.with_labels:
            lines = read_label_list(source, self.k, self.with_labels)
        elif self.shared is not None:       # PMLS reads ``infile >> filename >> label`` pairs
            lines = [(path, l[0]) for path, l in read_label_list(source, 1)]
        else:
            lines = read_image_list(source)
        if self.shared:                     # PMLS: line i goes to worker i mod W
            size, rank = _workers()
            lines = lines[rank::size]
        return lines

    def _advance(self):
        if self.k is None:
            return super()._advance()
        self.pos = (self.pos + 1) % len(self.lines)   # bogger's reader shuffles at setup only


def _forks_image(lp):
    p = lp.image_data_param
    return (lp.HasField("label_size") or p.HasField("shared_file_system") or p.HasField("label")
            or p.raw_hdf5)


@register_variant("ImageData", _forks_image)
class ForkImageDataLayer(ImageDataLayer):
    """Caffe's ImageData with bogger/caffe-multigpu's ``label_size``, PMLS-Caffe's
    ``shared_file_system`` and DeBlurNet's ``label: false`` (module doc). Tops: data, and, unless
    ``label: false``, label (N, or N x K x 1 x 1 with label_size K)."""
    exact_num_top_blobs = None
    min_top_blobs, max_top_blobs = 1, 2

    def make_loader(self, top):
        p = self.layer_param.image_data_param
        if p.raw_hdf5:
            raise self.error("image_data_param.raw_hdf5: true is not supported (the fork that "
                             "defines it was not found; false reads the image list as Caffe)")
        with_labels = p.label
        if len(top) != (2 if with_labels else 1):
            raise self.error("%s takes %d top(s) (data%s), got %d"
                             % ("label: false" if not with_labels else "ImageData",
                                2 if with_labels else 1, ", label" if with_labels else "",
                                len(top)))
        k = label_size(self.layer_param)
        if k is not None and k < 1:
            raise self.error("label_size must be positive, got %d" % k)
        if k is not None and not with_labels:
            raise self.error("label_size and label: false cannot be set together")
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if getattr(p, "new_dim", 0) or getattr(p, "bicubic", False):
            raise self.error("caffe-pro's new_dim / bicubic are not read with these fork fields")
        if p.batch_size < 1:
            raise self.error("image_data_param.batch_size must be positive")
        shared = p.shared_file_system if p.HasField("shared_file_system") else None
        try:
            return _ForkImageListLoader(p, self.make_transformer(p), self.describe(), k, shared,
                                        with_labels)
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))
