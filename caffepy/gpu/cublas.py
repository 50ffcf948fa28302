"""cuBLAS through ctypes: row-major GEMM / GEMV, axpy, scal, dot, asum on caffepy's stream.

caffepy's matrices are row-major, cuBLAS's column-major. A row-major (m x n) matrix is, read as
column-major, its (n x m) transpose, so ``C = op(A) op(B)`` (row-major) is computed as the
column-major ``C^T = op(B)^T op(A)^T``: the operands swap, m and n swap, and the leading
dimensions are the row lengths (:func:`gemm_args`, Caffe's ``caffe_gpu_gemm``). GEMV likewise
flips the transpose flag (:func:`gemv_args`). :class:`Blas` holds that mapping; the backend
(:class:`Cublas`, or the tests' numpy emulation of column-major BLAS) only runs the column-major
call. TF32 tensor-core GEMM (``cublasGemmEx`` with ``CUBLAS_COMPUTE_32F_FAST_TF32``) is off by
default: ``set_tf32(True)`` or ``CAFFEPY_TF32=1``.

The library is found in this order (:func:`candidate_paths`): ``$CAFFEPY_CUBLAS`` (a file), the
``nvidia-cublas`` pip wheel (``site-packages/nvidia/cublas/lib`` or ``nvidia/cu*/lib``), then
the system (``ctypes.util.find_library``, libcublas.so.13 / .12 / .11). One handle per context,
bound to the device's stream; pointer mode host (dot / asum return Python floats, which waits).
"""
import ctypes
import ctypes.util
import glob
import os
import re
import sys

import numpy as np

from ..errors import CaffeError

OP_N, OP_T = 0, 1
CUDA_R_32F = 0
COMPUTE_32F_FAST_TF32 = 77
GEMM_DEFAULT = -1

STATUS = {0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED",
          3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
          8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
          13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
          15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}


class CublasError(CaffeError):
    """A cuBLAS call that returned a status other than SUCCESS (``.status``, ``.name``)."""

    def __init__(self, status, call):
        self.status = status
        self.name = STATUS.get(status, "CUBLAS_STATUS_%d" % status)
        CaffeError.__init__(self, "%s failed: %s (%d)" % (call, self.name, status))


class CublasNotFound(CaffeError):
    """No loadable libcublas."""


def check(status, call):
    if status != 0:
        raise CublasError(status, call)


# -- the row-major mapping ---------------------------------------------------------------------
def gemm_args(trans_a, trans_b, m, n, k):
    """Column-major arguments for row-major ``C (m x n) = op(A) (m x k) op(B) (k x n)``.

    Returns (transa, transb, m', n', k, ld_first, ld_second, ldc) for the call
    ``gemm(transa, transb, m', n', k, alpha, B, ld_first, A, ld_second, beta, C, ldc)``:
    B comes first.
    """
    lda = m if trans_a else k
    ldb = k if trans_b else n
    return (OP_T if trans_b else OP_N, OP_T if trans_a else OP_N, n, m, k, ldb, lda, n)


def gemv_args(trans_a, m, n):
    """Column-major arguments for row-major ``y = op(A) x``, A (m x n): (trans, m', n', lda)."""
    return (OP_N if trans_a else OP_T, n, m, n)


class Blas(object):
    """Row-major BLAS on device arrays (1-d; offsets by slicing). Backends implement the ``_cm_*``
    column-major calls and ``_dot`` / ``_asum`` / ``_axpy`` / ``_scal`` on pointers."""
    tf32 = os.environ.get("CAFFEPY_TF32", "0") not in ("", "0", "false", "False")

    def set_tf32(self, enabled):
        self.tf32 = bool(enabled)

    def gemm(self, trans_a, trans_b, m, n, k, alpha, a, b, beta, c):
        """``c = alpha * op(a) @ op(b) + beta * c``; a, b, c row-major (m x k), (k x n), (m x n)."""
        ta, tb, mm, nn, kk, ld1, ld2, ldc = gemm_args(trans_a, trans_b, m, n, k)
        if m == 0 or n == 0:
            return
        self._cm_gemm(c.dtype, ta, tb, mm, nn, kk, alpha, b, ld1, a, ld2, beta, c, ldc)

    def gemv(self, trans_a, m, n, alpha, a, x, beta, y):
        """``y = alpha * op(a) @ x + beta * y`` for row-major a (m x n)."""
        t, mm, nn, lda = gemv_args(trans_a, m, n)
        if m == 0 or n == 0:
            return
        self._cm_gemv(y.dtype, t, mm, nn, alpha, a, lda, x, beta, y)

    def axpy(self, n, alpha, x, y):
        self._axpy(y.dtype, n, alpha, x, y)

    def scal(self, n, alpha, x):
        self._scal(x.dtype, n, alpha, x)

    def dot(self, n, x, y):
        return self._dot(x.dtype, n, x, y)

    def asum(self, n, x):
        return self._asum(x.dtype, n, x)


# -- library discovery -------------------------------------------------------------------------
def _version_key(path):
    nums = re.findall(r"\d+", os.path.basename(path).split(".so", 1)[-1])
    return tuple(int(v) for v in nums)


