"""Scratch arrays shared by the layers of one net (Caffe's shared column buffer, generalised).

A convolution needs large temporaries that live only inside one forward or backward call: the
column buffer of a layer that keeps none for backward, the column buffer of dY for the data
gradient, dY transposed to the GEMM's column order, the GEMM results. Layers of one net run one
after another, so one array per named slot serves all of them: a :class:`Workspace` hands out
views of a flat array per (slot, dtype) that grows to the largest request and is reused after
that (no allocation, page faulting or zeroing per step). A Net gives every layer the same
Workspace (``layer.workspace``); a layer used on its own gets a private one.

A view is valid until the next request of the same slot: callers use a slot only within one
forward / backward call and never keep the view.
"""
import errno
import mmap

import numpy as np

LAZY_MIN_BYTES = 1 << 16
# private, not Python's default MAP_SHARED on POSIX: shared anonymous memory is shmem, dearer to
# fault in, and a forked child writing a blob would write its parent's (Windows: no flags)
_MAP_FLAGS = ({"flags": mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS}
              if hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS") else {})


class Workspace:
    """Growing scratch arrays by slot name; ``get(slot, shape, dtype)`` returns a C-contiguous
    view of ``shape`` (contents undefined)."""

    def __init__(self):
        self._slots = {}

    def get(self, slot, shape, dtype):
        dtype = np.dtype(dtype)
        size = 1
        for s in shape:
            size *= int(s)
        key = (slot, dtype)
        buf = self._slots.get(key)
        if buf is None or buf.size < size:
            self._slots.pop(key, None)            # release the smaller array before growing
            buf = self._slots[key] = np.empty(max(size, 1), dtype)
        return buf[:size].reshape(shape)

    def nbytes(self):
        """Bytes held by all slots."""
        return sum(b.nbytes for b in self._slots.values())

    def clear(self):
        self._slots.clear()


def lazy_zeros(shape, dtype):
    """``np.zeros(shape, dtype)`` whose memory the OS provides only when a page is first written:
    arrays of 64 KiB or more are private anonymous memory maps (zero until written, unmapped when
    the array is freed, copied on write in a forked child like any other memory). ``np.zeros``
    of a few hundred KiB often comes from glibc's heap, which calloc must clear, so the
    never-written diffs of an inference net (and its never-written blobs) would all be resident.
    """
    dtype = np.dtype(dtype)
    count = 1
    for s in shape:
        count *= int(s)
    nbytes = count * dtype.itemsize
    if nbytes < LAZY_MIN_BYTES:
        return np.zeros(shape, dtype)
    try:
        buf = mmap.mmap(-1, nbytes, **_MAP_FLAGS)
    except OSError as e:
        if e.errno == errno.ENOMEM:
            raise MemoryError("cannot map %d bytes for an array of shape %s" % (nbytes,
                                                                                tuple(shape)))
        raise
    return np.frombuffer(buf, dtype, count).reshape(shape)
