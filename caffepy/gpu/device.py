"""One CUDA device: its primary context, caffepy's stream, a memory pool, cuBLAS and the kernels.

The primary context is retained and pushed as ``pycuda.autoprimaryctx`` does (and popped at exit),
so caffepy shares the context with any other library using the runtime API on that device.
Device arrays are 1-d ``pycuda.gpuarray.GPUArray`` from a ``pycuda.tools.DeviceMemoryPool``; a
blob's arrays are views of them by offset (slicing), shapes live on the host. All work (kernels,
cuBLAS, copies) is queued on one stream; ``download`` waits for it, nothing else does.

The same interface is what the blob mirrors (``alloc`` / ``upload`` / ``download``) and the GPU
layers (``empty`` / ``zeros`` / ``fill`` / ``copy`` / ``kernels`` / ``blas``) use.

Worker threads share one device, so everything made on first use is made once, under a lock: the
device itself (``caffepy.gpu.activate``), with its cuBLAS handle; the cuDNN handle; each kernel
family's module per dtype (:class:`~.kernels.KernelCache`), its cubin compiled by nvcc once
across threads and processes into caffepy's cache directory (:class:`~.compile_cache.CubinCompiler`,
``$CAFFEPY_KERNEL_CACHE``).
"""
import atexit
import struct
import threading

import numpy as np

from . import import_pycuda, unavailable
from .compile_cache import CubinCompiler, OnceMap
from .cublas import Cublas, CublasNotFound
from .kernels import KernelCache

_local = threading.local()


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
        from pycuda.tools import DeviceMemoryPool
        self._gpuarray = gpuarray
        self.stream = drv.Stream()
        self.pool = DeviceMemoryPool()
        block = self.pool.allocate(256)
        del block                           # the pool now holds blocks: see _close
        try:
            self.blas = Cublas(self.stream.handle)
        except CublasNotFound as e:
            raise unavailable(str(e))
        self.arch = "sm_%d%d" % self.cu_device.compute_capability()
        self.compiler = CubinCompiler(self.arch)
        self.cache = KernelCache(self.compiler)
        self._handles = OnceMap()         # "cudnn": made once, however many threads ask
        self._kernels = {}

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
        where cuDNN does not load (said once, as a warning: convolutions then use im2col). Made
        once per device under a lock: threads asking at once share one handle."""
        return self._handles.get_or_create("cudnn", self._make_cudnn)

    def _make_cudnn(self):
        from .cudnn import Cudnn, CudnnNotFound
        self.make_current()
        try:
            return Cudnn(self.stream.handle, self.empty, tf32=self.blas.tf32)
        except CudnnNotFound as e:
            import logging
            logging.getLogger("caffepy").warning("%s; convolutions use im2col + cuBLAS", e)
            return None

    def _close(self):
        # The pool keeps its blocks (and its hold on the context) until the process ends: device
        # arrays still alive after this (freed at interpreter teardown, in any thread) go back to
        # the pool without a CUDA call; pycuda would abort the process if the first free of an
        # empty pool came after the context was popped.
        try:
            self.synchronize()
            cud = self._handles.get("cudnn")
            if cud is not None:
                cud.close()
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
        """The kernels of family ``name`` compiled for ``dtype`` (once per context, however many
        threads ask: the cache makes one object per key; this dict only remembers it by the
        caller's spelling of the dtype)."""
        k = self._kernels.get((name, dtype))     # as the caller names the dtype: no normalising
        if k is None:
            k = self.cache.kernels(self.device_id, name, dtype, self._get_function, self._launch)
            self._kernels[(name, dtype)] = k
        return k
