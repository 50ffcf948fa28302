"""The device mirror of a Blob: Caffe's SyncedMemory, and the SyncedBlob a blob becomes when a
GPU accessor is first asked for (``Blob._mirror``, which calls :func:`mirror`). Host numpy memory stays the blob's storage;
the device copy is made and refreshed lazily, only when the other side holds newer values."""
import weakref

from .. import common
from ..errors import CaffeError
from .core import DEVICE_MIRROR, Blob

# -- device mirror: Caffe's SyncedMemory ---------------------------------------------------------
HOST, DEVICE, SYNCED = "HOST", "DEVICE", "SYNCED"
_backend = [None]
_memories = weakref.WeakValueDictionary()   # (host address, nbytes, dtype) -> SyncedMemory


def set_device_backend(backend):
    """Install the device side of every mirror: an object with ``alloc(count, dtype)``,
    ``upload(host, dev)`` and ``download(dev, host)``. caffepy.gpu installs the CUDA device when
    GPU mode is activated; tests install a fake. Existing mirrors keep their backend."""
    _backend[0] = backend


def device_backend():
    if _backend[0] is None:
        common.activate_gpu()
    return _backend[0]


class SyncedMemory(object):
    """A host array and its device copy, synchronised lazily (Caffe's SyncedMemory).

    ``head`` says where the newest values are: HOST (device copy stale or absent), DEVICE (host copy
    stale) or SYNCED. ``cpu()`` / ``gpu()`` copy only when the other side is newer; the mutable
    variants move the head to their side. Blobs whose host arrays are the same memory (in-place
    tops, Split, share_data) share one SyncedMemory, so their device copies cannot diverge.
    """
    __slots__ = ("host", "dev", "head", "backend", "__weakref__")

    def __init__(self, host, backend):
        self.host = host
        self.dev = None
        self.head = HOST
        self.backend = backend

    def cpu(self):
        if self.head == DEVICE:
            self.backend.download(self.dev, self.host)
            self.head = SYNCED
        return self.host

    def mutable_cpu(self):
        self.cpu()
        self.head = HOST
        return self.host

    def gpu(self):
        if self.dev is None:
            self.dev = self.backend.alloc(self.host.size, self.host.dtype)
            self.head = HOST
        if self.head == HOST:
            self.backend.upload(self.host, self.dev)
            self.head = SYNCED
        return self.dev

    def mutable_gpu(self):
        self.gpu()
        self.head = DEVICE
        return self.dev


def _synced_memory(arr):
    if not arr.flags.c_contiguous:
        raise CaffeError("a blob mirrored on the device needs contiguous host arrays")
    backend = device_backend()
    key = (arr.__array_interface__["data"][0], arr.nbytes, arr.dtype.str, id(backend))
    mem = _memories.get(key)
    if mem is None:
        mem = SyncedMemory(arr.reshape(-1), backend)
        _memories[key] = mem
    return mem


class SyncedBlob(Blob):
    """A Blob with a device mirror (what ``Blob._mirror`` turns a blob into; same layout).

    ``data`` / ``diff`` return host arrays that are current and may be written (the device copy
    becomes stale); ``cpu_data`` is a read-only current view that keeps the device copy valid.
    """
    __slots__ = ()

    def _host(self, i):
        m = self._mem[i]
        if m.head != HOST:
            m.mutable_cpu()

    @property
    def data(self):
        self._host(0)
        return self._data

    @data.setter
    def data(self, value):
        self._host(0)
        self._data[...] = value

    @property
    def diff(self):
        self._host(1)
        return self._diff

    @diff.setter
    def diff(self, value):
        self._host(1)
        self._diff[...] = value

    def clear_diff(self):
        """In GPU mode, where the device holds the diff: zeroed there, as Caffe's caffe_gpu_set
        on mutable_gpu_diff (no copy to the host and back); else on the host."""
        m = self._mem[1]
        if m.dev is not None and m.head != HOST and common.mode() == common.GPU:
            m.backend.fill(m.mutable_gpu(), 0)
        else:
            self.diff[...] = 0

    @property
    def cpu_data(self):
        self._mem[0].cpu()
        view = self._data.view()
        view.flags.writeable = False
        return view

    def to_host(self):
        self._mem[0].cpu()
        self._mem[1].cpu()

    def reshape(self, *shape):
        count = self._data.size if self._data is not None else -1
        Blob.reshape(self, *shape)
        if self._data.size != count:
            self._mirror()

    def share_data(self, other):
        Blob.share_data(self, other)
        self._mirror()

    def share_diff(self, other):
        Blob.share_diff(self, other)
        self._mirror()

    def set_arrays(self, data, diff):
        Blob.set_arrays(self, data, diff)
        self._mirror()


def _on_host(name):
    base = getattr(Blob, name)

    def method(self, *args, **kwargs):
        self._host(0)
        self._host(1)
        out = base(self, *args, **kwargs)
        if self._data.size != self._mem[0].host.size:     # reshaped to a new count
            self._mirror()
        return out
    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("copy_from", "from_proto", "to_proto", "asum_data", "asum_diff", "sumsq_data",
              "sumsq_diff", "scale_diff"):
    setattr(SyncedBlob, _name, _on_host(_name))


def mirror(blob):
    """Attach the device mirror to ``blob`` (it becomes a SyncedBlob); its (data, diff) memories."""
    blob.__class__ = SyncedBlob
    blob._mem = (_synced_memory(blob._data), _synced_memory(blob._diff))
    return blob._mem


DEVICE_MIRROR[0] = mirror
