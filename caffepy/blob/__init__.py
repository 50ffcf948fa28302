"""Blob: the n-d array that carries data and gradients between layers (Caffe's Blob).

A blob holds two arrays of the same shape: ``data`` (values) and ``diff`` (gradients of the loss with
respect to the values). Parameter diffs *accumulate* during backward; the solver clears them each
iteration. Shapes are tuples of ints; ``num / channels / height / width`` are Caffe's legacy 4-d
accessors (1 where the axis does not exist).

* :mod:`.core`: ``Blob``, ``ShapeBlob`` (shapes only, for ``caffepy summary``), ``blobproto_shape``;
* :mod:`.synced`: the device mirror (Caffe's SyncedMemory): asking a blob for ``gpu_data`` /
  ``mutable_gpu_data`` (or the diffs) turns it into a ``SyncedBlob``, whose ``data`` / ``diff``
  copy back to the host only when the device holds the newer values. The CPU path never imports
  caffepy.gpu, and a plain Blob's accessors are unchanged.
"""
from .core import MAX_BLOB_AXES, Blob, ShapeBlob, blobproto_shape  # noqa: F401
from .synced import (DEVICE, HOST, SYNCED, SyncedBlob, SyncedMemory,  # noqa: F401
                     _backend, _synced_memory, device_backend, set_device_backend)
