"""cuDNN through ctypes: the convolution of Caffe's ``CuDNNConvolutionLayer``.

Forward, per image n and output channel m of group g = m // (M/G)::

    y[n, m, i, j] = b[m] + sum_{c < C/G, p < kh, q < kw}
                    w[m, c, p, q] * x[n, g*C/G + c, i*sh - ph + p*dh, j*sw - pw + q*dw]

(cross-correlation, ``CUDNN_CROSS_CORRELATION``; x is zero outside the image). Backward, as
Caffe: ``dW += dy (*) x`` and ``db += sum_{n,i,j} dy`` accumulate (beta 1), ``dx = W^T (*) dy`` is
overwritten (beta 0). One call per blob covers the whole batch and every group
(``cudnnSetConvolutionGroupCount``).

prototxt: ``convolution_param { engine: DEFAULT | CAFFE | CUDNN }``. DEFAULT and CUDNN use cuDNN
where it loads (else im2col + cuBLAS, with one warning); CAFFE keeps im2col + cuBLAS. The switch
``CAFFEPY_CUDNN`` (or :func:`set_mode`) overrides every layer: ``0`` / ``off`` forces im2col,
``1`` / ``on`` forces cuDNN (an error where it cannot load), ``auto`` (the default) follows the
engine field.

Algorithms: timed once per shape (``cudnnFind*Algorithm``, as PyTorch's benchmark mode; the
fastest that fits the workspace limit ``CAFFEPY_CUDNN_WORKSPACE_MB``, default 1024), or with
``CAFFEPY_CUDNN_BENCHMARK=0`` taken from cuDNN's heuristics (``cudnnGet*Algorithm_v7``, as
Caffe), which trained GoogLeNet and ResNet-50 slower (BENCHMARKS.md, "GPU"). FP32 uses plain FMA math
(``CUDNN_FMA_MATH``) unless TF32 is switched on for cuBLAS too (``CAFFEPY_TF32=1``).

The library: ``$CAFFEPY_CUDNN_LIBRARY`` (a file), the ``nvidia-cudnn`` pip wheels
(``site-packages/nvidia/cudnn/lib``), ``ctypes.util.find_library``, then libcudnn.so.9 / .8.
One handle per device, bound to its stream; one workspace per handle, grown on demand.
"""
import ctypes
import ctypes.util
import glob
import os
import threading

import numpy as np

from ..errors import CaffeError
from . import cublas as _libs

DATA_TYPE = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}   # CUDNN_DATA_FLOAT / DOUBLE
TENSOR_NCHW = 0
CROSS_CORRELATION = 1
DEFAULT_MATH, FMA_MATH = 0, 3
ENGINE_DEFAULT, ENGINE_CAFFE, ENGINE_CUDNN = 0, 1, 2      # ConvolutionParameter.Engine
SYSTEM_NAMES = ("libcudnn.so.9", "libcudnn.so.8", "libcudnn.so")
MAX_ALGOS = 16

_c_int, _c_void_p, _c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
_SCALAR = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


class CudnnError(CaffeError):
    """A cuDNN call that returned a status other than CUDNN_STATUS_SUCCESS."""

    def __init__(self, status, call, name=None):
        self.status = status
        self.name = name or "CUDNN_STATUS_%d" % status
        CaffeError.__init__(self, "%s failed: %s (%d)" % (call, self.name, status))


class CudnnNotFound(CaffeError):
    """No loadable libcudnn."""


class AlgoPerf(ctypes.Structure):
    """cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (the three share one layout)."""
    _fields_ = [("algo", _c_int), ("status", _c_int), ("time", ctypes.c_float),
                ("memory", _c_size_t), ("determinism", _c_int), ("mathType", _c_int),
                ("reserved", _c_int * 3)]


# -- the library and the switch ----------------------------------------------------------------
def candidate_paths(environ=None, search_paths=None, find_library=ctypes.util.find_library):
    return _libs.candidate_paths(environ, search_paths, find_library, name="cudnn",
                                 env="CAFFEPY_CUDNN_LIBRARY", system=SYSTEM_NAMES)