def wheel_candidates(search_paths=None, name="cublas"):
    """lib<name> files of the nvidia-<name> pip wheels under ``search_paths`` (default sys.path),
    newest version first within each directory."""
    out = []
    for root in (search_paths if search_paths is not None else sys.path):
        for pattern in ("nvidia/%s/lib" % name, "nvidia/cu*/lib"):
            for d in sorted(glob.glob(os.path.join(root, pattern))):
                files = glob.glob(os.path.join(d, "lib%s.so*" % name)) + \
                    glob.glob(os.path.join(d, "%s64_*.dll" % name))
                out.extend(sorted(files, key=_version_key, reverse=True))
    return out


SYSTEM_NAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")


def candidate_paths(environ=None, search_paths=None, find_library=ctypes.util.find_library,
                    name="cublas", env="CAFFEPY_CUBLAS", system=SYSTEM_NAMES):
    """Where lib<name> is looked for, in order, without duplicates: the file ``$<env>``, the pip
    wheels, ``find_library``, then the ``system`` sonames."""
    environ = os.environ if environ is None else environ
    out = []
    if environ.get(env):
        out.append(environ[env])
    out.extend(wheel_candidates(search_paths, name))
    found = find_library(name)
    if found:
        out.append(found)
    out.extend(system)
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def load_library(candidates=None, loader=ctypes.CDLL, what="cuBLAS", error=None,
                 fix="install it (pip install nvidia-cublas-cu12) or set CAFFEPY_CUBLAS to the "
                     "libcublas file"):
    """(library, path) of the first candidate that loads; ``error`` (default CublasNotFound), one
    line with the fix and every failure, if none does."""
    candidates = candidate_paths() if candidates is None else candidates
    errors = []
    for path in candidates:
        try:
            return loader(path), path
        except OSError as e:
            errors.append("%s (%s)" % (path, str(e).splitlines()[0] if str(e) else "not found"))
    raise (error or CublasNotFound)("cannot load %s: tried %s; %s" % (what, "; ".join(errors),
                                                                       fix))


# -- the cuBLAS backend ------------------------------------------------------------------------
_c_int, _c_void_p = ctypes.c_int, ctypes.c_void_p
_SCALAR = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
_PREFIX = {np.dtype(np.float32): "S", np.dtype(np.float64): "D"}


def _ptr(a):
    from .kernels import device_pointer
    return _c_void_p(device_pointer(a))


class Cublas(Blas):
    """A cuBLAS handle for the current context, bound to ``stream_handle``."""

    def __init__(self, stream_handle, lib=None):
        self.lib = load_library()[0] if lib is None else lib
        self.handle = _c_void_p()
        check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        check(self.lib.cublasSetStream_v2(self.handle, _c_void_p(stream_handle)), "cublasSetStream")

    def close(self):
        if self.handle:
            self.lib.cublasDestroy_v2(self.handle)
            self.handle = _c_void_p()

    def _call(self, dtype, name, *args):
        full = "cublas%s%s_v2" % (_PREFIX[np.dtype(dtype)], name)
        check(getattr(self.lib, full)(self.handle, *args), full)

    def _cm_gemm(self, dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        dt = np.dtype(dtype)
        s = _SCALAR[dt]
        al, be = s(alpha), s(beta)
        if self.tf32 and dt == np.float32:
            check(self.lib.cublasGemmEx(
                self.handle, ta, tb, m, n, k, ctypes.byref(al), _ptr(a), CUDA_R_32F, lda,
                _ptr(b), CUDA_R_32F, ldb, ctypes.byref(be), _ptr(c), CUDA_R_32F, ldc,
                COMPUTE_32F_FAST_TF32, GEMM_DEFAULT), "cublasGemmEx")
            return
        self._call(dt, "gemm", _c_int(ta), _c_int(tb), _c_int(m), _c_int(n), _c_int(k),
                   ctypes.byref(al), _ptr(a), _c_int(lda), _ptr(b), _c_int(ldb),
                   ctypes.byref(be), _ptr(c), _c_int(ldc))

    def _cm_gemv(self, dtype, t, m, n, alpha, a, lda, x, beta, y):
        s = _SCALAR[np.dtype(dtype)]
        self._call(dtype, "gemv", _c_int(t), _c_int(m), _c_int(n), ctypes.byref(s(alpha)),
                   _ptr(a), _c_int(lda), _ptr(x), _c_int(1), ctypes.byref(s(beta)), _ptr(y),
                   _c_int(1))

    def _axpy(self, dtype, n, alpha, x, y):
        s = _SCALAR[np.dtype(dtype)]
        self._call(dtype, "axpy", _c_int(n), ctypes.byref(s(alpha)), _ptr(x), _c_int(1), _ptr(y),
                   _c_int(1))

    def _scal(self, dtype, n, alpha, x):
        s = _SCALAR[np.dtype(dtype)]
        self._call(dtype, "scal", _c_int(n), ctypes.byref(s(alpha)), _ptr(x), _c_int(1))

    def _dot(self, dtype, n, x, y):
        out = _SCALAR[np.dtype(dtype)]()
        self._call(dtype, "dot", _c_int(n), _ptr(x), _c_int(1), _ptr(y), _c_int(1),
                   ctypes.byref(out))
        return float(out.value)

    def _asum(self, dtype, n, x):
        out = _SCALAR[np.dtype(dtype)]()
        self._call(dtype, "asum", _c_int(n), _ptr(x), _c_int(1), ctypes.byref(out))
        return float(out.value)
