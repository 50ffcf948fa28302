"""Datum <-> numpy, and the .binaryproto mean file.

A ``Datum`` (caffe.proto) holds one item: ``channels``, ``height``, ``width``, ``label`` and either
``data`` (uint8 bytes, C x H x W, row-major, BGR for images), ``float_data`` (float32, same layout)
or, with ``encoded: true``, the bytes of a PNG/JPEG file in ``data`` (shape fields unset).

- ``array_to_datum(arr, label=None)``: C x H x W; uint8 → ``data``, anything else → ``float_data``
  (pycaffe's ``caffe.io.array_to_datum``).
- ``datum_to_array(datum, color=None)``: C x H x W, uint8 for ``data``, float32 for
  ``float_data``; encoded datums are decoded (``color`` as ``image.decode_image``).
- ``image_to_datum(img, label)``: an H x W x C image → Datum exactly as Caffe's ``CVMatToDatum``
  (+ ``set_label``): fields channels, height, width, data, label, encoded=false.
- ``encoded_datum(data_bytes, label)``: as Caffe's ``ReadFileToDatum`` / encoded
  ``ReadImageToDatum``: data, label, encoded=true.
- ``read_mean(path)`` / ``write_mean(array, path)``: a BlobProto file (1 x C x H x W legacy
  num/channels/height/width fields, as compute_image_mean writes) ↔ C x H x W float32.
"""
import numpy as np

from ..errors import CaffeError
from ..proto import caffe_pb2
from ..proto.io import read_binary, write_binary
from .image import decode_image


def parse_datum(value, what="<datum>"):
    d = caffe_pb2.Datum()
    try:
        d.ParseFromString(bytes(value))
    except Exception as e:
        raise CaffeError("%s: not a valid Datum (%s)" % (what, e))
    return d


class DatumError(CaffeError, ValueError):
    """An array or Datum of the wrong shape (also a ValueError, as pycaffe's caffe.io raises)."""


def array_to_datum(arr, label=None):
    """A Datum from a C x H x W array: uint8 -> ``data`` bytes, other dtypes -> ``float_data``;
    ``label`` is set only when given (caffepy.io.array_to_datum is this function)."""
    arr = np.asarray(arr)
    if arr.ndim != 3:
        raise DatumError("array_to_datum: expected a C x H x W array, got shape %s" % (arr.shape,))
    d = caffe_pb2.Datum()
    d.channels, d.height, d.width = (int(s) for s in arr.shape)
    if arr.dtype == np.uint8:
        d.data = np.ascontiguousarray(arr).tobytes()
    else:
        d.float_data.extend(arr.astype(np.float64).ravel())
    if label is not None:
        d.label = int(label)
    return d


def datum_shape(datum, color=None):
    """(C, H, W) of a datum (decodes an encoded one)."""
    if datum.encoded:
        return datum_to_array(datum, color).shape
    return (datum.channels, datum.height, datum.width)


def datum_to_array(datum, color=None, what="<datum>"):
    if datum.encoded:
        img = decode_image(datum.data, color, what)
        return np.ascontiguousarray(img.transpose(2, 0, 1))
    shape = (datum.channels, datum.height, datum.width)
    if min(shape) < 0:
        raise DatumError("%s: Datum has a negative dimension: shape %s" % (what, shape))
    n = shape[0] * shape[1] * shape[2]
    if len(datum.data):
        if len(datum.data) != n:
            raise DatumError("%s: Datum data has %d bytes, expected %d for shape %s"
                             % (what, len(datum.data), n, shape))
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape)
    if len(datum.float_data) != n:
        raise DatumError("%s: Datum float_data has %d values, expected %d for shape %s"
                         % (what, len(datum.float_data), n, shape))
    return np.asarray(datum.float_data, dtype=np.float32).reshape(shape)


def image_to_datum(img, label):
    img = np.asarray(img, dtype=np.uint8)
    if img.ndim == 2:
        img = img[:, :, None]
    d = caffe_pb2.Datum()
    d.channels, d.height, d.width = img.shape[2], img.shape[0], img.shape[1]
    d.data = np.ascontiguousarray(img.transpose(2, 0, 1)).tobytes()
    d.label = int(label)
    d.encoded = False
    return d


def encoded_datum(data, label):
    d = caffe_pb2.Datum()
    d.data = bytes(data)
    d.label = int(label)
    d.encoded = True
    return d


def read_mean(path):
    """A mean BlobProto file as a C x H x W float32 array (a leading num of 1 is dropped)."""
    from ..blob import blobproto_shape
    bp = read_binary(path, caffe_pb2.BlobProto())
    shape = tuple(blobproto_shape(bp))
    values = np.asarray(bp.double_data if len(bp.double_data) else bp.data, dtype=np.float32)
    count = 1
    for d in shape:
        count *= int(d)
    try:
        if values.size != count or not shape or min(shape) < 0:
            raise ValueError
        arr = values.reshape(shape)
    except ValueError:          # (a zero dim beside dims whose product overflows numpy's intp)
        raise CaffeError("%s: mean BlobProto has %d values for shape %s" % (path, values.size, shape))
    while arr.ndim > 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 3:
        raise CaffeError("%s: mean blob must be 1 x C x H x W, got shape %s" % (path, shape))
    return arr


def mean_to_blobproto(mean):
    mean = np.asarray(mean, dtype=np.float32)
    if mean.ndim == 3:
        mean = mean[None]
    bp = caffe_pb2.BlobProto()
    bp.num, bp.channels, bp.height, bp.width = (int(s) for s in mean.shape)
    bp.data.extend(mean.ravel())
    return bp


def write_mean(mean, path):
    """Write a C x H x W (or 1 x C x H x W) mean as compute_image_mean does (atomic)."""
    write_binary(mean_to_blobproto(mean), path)
