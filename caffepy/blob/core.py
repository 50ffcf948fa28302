"""Blob: the n-d array that carries data and gradients between layers (Caffe's Blob).

A blob holds two arrays of the same shape: ``data`` (values) and ``diff`` (gradients of the loss with
respect to the values). Parameter diffs *accumulate* during backward; the solver clears them each
iteration. Shapes are tuples of ints; ``num / channels / height / width`` are Caffe's legacy 4-d
accessors (1 where the axis does not exist).

Storage is host numpy memory. The GPU path (caffepy.gpu) attaches a device mirror with explicit,
lazy synchronisation (Caffe's SyncedMemory, below): asking a blob for ``gpu_data`` /
``mutable_gpu_data`` (or the diffs) turns it into a :class:`SyncedBlob`, whose ``data`` / ``diff``
copy back to the host only when the device holds the newer values. The CPU path never imports
caffepy.gpu, and a plain Blob's accessors are unchanged.
"""

import numpy as np

from ..errors import CaffeError, ShapeError
from ..math.workspace import lazy_zeros

MAX_BLOB_AXES = 32
#: ``mirror(blob)``: turns a blob into a SyncedBlob and returns its (data, diff) memories;
#: installed by :mod:`caffepy.blob.synced` (the mirror depends on Blob, never the reverse).
DEVICE_MIRROR = [None]


def _checked_shape(shape):
    """``reshape``'s arguments (dims, or one sequence of dims) as a tuple of ints, checked."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_BLOB_AXES:
        raise CaffeError("blob shape has %d axes; at most %d allowed" % (len(shape), MAX_BLOB_AXES))
    if any(d < 0 for d in shape):
        raise CaffeError("blob shape %s has a negative dimension" % (shape,))
    return shape


class Blob(object):
    """n-d data + diff arrays.

    Args:
        shape: iterable of non-negative ints (may be empty: a scalar blob of count 1).
        dtype: numpy float dtype (float32 as in Caffe; float64 for gradient checks).
    """

    __slots__ = ("_data", "_diff", "_shape", "dtype", "_mem", "__weakref__")

    def __init__(self, shape=(), dtype=np.float32):
        self.dtype = np.dtype(dtype)
        self._shape = None
        self._data = None
        self._diff = None
        self._mem = None
        self.reshape(shape)

    # -- shape ---------------------------------------------------------------------------------
    def reshape(self, *shape):
        """Change the shape; keeps the arrays (as views) when the count is unchanged."""
        shape = _checked_shape(shape)
        if shape == self._shape:
            return
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if self._data is not None and self._data.size == count:
            self._data = self._data.reshape(shape)
            self._diff = self._diff.reshape(shape)
        else:
            self._data = lazy_zeros(shape, self.dtype)     # pages resident once written
            self._diff = lazy_zeros(shape, self.dtype)
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
            e = ShapeError("axis %d out of range for a %d-d blob of shape %s" % (axis, n, self._shape))
            e.axes_needed = axis + 1 if axis >= 0 else -axis   # what the blob would need
            raise e
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

    def clear_diff(self):
        """diff = 0 (Net::ClearParamDiffs; a mirrored blob does it where its diff is current)."""
        self.diff[...] = 0

    def share_data(self, other):
        """Make this blob's data the same memory as ``other``'s (shapes must have equal counts)."""
        if other.count != self.count:
            raise CaffeError("share_data: count %d != %d" % (other.count, self.count))
        if other._data is None:          # a ShapeBlob not yet allocated
            other.data
        self._data = other._data.reshape(self._shape)
        if other._mem is not None:
            self._mirror()

    def share_diff(self, other):
        if other.count != self.count:
            raise CaffeError("share_diff: count %d != %d" % (other.count, self.count))
        if other._diff is None:
            other.diff
        self._diff = other._diff.reshape(self._shape)
        if other._mem is not None:
            self._mirror()

    # -- device mirror -------------------------------------------------------------------------
    def _mirror(self):
        """Attach the device mirror (the blob becomes a SyncedBlob); returns (data, diff) memories."""
        return DEVICE_MIRROR[0](self)

    @property
    def gpu_data(self):
        """The data on the device (flat), copied up if the host is newer; for reading."""
        return (self._mem or self._mirror())[0].gpu()

    @property
    def mutable_gpu_data(self):
        """The data on the device, for writing: the host copy becomes stale."""
        return (self._mem or self._mirror())[0].mutable_gpu()

    @property
    def gpu_diff(self):
        return (self._mem or self._mirror())[1].gpu()

    @property
    def mutable_gpu_diff(self):
        return (self._mem or self._mirror())[1].mutable_gpu()

    @property
    def cpu_data(self):
        """The data on the host for reading (the device copy stays valid)."""
        return self._data

    def to_host(self):
        """Copy device-side changes back to the host now (explicit sync; no-op on the CPU path)."""

    def storage(self):
        """(data, diff, shape) as they are, allocating nothing: what :meth:`restore` puts back."""
        return self._data, self._diff, self._shape

    def restore(self, storage):
        """Rebind the arrays and shape :meth:`storage` returned."""
        self._data, self._diff, self._shape = storage

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
        """A BlobProto with shape and data (and diff), filled as packed bytes (caffepy.proto.packed)."""
        from ..proto import packed
        return packed.blobproto(self._data, self._shape, self._diff if write_diff else None, double)

    def proto_chunks(self, write_diff=False, double=False):
        """The serialised BlobProto of :meth:`to_proto` as byte chunks viewing this blob's memory."""
        from ..proto import packed
        return packed.blob_chunks(self._data, self._shape, self._diff if write_diff else None, double)

    def from_proto(self, proto, reshape=True, values=None):
        """Load from a BlobProto (shape or legacy num/channels/height/width; float or double).
        ``values``: the proto's packed value fields given apart ({field name: array}), when the
        message was parsed without them (caffepy.proto.packed.split_net)."""
        from ..proto.packed import field_view
        shape = blobproto_shape(proto)
        if reshape:
            self.reshape(shape)
        elif int(np.prod(shape, dtype=np.int64)) != self.count:
            raise CaffeError("blob shape %s does not match stored %s" % (self._shape, tuple(shape)))
        from ..proto.packed import raw_blob_values   # NVCaffe's raw fp16/fp32/fp64 bytes
        for target, names, diff in ((self._data, ("double_data", "data"), False),
                                    (self._diff, ("double_diff", "diff"), True)):
            got = None
            for name in names:
                got = field_view(proto, name) if values is None else values.get(name)
                if got is None and values is not None:
                    got = field_view(proto, name)        # an unpacked field stays in the message
                if got is not None:
                    break
            if got is None:
                try:
                    got = raw_blob_values(proto, diff)
                except ValueError as e:
                    raise CaffeError(str(e))
                if got is not None and got.size != target.size:
                    raise CaffeError("blob raw %s holds %d values for shape %s"
                                     % ("diff" if diff else "data", got.size, self._shape))
            if got is not None:
                if got.size != target.size:
                    raise CaffeError("blob of shape %s: %d values stored for %d"
                                     % (self._shape, got.size, target.size))
                target[...] = got.reshape(self._shape)

    def __repr__(self):
        return "Blob(shape=%s, dtype=%s)" % (self._shape, self.dtype.name)


