"""Blob: the n-d array that carries data and gradients between layers (Caffe's Blob).

A blob holds two arrays of the same shape: ``data`` (values) and ``diff`` (gradients of the loss with
respect to the values). Parameter diffs *accumulate* during backward; the solver clears them each
iteration. Shapes are tuples of ints; ``num / channels / height / width`` are Caffe's legacy 4-d
accessors (1 where the axis does not exist).

Storage is host numpy memory. The GPU path (caffepy.gpu) attaches a device mirror with explicit,
lazy synchronisation (Caffe's SyncedMemory idea); the CPU path never imports it.
"""
import numpy as np

from .errors import CaffeError

MAX_BLOB_AXES = 32


class Blob(object):
    """n-d data + diff arrays.

    Args:
        shape: iterable of non-negative ints (may be empty: a scalar blob of count 1).
        dtype: numpy float dtype (float32 as in Caffe; float64 for gradient checks).
    """

    __slots__ = ("_data", "_diff", "_shape", "dtype", "__weakref__")

    def __init__(self, shape=(), dtype=np.float32):
        self.dtype = np.dtype(dtype)
        self._shape = None
        self._data = None
        self._diff = None
        self.reshape(shape)

    # -- shape ---------------------------------------------------------------------------------
    def reshape(self, *shape):
        """Change the shape; keeps the arrays (as views) when the count is unchanged."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        shape = tuple(int(d) for d in shape)
        if len(shape) > MAX_BLOB_AXES:
            raise CaffeError("blob shape has %d axes; at most %d allowed" % (len(shape), MAX_BLOB_AXES))
        if any(d < 0 for d in shape):
            raise CaffeError("blob shape %s has a negative dimension" % (shape,))
        if shape == self._shape:
            return
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if self._data is not None and self._data.size == count:
            self._data = self._data.reshape(shape)
            self._diff = self._diff.reshape(shape)
        else:
            self._data = np.zeros(shape, dtype=self.dtype)
            self._diff = np.zeros(shape, dtype=self.dtype)
        self._shape = shape

    def reshape_like(self, other):
        self.reshape(other.shape)

    @property
    def shape(self):
        return self._shape

    def shape_at(self, axis):
        return self._shape[self.canonical_axis_index(axis)]

    @property
    def num_axes(self):
        return len(self._shape)

    ndim = num_axes

    @property
    def count(self):
        return self._data.size

    def count_range(self, start, end=None):
        """Product of dims in [start, end) (Caffe's count(start, end))."""
        end = self.num_axes if end is None else end
        return int(np.prod(self._shape[start:end], dtype=np.int64))

    def canonical_axis_index(self, axis):
        n = self.num_axes
        if not -n <= axis < max(n, 1):
            raise CaffeError("axis %d out of range for a %d-d blob of shape %s" % (axis, n, self._shape))
        return axis + n if axis < 0 else axis

    def _legacy(self, i):
        if self.num_axes > 4:
            raise CaffeError("legacy accessor on a blob with %d > 4 axes" % self.num_axes)
        return self._shape[i] if i < self.num_axes else 1

    num = property(lambda self: self._legacy(0))
    channels = property(lambda self: self._legacy(1))
    height = property(lambda self: self._legacy(2))
    width = property(lambda self: self._legacy(3))

    # -- data ----------------------------------------------------------------------------------
    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, value):
        self._data[...] = value

    @property
    def diff(self):
        return self._diff

    @diff.setter
    def diff(self, value):
        self._diff[...] = value

    def share_data(self, other):
        """Make this blob's data the same memory as ``other``'s (shapes must have equal counts)."""
        if other.count != self.count:
            raise CaffeError("share_data: count %d != %d" % (other.count, self.count))
        self._data = other._data.reshape(self._shape)

    def share_diff(self, other):
        if other.count != self.count:
            raise CaffeError("share_diff: count %d != %d" % (other.count, self.count))
        self._diff = other._diff.reshape(self._shape)

    def set_arrays(self, data, diff):
        """Rebind storage to external arrays (used for contiguous parameter buffers)."""
        self._data = data.reshape(self._shape)
        self._diff = diff.reshape(self._shape)

    def copy_from(self, other, copy_diff=False, reshape=False):
        if reshape:
            self.reshape(other.shape)
        elif other.count != self.count:
            raise CaffeError("copy_from: shape %s does not match %s" % (other.shape, self.shape))
        if copy_diff:
            self._diff[...] = other.diff.reshape(self._shape)
        else:
            self._data[...] = other.data.reshape(self._shape)

    # -- math helpers used by solvers and tests ------------------------------------------------
    def asum_data(self):
        return float(np.abs(self._data).sum())

    def asum_diff(self):
        return float(np.abs(self._diff).sum())

    def sumsq_data(self):
        return float(np.dot(self._data.ravel(), self._data.ravel()))

    def sumsq_diff(self):
        return float(np.dot(self._diff.ravel(), self._diff.ravel()))

    def scale_diff(self, factor):
        self._diff *= factor

    # -- protobuf ------------------------------------------------------------------------------
    def to_proto(self, write_diff=False, double=False):
        from .proto import caffe_pb2
        bp = caffe_pb2.BlobProto()
        bp.shape.dim.extend(self._shape)
        if double:
            bp.double_data.extend(self._data.ravel().astype(np.float64))
            if write_diff:
                bp.double_diff.extend(self._diff.ravel().astype(np.float64))
        else:
            bp.data.extend(self._data.ravel().astype(np.float32))
            if write_diff:
                bp.diff.extend(self._diff.ravel().astype(np.float32))
        return bp

    def from_proto(self, proto, reshape=True):
        """Load from a BlobProto (shape or legacy num/channels/height/width; float or double)."""
        shape = blobproto_shape(proto)
        if reshape:
            self.reshape(shape)
        elif int(np.prod(shape, dtype=np.int64)) != self.count:
            raise CaffeError("blob shape %s does not match stored %s" % (self._shape, tuple(shape)))
        if len(proto.double_data):
            self._data[...] = np.asarray(proto.double_data, dtype=self.dtype).reshape(self._shape)
        elif len(proto.data):
            self._data[...] = np.asarray(proto.data, dtype=self.dtype).reshape(self._shape)
        if len(proto.double_diff):
            self._diff[...] = np.asarray(proto.double_diff, dtype=self.dtype).reshape(self._shape)
        elif len(proto.diff):
            self._diff[...] = np.asarray(proto.diff, dtype=self.dtype).reshape(self._shape)

    def __repr__(self):
        return "Blob(shape=%s, dtype=%s)" % (self._shape, self.dtype.name)


def blobproto_shape(proto):
    """The shape of a BlobProto: ``shape.dim`` if present, else legacy (num, channels, height, width)."""
    if any(proto.HasField(f) for f in ("num", "channels", "height", "width")):
        return (proto.num, proto.channels, proto.height, proto.width)
    return tuple(int(d) for d in proto.shape.dim)