_lock = threading.Lock()
_loaded = []          # [(lib, path)] or [CudnnNotFound]


def load():
    """(library, path), loaded once; CudnnNotFound (one line with the fix) where none loads."""
    with _lock:
        if not _loaded:
            try:
                _loaded.append(_libs.load_library(
                    candidate_paths(), what="cuDNN", error=CudnnNotFound,
                    fix="install it (pip install nvidia-cudnn-cu13, or -cu12) or set "
                        "CAFFEPY_CUDNN_LIBRARY to the libcudnn file"))
            except CudnnNotFound as e:
                _loaded.append(e)
            else:
                _preload_parts(_loaded[0][1])
    if isinstance(_loaded[0], Exception):
        raise _loaded[0]
    return _loaded[0]


def _preload_parts(path):
    """cuDNN 9's libcudnn is a shim that dlopens its parts (libcudnn_ops, _cnn, _engines_*, ...)
    by soname at the first call; from a wheel's directory, which is on no search path, they are
    found only if already loaded. Load them (global symbols; a part that fails is left out: its
    algorithms then report an error status and are skipped)."""
    if not os.path.isabs(path):
        return
    parts = sorted(glob.glob(os.path.join(os.path.dirname(path), "libcudnn_*.so*")))
    for _ in range(2):            # a part whose own needs are not loaded yet loads on the 2nd pass
        for f in list(parts):
            try:
                ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL)
                parts.remove(f)
            except OSError:
                pass


def library_path():
    return load()[1]


def version():
    """cudnnGetVersion(): e.g. 91300 for 9.13.0."""
    lib = load()[0]
    lib.cudnnGetVersion.restype = _c_size_t
    return int(lib.cudnnGetVersion())


_MODES = {"": "auto", "auto": "auto", "1": "on", "on": "on", "true": "on", "0": "off",
          "off": "off", "false": "off"}
_override = [None]


def set_mode(value):
    """Force cuDNN on (True / 'on'), off (False / 'off'), or follow the engine fields (None /
    'auto'); overrides ``CAFFEPY_CUDNN`` in this process."""
    if value is None or isinstance(value, bool):
        value = {None: "auto", True: "on", False: "off"}[value]
    if value not in ("auto", "on", "off"):
        raise ValueError("cuDNN mode must be 'auto', 'on' or 'off', not %r" % (value,))
    _override[0] = value


def mode(environ=None):
    """'auto', 'on' or 'off': :func:`set_mode`, else ``CAFFEPY_CUDNN``."""
    if _override[0] is not None:
        return _override[0]
    raw = (os.environ if environ is None else environ).get("CAFFEPY_CUDNN", "auto")
    got = _MODES.get(raw.strip().lower())
    if got is None:
        raise CaffeError("CAFFEPY_CUDNN=%r: use auto, 1/on or 0/off" % raw)
    return got


def wanted(engine, environ=None):
    """Whether a layer whose ``engine`` field is ``engine`` should run on cuDNN."""
    m = mode(environ)
    return m == "on" or (m == "auto" and engine != ENGINE_CAFFE)


def workspace_limit(environ=None):
    raw = (os.environ if environ is None else environ).get("CAFFEPY_CUDNN_WORKSPACE_MB", "1024")
    try:
        return max(0, int(raw)) << 20
    except ValueError:
        raise CaffeError("CAFFEPY_CUDNN_WORKSPACE_MB=%r is not a whole number of MiB" % raw)


def choose(perfs, count, limit):
    """The first (algo, memory) of cuDNN's ranked ``perfs[:count]`` that succeeded and needs at
    most ``limit`` bytes of workspace, or None."""
    for p in perfs[:count]:
        if p.status == 0 and p.memory <= limit:
            return int(p.algo), int(p.memory)
    return None


# -- the handle --------------------------------------------------------------------------------
def _ptr(a):
    from .kernels import device_pointer
    return _c_void_p(device_pointer(a))