class ShapeBlob(Blob):
    """A Blob that holds only its shape until its arrays are first used (then a plain Blob's
    zeros): what a net built for its shapes (``caffepy.layers.base.shapes_only``, ``caffepy
    summary``) gives its tops and parameters, and what a layer's parameter blobs are between
    ``init_param_blobs`` and the end of its set-up. ``shape`` / ``count`` / ``reshape`` never
    allocate; ``data`` / ``diff`` (and anything that reads them) allocate."""
    __slots__ = ()

    def reshape(self, *shape):
        shape = _checked_shape(shape)
        if shape == self._shape:
            return
        if self._data is not None:
            Blob.reshape(self, shape)
        else:
            self._shape = shape

    @property
    def allocated(self):
        return self._data is not None

    def _allocate(self):
        if self._data is None:
            self._data = np.zeros(self._shape, dtype=self.dtype)
            self._diff = np.zeros(self._shape, dtype=self.dtype)

    @property
    def count(self):
        return int(np.prod(self._shape, dtype=np.int64)) if self._shape else 1

    @property
    def data(self):
        self._allocate()
        return self._data

    @data.setter
    def data(self, value):
        self._allocate()
        self._data[...] = value

    @property
    def diff(self):
        self._allocate()
        return self._diff

    @diff.setter
    def diff(self, value):
        self._allocate()
        self._diff[...] = value

    @property
    def cpu_data(self):
        self._allocate()
        return self._data


def _allocating(name):
    base = getattr(Blob, name)

    def method(self, *args, **kwargs):
        self._allocate()
        for other in args[:1]:
            if isinstance(other, ShapeBlob):
                other._allocate()
        return base(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("share_data", "share_diff", "_mirror", "set_arrays", "copy_from", "from_proto",
              "to_proto", "asum_data", "asum_diff", "sumsq_data", "sumsq_diff", "scale_diff"):
    setattr(ShapeBlob, _name, _allocating(_name))


def blobproto_shape(proto):
    """The shape of a BlobProto: ``shape.dim`` if present, else legacy (num, channels, height, width)."""
    if any(proto.HasField(f) for f in ("num", "channels", "height", "width")):
        return (proto.num, proto.channels, proto.height, proto.width)
    return tuple(int(d) for d in proto.shape.dim)
