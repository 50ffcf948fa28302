"""Dataset conversions behind the commands (Caffe's tools), usable from Python.

- ``convert_imageset(root_folder, list_file, db_path, ...)``: tools/convert_imageset. Keys are
  ``%08d_<path>`` (the line index in the — possibly shuffled — list); values are Datums as
  ``ReadImageToDatum``: raw (channels, height, width, data C x H x W BGR uint8, label,
  encoded=false) or, with ``encoded`` / ``encode_type``, the original file bytes when no
  re-encoding is needed (same kind, no resize, matching extension) or the re-encoded image, with
  label and encoded=true. Unreadable images are skipped with a warning, as Caffe.
- ``compute_image_mean(db_path, backend)``: tools/compute_image_mean; the per-pixel mean
  (C x H x W float32) of every Datum (encoded ones decoded natively).
- ``convert_mnist(images, labels, db_path, backend)``: examples/mnist/convert_mnist_data; keys
  ``%08d``, Datums with channels 1, height rows, width cols, data, label (no encoded field).
"""
import argparse
import sys

import numpy as np

from .. import common
from ..errors import CaffeError
from .datum import datum_to_array, encoded_datum, image_to_datum, parse_datum
from .db import open_db
from .idx import read_mnist
from .image import encode_image, image_ext, read_image, read_image_list


_TRUE, _FALSE = ("true", "t", "1", "yes", "y"), ("false", "f", "0", "no", "n")


def add_bool_flag(parser, name, help):
    """A gflags-style boolean: ``--name``, ``--name=true|false`` (any case), ``--noname``.

    The flag never consumes the next word (``--gray ROOT/`` keeps ROOT/ positional); the
    ``=value`` spellings are registered as hidden options of their own.
    """
    parser.add_argument("--" + name, dest=name, action="store_true", default=False, help=help)
    parser.add_argument("--no" + name, dest=name, action="store_false", help=argparse.SUPPRESS)
    for words, value in ((_TRUE, True), (_FALSE, False)):
        spellings = {"--%s=%s" % (name, w) for word in words for w in (word, word.upper(), word.title())}
        parser.add_argument(*sorted(spellings), dest=name, action="store_const", const=value,
                            help=argparse.SUPPRESS)


def _log(msg):
    sys.stderr.write(msg + "\n")


def _match_ext(path, encoding):
    ext, enc = image_ext(path), encoding.lower()
    return ext == enc or (enc == "jpg" and ext == "jpeg")


def image_file_to_datum(path, label, height=0, width=0, is_color=True, encoding=""):
    """A Datum for one image as Caffe's ReadImageToDatum (None if the file cannot be read)."""
    try:
        img = read_image(path, height, width, is_color)
    except CaffeError as e:
        _log("warning: %s (skipped)" % e)
        return None
    if encoding:
        if (img.shape[2] == 3) == bool(is_color) and not height and not width and _match_ext(path, encoding):
            with open(path, "rb") as f:
                return encoded_datum(f.read(), label)
        return encoded_datum(encode_image(img, encoding), label)
    return image_to_datum(img, label)


def convert_imageset(root_folder, list_file, db_path, gray=False, shuffle=False, backend="lmdb",
                     resize_height=0, resize_width=0, check_size=False, encoded=False,
                     encode_type="", log=_log):
    """Write the images of ``list_file`` into a new database; returns the number written."""
    lines = read_image_list(list_file)
    if shuffle:
        log("Shuffling data")
        order = common.rng().permutation(len(lines))
        lines = [lines[i] for i in order]
    log("A total of %d images." % len(lines))
    if encode_type and not encoded:
        log("encode_type specified, assuming encoded=true.")
        encoded = True
    resize_height, resize_width = max(0, resize_height), max(0, resize_width)
    count = 0
    data_size = None
    with open_db(db_path, backend, "w") as db:
        for line_id, (name, label) in enumerate(lines):
            enc = encode_type
            if encoded and not enc:
                enc = image_ext(name)
                if not enc:
                    log("warning: failed to guess the encoding of '%s'" % name)
            datum = image_file_to_datum(root_folder + name, label, resize_height, resize_width,
                                        not gray, enc)
            if datum is None:
                continue
            if check_size:
                if data_size is None:
                    data_size = datum.channels * datum.height * datum.width
                elif len(datum.data) != data_size:
                    raise CaffeError("%s: incorrect data field size %d (expected %d; use "
                                     "--resize_height/--resize_width)" % (name, len(datum.data), data_size))
            db.put("%08d_%s" % (line_id, name), datum.SerializeToString())
            count += 1
            if count % 1000 == 0:
                db.commit()
                log("Processed %d files." % count)
    if count % 1000:
        log("Processed %d files." % count)
    return count


def compute_image_mean(db_path, backend="lmdb", log=_log):
    """The mean Datum of a database as a C x H x W float32 array."""
    total = None
    count = 0
    with open_db(db_path, backend, "r") as db:
        for key, value in db.items():
            arr = datum_to_array(parse_datum(value, "%s: key %r" % (db_path, key)), None, db_path)
            if total is None:
                total = np.zeros(arr.shape, np.float64)
            elif arr.shape != total.shape:
                raise CaffeError("%s: key %r has shape %s, the first datum has %s"
                                 % (db_path, key, arr.shape, total.shape))
            total += arr
            count += 1
            if count % 10000 == 0:
                log("Processed %d files." % count)
    if not count:
        raise CaffeError("%s: database is empty" % db_path)
    log("Processed %d files." % count)
    return (total / count).astype(np.float32)


def mnist_datum_prefix(rows, cols):
    from ..proto import caffe_pb2
    d = caffe_pb2.Datum()
    d.channels, d.height, d.width = 1, rows, cols
    return d


def convert_mnist(images_path, labels_path, db_path, backend="lmdb", log=_log):
    """Write MNIST IDX images + labels into a new database; returns the item count."""
    images, labels = read_mnist(images_path, labels_path)
    n, rows, cols = images.shape
    log("A total of %d items." % n)
    log("Rows: %d Cols: %d" % (rows, cols))
    datum = mnist_datum_prefix(rows, cols)
    with open_db(db_path, backend, "w") as db:
        for i in range(n):
            datum.data = images[i].tobytes()
            datum.label = int(labels[i].astype(np.int8))
            db.put("%08d" % i, datum.SerializeToString())
    log("Processed %d files." % n)
    return n