class Cudnn(object):
    """A cuDNN handle on ``stream_handle``; ``alloc(nbytes, dtype)`` gives device arrays."""

    def __init__(self, stream_handle, alloc, lib=None, tf32=False):
        self.lib = load()[0] if lib is None else lib
        self.lib.cudnnGetErrorString.restype = ctypes.c_char_p
        self.alloc = alloc
        self.tf32 = bool(tf32)
        self.handle = _c_void_p()
        self.call("cudnnCreate", ctypes.byref(self.handle))
        self.call("cudnnSetStream", self.handle, _c_void_p(stream_handle))
        self._ws = None

    def call(self, name, *args):
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise CudnnError(status, name, self.lib.cudnnGetErrorString(status).decode())

    def close(self):
        if self.handle:
            self.lib.cudnnDestroy(self.handle)
            self.handle = _c_void_p()

    def workspace(self, nbytes):
        """(pointer, size) of a device workspace of at least ``nbytes`` (shared by every call:
        they are ordered on the one stream)."""
        if nbytes == 0:
            return _c_void_p(0), _c_size_t(0)
        if self._ws is None or self._ws.size < nbytes:
            self._ws = None
            self._ws = self.alloc(nbytes, np.uint8)
        return _ptr(self._ws), _c_size_t(nbytes)

    def conv_plan(self, dtype, n, c, h, w, m, group, kernel, pad, stride, dilation, out):
        return ConvPlan(self, dtype, n, c, h, w, m, group, kernel, pad, stride, dilation, out)


class _Desc(object):
    """A cuDNN descriptor (Tensor, Filter or Convolution), destroyed with the object."""

    def __init__(self, cud, kind):
        self.cud, self.kind, self.p = cud, kind, _c_void_p()
        cud.call("cudnnCreate%sDescriptor" % kind, ctypes.byref(self.p))

    def __del__(self):
        try:
            getattr(self.cud.lib, "cudnnDestroy%sDescriptor" % self.kind)(self.p)
        except Exception:  # noqa: BLE001  (interpreter shutdown: the library may be gone)
            pass


def _tensor(cud, dt, n, c, h, w):
    d = _Desc(cud, "Tensor")
    cud.call("cudnnSetTensor4dDescriptor", d.p, _c_int(TENSOR_NCHW), _c_int(dt), *map(_c_int, (
        n, c, h, w)))
    return d


