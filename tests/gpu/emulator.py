"""A CPU stand-in for the CUDA device, to test the GPU path where there is no GPU.

* Kernels: each family's translation unit (the exact text pycuda compiles) is built by the host C++
  compiler with a small shim (``__global__`` -> nothing, ``threadIdx`` / ``blockIdx`` = 0,
  ``blockDim`` / ``gridDim`` = 1, ``__umulhi``, ``atomicAdd``) into a shared library and called
  through ctypes. With one thread in one block, every grid-stride loop runs all its items in
  order, so the kernels' arithmetic and indexing are checked; races between threads are not.
  The libraries are cached by content in ``<tmp>/caffepy-emu-kernels``, each built once however
  many threads and processes ask at once (:func:`build_library`).
* cuBLAS: :class:`ColumnMajorBlas` is a numpy implementation of the column-major BLAS calls
  (with cuBLAS's argument checks), driven by caffepy's own row-major mapping in
  ``caffepy.gpu.cublas.Blas``, so the operand swap and leading dimensions are exercised too.
* Memory: numpy arrays (fresh buffers are filled with NaN, so reading unwritten memory shows).

``EmulatedDevice`` has the interface of ``caffepy.gpu.device.Device``; install it with
``caffepy.gpu.install(EmulatedDevice())``.
"""
import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np
from numpy.lib.stride_tricks import as_strided

from caffepy.gpu import compile_cache, cublas
from caffepy.gpu.kernels import KernelCache

SHIM = r"""
#include <math.h>
#include <stdint.h>
#include <algorithm>
struct EmuDim3 { unsigned int x, y, z; };
static const EmuDim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static const EmuDim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __syncthreads()
using std::max;
using std::min;
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
template <typename T> static inline T atomicAdd(T* p, T v) { T old = *p; *p += v; return old; }
"""

_CTYPES = {"P": ctypes.c_void_p, "i": ctypes.c_int, "I": ctypes.c_uint, "q": ctypes.c_longlong,
           "Q": ctypes.c_ulonglong, "f": ctypes.c_float, "d": ctypes.c_double}


def compiler():
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


def compile_cxx(source, out):
    """One host compiler run: ``source`` (text) into the shared library ``out``. The source goes
    to ``out + ".cpp"`` (``out`` is a temporary name of the caller's own, so this one is too)."""
    src = out + ".cpp"
    try:
        with open(src, "w") as f:
            f.write(source)
        r = subprocess.run([compiler(), "-O1", "-shared", "-fPIC", "-std=c++14", "-w", "-o", out,
                            src], capture_output=True, text=True)
    finally:
        if os.path.exists(src):
            os.unlink(src)
    if r.returncode:
        raise RuntimeError("host build of kernels failed:\n%s" % r.stderr[-4000:])


def default_cache_dir():
    return os.path.join(tempfile.gettempdir(), "caffepy-emu-kernels")


def build_library(text, cache_dir=None):
    """Compile a translation unit (with the shim) into a shared library and load it; cached by
    content in ``cache_dir`` (default: ``<tmp>/caffepy-emu-kernels``).

    Built once however many threads and processes ask at once, into a temporary file renamed
    into place, so a library is loaded only when complete; a cached library shorter than its
    ELF headers say (truncated) or that does not load is rebuilt once
    (``caffepy.gpu.compile_cache.cached``).
    """
    full = SHIM + text
    path = os.path.join(cache_dir or default_cache_dir(), "k%s.so" % compile_cache.digest(full))
    return compile_cache.cached(path, lambda tmp: compile_cxx(full, tmp), ctypes.CDLL,
                                what="emulated kernel library", check=compile_cache.elf_complete)


