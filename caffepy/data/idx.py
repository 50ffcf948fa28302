"""IDX files (the MNIST format), plain or gzip-compressed.

Layout (big-endian): two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
0x0D float32, 0x0E float64), the number of dimensions, one uint32 per dimension, then the values in
row-major order. MNIST images are magic 2051 (uint8, 3-d: N x rows x cols), labels 2049 (uint8,
1-d). ``read_idx(path)`` returns the array; ``write_idx(array, path)`` writes one (tests, tools).
"""
import gzip
import struct

import numpy as np

from ..errors import CaffeError

_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
          0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049


def _open(path):
    with open(path, "rb") as f:
        head = f.read(2)
    return gzip.open(path, "rb") if head == b"\x1f\x8b" else open(path, "rb")


def read_idx(path, expect_magic=None):
    """Read an IDX file (``.gz`` detected by content) into a numpy array in native byte order."""
    try:
        with _open(path) as f:
            raw = f.read()
    except OSError as e:
        raise CaffeError("%s: cannot read IDX file: %s" % (path, e.strerror or e))
    if len(raw) < 4 or raw[0:2] != b"\x00\x00" or raw[2] not in _TYPES:
        raise CaffeError("%s: not an IDX file (bad magic %s)" % (path, raw[:4].hex()))
    magic = struct.unpack(">I", raw[:4])[0]
    if expect_magic is not None and magic != expect_magic:
        raise CaffeError("%s: IDX magic is %d, expected %d (%s)" % (
            path, magic, expect_magic, "images" if expect_magic == IMAGES_MAGIC else "labels"))
    dtype, ndim = _TYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise CaffeError("%s: truncated IDX header" % path)
    shape = struct.unpack(">%dI" % ndim, raw[4:header])
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != n:
        raise CaffeError("%s: IDX shape %s needs %d data bytes, file has %d"
                         % (path, shape, n, len(raw) - header))
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def write_idx(arr, path, compress=None):
    """Write ``arr`` as IDX (gzip when ``compress`` or when ``path`` ends with .gz)."""
    arr = np.asarray(arr)
    code = None
    for c, dt in _TYPES.items():
        if dt.kind == arr.dtype.kind and dt.itemsize == arr.dtype.itemsize:
            code, dtype = c, dt
    if code is None:
        raise CaffeError("write_idx: unsupported dtype %s" % arr.dtype)
    data = bytes([0, 0, code, arr.ndim]) + struct.pack(">%dI" % arr.ndim, *arr.shape)
    data += np.ascontiguousarray(arr, dtype=dtype).tobytes()
    if compress or (compress is None and str(path).endswith(".gz")):
        data = gzip.compress(data, mtime=0)
    from ..proto.io import atomic_write
    atomic_write(path, data)


def read_mnist(images_path, labels_path):
    """(images N x rows x cols uint8, labels N uint8) with Caffe's convert_mnist_data checks."""
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if images.ndim != 3 or labels.ndim != 1:
        raise CaffeError("%s / %s: expected 3-d images and 1-d labels, got %s and %s"
                         % (images_path, labels_path, images.shape, labels.shape))
    if images.shape[0] != labels.shape[0]:
        raise CaffeError("%s has %d images but %s has %d labels"
                         % (images_path, images.shape[0], labels_path, labels.shape[0]))
    return images, labels