class ConvPlan(object):
    """Descriptors and algorithms for one convolution geometry: x (n, c, h, w), filter
    (m, c / group, kh, kw), y (n, m, oh, ow); backward algorithms are chosen on first use."""

    def __init__(self, cud, dtype, n, c, h, w, m, group, kernel, pad, stride, dilation, out):
        self.cud, self.dtype = cud, np.dtype(dtype)
        dt = DATA_TYPE[self.dtype]
        self.x = _tensor(cud, dt, n, c, h, w)
        self.y = _tensor(cud, dt, n, m, out[0], out[1])
        self.bias = _tensor(cud, dt, 1, m, 1, 1)
        self.w = _Desc(cud, "Filter")
        cud.call("cudnnSetFilter4dDescriptor", self.w.p, _c_int(dt), _c_int(TENSOR_NCHW),
                 *map(_c_int, (m, c // group, kernel[0], kernel[1])))
        self.conv = _Desc(cud, "Convolution")
        cud.call("cudnnSetConvolution2dDescriptor", self.conv.p,
                 *map(_c_int, (pad[0], pad[1], stride[0], stride[1], dilation[0], dilation[1],
                               CROSS_CORRELATION, dt)))
        cud.call("cudnnSetConvolutionGroupCount", self.conv.p, _c_int(group))
        math = DEFAULT_MATH if (cud.tf32 and self.dtype == np.float32) else FMA_MATH
        cud.call("cudnnSetConvolutionMathType", self.conv.p, _c_int(math))
        scalar = _SCALAR[self.dtype]
        self.one, self.zero = scalar(1.0), scalar(0.0)
        self.limit = workspace_limit()
        self.benchmark = os.environ.get("CAFFEPY_CUDNN_BENCHMARK", "1") not in ("", "0")
        self._algo = {}

    # what, (descriptor order of the Get/Find calls), workspace-size function
    _KINDS = {
        "fwd": ("ConvolutionForward", ("x", "w", "conv", "y")),
        "bwd_filter": ("ConvolutionBackwardFilter", ("x", "y", "conv", "w")),
        "bwd_data": ("ConvolutionBackwardData", ("w", "y", "conv", "x")),
    }

    def algo(self, kind):
        """(algo, workspace bytes) for ``kind`` ('fwd', 'bwd_filter', 'bwd_data'), chosen once."""
        got = self._algo.get(kind)
        if got is not None:
            return got
        what, order = self._KINDS[kind]
        descs = [getattr(self, k).p for k in order]
        cud = self.cud
        perfs, count = (AlgoPerf * MAX_ALGOS)(), _c_int(0)
        op = what.replace("Convolution", "")
        fn = ("cudnnFindConvolution%sAlgorithm" % op if self.benchmark
              else "cudnnGetConvolution%sAlgorithm_v7" % op)
        cud.call(fn, cud.handle, *descs, _c_int(MAX_ALGOS), ctypes.byref(count), perfs)
        got = choose(perfs, count.value, self.limit)
        if got is None:
            raise CudnnError(9, "%s: no algorithm fits in %d MiB of workspace "
                             "(CAFFEPY_CUDNN_WORKSPACE_MB)" % (fn, self.limit >> 20),
                             "CUDNN_STATUS_NOT_SUPPORTED")
        size = _c_size_t(0)
        cud.call("cudnnGet%sWorkspaceSize" % what, cud.handle, *descs, _c_int(got[0]),
                 ctypes.byref(size))
        got = (got[0], int(size.value))
        self._algo[kind] = got
        return got

    def forward(self, x, w, y, bias=None):
        """y = conv(x, w) (+ bias broadcast over n, i, j)."""
        cud = self.cud
        algo, nbytes = self.algo("fwd")
        ws, wsz = cud.workspace(nbytes)
        cud.call("cudnnConvolutionForward", cud.handle, ctypes.byref(self.one), self.x.p, _ptr(x),
                 self.w.p, _ptr(w), self.conv.p, _c_int(algo), ws, wsz, ctypes.byref(self.zero),
                 self.y.p, _ptr(y))
        if bias is not None:
            cud.call("cudnnAddTensor", cud.handle, ctypes.byref(self.one), self.bias.p, _ptr(bias),
                     ctypes.byref(self.one), self.y.p, _ptr(y))

    def backward(self, x, w, dy, dw=None, db=None, dx=None):
        """db += sum dy; dw += dy (*) x; dx = W^T (*) dy (each only where given)."""
        cud = self.cud
        one, zero = ctypes.byref(self.one), ctypes.byref(self.zero)
        if db is not None:
            cud.call("cudnnConvolutionBackwardBias", cud.handle, one, self.y.p, _ptr(dy), one,
                     self.bias.p, _ptr(db))
        if dw is not None:
            algo, nbytes = self.algo("bwd_filter")
            ws, wsz = cud.workspace(nbytes)
            cud.call("cudnnConvolutionBackwardFilter", cud.handle, one, self.x.p, _ptr(x),
                     self.y.p, _ptr(dy), self.conv.p, _c_int(algo), ws, wsz, one, self.w.p,
                     _ptr(dw))
        if dx is not None:
            algo, nbytes = self.algo("bwd_data")
            ws, wsz = cud.workspace(nbytes)
            cud.call("cudnnConvolutionBackwardData", cud.handle, one, self.w.p, _ptr(w), self.y.p,
                     _ptr(dy), self.conv.p, _c_int(algo), ws, wsz, zero, self.x.p, _ptr(dx))