class ColumnMajorBlas(cublas.Blas):
    """numpy column-major BLAS behind caffepy's row-major front end (tests the mapping)."""

    def __init__(self):
        self.calls = []

    @staticmethod
    def matrix(buf, rows, cols, ld):
        """The column-major (rows x cols) matrix with leading dimension ld stored in ``buf``."""
        if ld < max(1, rows):
            raise cublas.CublasError(7, "leading dimension %d < rows %d" % (ld, rows))
        if rows and cols and (cols - 1) * ld + rows > buf.size:
            raise cublas.CublasError(7, "matrix (%d x %d, ld %d) overruns its buffer of %d"
                                     % (rows, cols, ld, buf.size))
        item = buf.itemsize
        return as_strided(buf, shape=(rows, cols), strides=(item, ld * item))

    def _op(self, buf, trans, rows, cols, ld):
        """op(X) of shape (rows x cols) read from buf."""
        if trans == cublas.OP_N:
            return self.matrix(buf, rows, cols, ld)
        return self.matrix(buf, cols, rows, ld).T

    def _cm_gemm(self, dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        self.calls.append(("gemm", ta, tb, m, n, k, lda, ldb, ldc))
        A = self._op(a, ta, m, k, lda)
        B = self._op(b, tb, k, n, ldb)
        C = self.matrix(c, m, n, ldc)
        prod = (A.astype(np.float64) @ B.astype(np.float64)) * alpha
        C[...] = prod if beta == 0 else prod + beta * C
        assert C.dtype == dtype

    def _cm_gemv(self, dtype, t, m, n, alpha, a, lda, x, beta, y):
        self.calls.append(("gemv", t, m, n, lda))
        A = self.matrix(a, m, n, lda)
        op = A if t == cublas.OP_N else A.T
        r = (op.astype(np.float64) @ x[:op.shape[1]].astype(np.float64)) * alpha
        y[:op.shape[0]] = r if beta == 0 else r + beta * y[:op.shape[0]]

    def _axpy(self, dtype, n, alpha, x, y):
        y[:n] += dtype.type(alpha) * x[:n]

    def _scal(self, dtype, n, alpha, x):
        x[:n] *= dtype.type(alpha)

    def _dot(self, dtype, n, x, y):
        return float(np.dot(x[:n].astype(np.float64), y[:n].astype(np.float64)))

    def _asum(self, dtype, n, x):
        return float(np.abs(x[:n]).sum(dtype=np.float64))


class EmulatedDevice(object):
    """The ``caffepy.gpu.device.Device`` interface on the CPU (see the module docstring)."""
    device_id = 0

    def __init__(self):
        self.blas = ColumnMajorBlas()
        self.cache = KernelCache(build_library)
        self._kernels = {}
        self.uploads = self.downloads = 0

    def make_current(self):
        pass

    def synchronize(self):
        pass

    def empty(self, count, dtype):
        dt = np.dtype(dtype)
        return np.full(int(count), np.nan, dtype=dt) if dt.kind == "f" else \
            np.full(int(count), -7, dtype=dt)

    alloc = empty

    def zeros(self, count, dtype):
        return np.zeros(int(count), dtype=dtype)

    def fill(self, a, value):
        a[...] = value

    def copy(self, src, dst, count=None):
        n = src.size if count is None else int(count)
        dst[:n] = src[:n]

    def upload(self, host, dev):
        self.uploads += 1
        dev[...] = np.asarray(host).reshape(-1)

    def download(self, dev, host):
        self.downloads += 1
        host.reshape(-1)[...] = dev

    def to_host(self, dev):
        return np.array(dev)

    def to_device(self, host):
        return np.array(host, copy=True).reshape(-1)

    @staticmethod
    def _get_function(lib, name, codes):
        f = getattr(lib, name)
        f.argtypes = [_CTYPES[c] for c in codes]
        f.restype = None
        return f

    @staticmethod
    def _launch(func, config, args):
        func(*[a.item() if isinstance(a, np.generic) else a for a in args])

    def kernels(self, name, dtype):
        k = self._kernels.get((name, dtype))     # as the caller names the dtype: no normalising
        if k is None:
            k = self.cache.kernels("emu", name, dtype, self._get_function, self._launch)
            self._kernels[(name, dtype)] = k
        return k
