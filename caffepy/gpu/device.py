"""One CUDA device: its primary context, caffepy's stream, a memory pool, cuBLAS and the kernels.

The primary context is retained and pushed as ``pycuda.autoprimaryctx`` does (and popped at exit),
so caffepy shares the context with any other library using the runtime API on that device.
Device arrays are 1-d ``pycuda.gpuarray.GPUArray`` from a ``pycuda.tools.DeviceMemoryPool``; a
blob's arrays are views of them by offset (slicing), shapes live on the host. All work (kernels,
cuBLAS, copies) is queued on one stream; ``download`` waits for it, nothing else does.

The same interface is what the blob mirrors (``alloc`` / ``upload`` / ``download``) and the GPU
layers (``empty`` / ``zeros`` / ``fill`` / ``copy`` / ``kernels`` / ``blas``) use.
"""
import atexit
import struct
import threading

import numpy as np

from . import import_pycuda, unavailable
from .cublas import Cublas, CublasNotFound
from .kernels import KernelCache, Kernels

_local = threading.local()
_UNSET = object()


class Device(object):
    def __init__(self, device_id):
        drv = import_pycuda()
        self.drv = drv
        self.device_id = int(device_id)
        try:
            self.cu_device = drv.Device(self.device_id)
        except drv.Error:
            raise unavailable("no CUDA device %d (%d found)" % (self.device_id, drv.Device.count()))
        self.context = self.cu_device.retain_primary_context()
        self.context.push()
        self._pushed_in = {threading.get_ident()}
        self._owner = threading.get_ident()
        atexit.register(self._close)
        from pycuda import gpuarray
        from pycuda.compiler import SourceModule
        from pycuda.tools import DeviceMemoryPool
        self._gpuarray = gpuarray
        self._source_module = SourceModule
        self.stream = drv.Stream()
        self.pool = DeviceMemoryPool()
        block = self.pool.allocate(256)
        del block                           # the pool now holds blocks: see _close
        try:
            self.blas = Cublas(self.stream.handle)
        except CublasNotFound as e:
            raise unavailable(str(e))
        self.cache = KernelCache(self._compile)
        self.arch = "sm_%d%d" % self.cu_device.compute_capability()
        self._cudnn = _UNSET
        self._kernels = {}
        self._fill = {}

    # -- context -------------------------------------------------------------------------------
    def make_current(self):
        """Push the context in this thread (once; the device's entry points call it)."""
        tid = threading.get_ident()
        if tid not in self._pushed_in:
            self.context.push()
            self._pushed_in.add(tid)

    def release_current(self):
        """Pop the context pushed in this thread, before the thread ends (not in the thread that
        made the device, which pops at exit)."""
        tid = threading.get_ident()
        if tid in self._pushed_in and tid != self._owner:
            self.synchronize()
            self.drv.Context.pop()
            self._pushed_in.discard(tid)

    @property
    def cudnn(self):
        """The cuDNN handle on this device's stream (:class:`caffepy.gpu.cudnn.Cudnn`), or None
        where cuDNN does not load (said once, as a warning: convolutions then use im2col)."""
        if self._cudnn is _UNSET:
            from .cudnn import Cudnn, CudnnNotFound
            try:
                self._cudnn = Cudnn(self.stream.handle, self.empty, tf32=self.blas.tf32)
            except CudnnNotFound as e:
                import logging
                logging.getLogger("caffepy").warning("%s; convolutions use im2col + cuBLAS", e)
                self._cudnn = None
        return self._cudnn

    def _close(self):
        # The pool keeps its blocks (and its hold on the context) until the process ends: device
        # arrays still alive after this (freed at interpreter teardown, in any thread) go back to
        # the pool without a CUDA call; pycuda would abort the process if the first free of an
        # empty pool came after the context was popped.
        try:
            self.synchronize()
            if self._cudnn not in (None, _UNSET):
                self._cudnn.close()
            self.blas.close()
            self.context.pop()
        except Exception:  # noqa: BLE001  (interpreter shutdown: the driver may be gone already)
            pass

    def synchronize(self):
        self.stream.synchronize()

    # -- memory --------------------------------------------------------------------------------
    def empty(self, count, dtype):
        self.make_current()
        return self._gpuarray.GPUArray((int(count),), np.dtype(dtype), allocator=self.pool.allocate)

    alloc = empty

    def zeros(self, count, dtype):
        a = self.empty(count, dtype)
        self.fill(a, 0)
        return a

    def fill(self, a, value):
        self.make_current()
        if a.size == 0:
            return
        if value == 0:
            self.drv.memset_d8_async(a.gpudata, 0, a.nbytes, self.stream)
        else:
            self.kernels("util", a.dtype).fill(a.size, value, a)

    def copy(self, src, dst, count=None):
        """dst[:count] = src[:count] (device to device, on the stream)."""
        self.make_current()
        n = src.size if count is None else int(count)
        if n:
            self.drv.memcpy_dtod_async(dst.gpudata, src.gpudata, n * src.dtype.itemsize,
                                       self.stream)

    def upload(self, host, dev):
        self.make_current()
        self.drv.memcpy_htod_async(dev.gpudata, np.ascontiguousarray(host), self.stream)
        self.stream.synchronize()   # the host buffer is pageable and may change right after

    def download(self, dev, host):
        self.make_current()
        self.drv.memcpy_dtoh_async(host, dev.gpudata, self.stream)
        self.stream.synchronize()

    def to_host(self, dev):
        out = np.empty(dev.size, dtype=dev.dtype)
        self.download(dev, out)
        return out

    def to_device(self, host):
        host = np.ascontiguousarray(host).reshape(-1)
        dev = self.empty(host.size, host.dtype)
        self.upload(host, dev)
        return dev

    # -- kernels -------------------------------------------------------------------------------
    def _compile(self, text):
        return self._source_module(text, no_extern_c=True, arch=self.arch,
                                   options=["-std=c++14"])

    @staticmethod
    def _get_function(module, name, codes):
        f = module.get_function(name)
        f.prepare(codes)
        return f, struct.Struct(codes)

    def _launch(self, func, config, args):
        # pycuda's prepared_async_call without its per-call Python layer: the arguments packed
        # by a precompiled struct (native alignment, as pycuda's own packer), then the launch
        fn, packer = func
        grid, block = config
        fn._launch_kernel(grid, block, packer.pack(*args), 0, self.stream)

    def kernels(self, name, dtype):
        """The kernels of family ``name`` compiled for ``dtype`` (once per context)."""
        k = self._kernels.get((name, dtype))     # as the caller names the dtype: no normalising
        if k is not None:
            return k
        key = (name, np.dtype(dtype).name)
        k = self._kernels.get(key)
        if k is None:
            module = self.cache.module(self.device_id, name, dtype)
            k = Kernels(name, dtype, module, self._get_function, self._launch)
            self._kernels[key] = k
        self._kernels[(name, dtype)] = k
        return k
