"""CUDA kernel sources, their per-dtype translation units, launch arithmetic and the kernel cache.

Each family module registers one source at import (``register_source("neuron", SOURCE)``), written
once against the type ``Dtype``. The translation unit of (family, dtype) is::

    preamble(dtype)             typedef float Dtype;  (or double) + DTYPE_MAX, CAFFE_FLT_MIN,
                                CUDA_KERNEL_LOOP (the grid-stride loop)
    extern "C" { <source> }     unmangled names: pycuda looks them up, ctypes too (tests)

so the float and double kernels come from the same text and the double path never names
``float``. Kernels are compiled once per (context, family, dtype) by :class:`KernelCache`, never
inside ``forward``, however many threads ask at once (the binaries are cached on disk by
:mod:`.compile_cache`, safely across threads and processes). Launches are 1-d: ``n`` work items,
``THREADS`` threads per block, at most ``MAX_BLOCKS`` blocks (grid-stride loops cover the rest).
Kernel signatures are parsed from the source (``Dtype*`` -> pointer, ``Dtype`` -> the dtype,
``int`` ...), so the Python side never repeats them.
"""
import importlib
import re
import threading

import numpy as np

from ..errors import CaffeError
from .compile_cache import OnceMap

THREADS = 512
MAX_BLOCKS = 65535
INT32_MAX = 2 ** 31 - 1

SOURCES = {}

_PREAMBLE = """\
#define CUDA_KERNEL_LOOP(i, n) \\
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)
typedef %(ctype)s Dtype;
#define DTYPE_MAX ((Dtype)%(max)s)
#define CAFFE_FLT_MIN ((Dtype)1.17549435082228750797e-38)
#define DTYPE_IS_DOUBLE %(is_double)d
"""
_LIMITS = {"float32": ("float", "3.40282346638528859812e+38", 0),
           "float64": ("double", "1.79769313486231570815e+308", 1)}
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def register_source(name, source):
    """Register a family's kernel source under ``name`` (twice is an error)."""
    if name in SOURCES and SOURCES[name] != source:
        raise RuntimeError("kernel source '%s' registered twice" % name)
    SOURCES[name] = source
    return source


#: Modules of caffepy.gpu beside this one that register kernel source when imported (found by
#: name, as the layer families are: they import this module, never the reverse).
SOURCE_MODULES = ("ops", "random", "solvers", "layers")


def load_all_sources():
    """Import every module that registers kernel source; returns {name: source}."""
    package = __name__.rsplit(".", 1)[0]
    for name in SOURCE_MODULES:
        module = importlib.import_module("%s.%s" % (package, name))
        if hasattr(module, "load_all"):
            module.load_all()
    return dict(SOURCES)


def _dtype_key(dtype):
    dt = np.dtype(dtype)
    if dt.name not in _LIMITS:
        raise CaffeError("GPU kernels exist for float32 and float64, not %s" % dt.name)
    return dt.name


def preamble(dtype):
    ctype, vmax, is_double = _LIMITS[_dtype_key(dtype)]
    return _PREAMBLE % {"ctype": ctype, "max": vmax, "is_double": is_double}


def translation_unit(name, dtype, sources=None):
    """The full text compiled for family ``name`` in ``dtype``."""
    src = (sources or SOURCES)[name]
    return '%s\nextern "C" {\n%s\n}\n' % (preamble(dtype), src)


# -- signatures ----------------------------------------------------------------------------------
_KERNEL_RE = re.compile(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", re.S)
_SCALARS = {"int": "i", "unsigned int": "I", "unsigned": "I", "long long": "q",
            "unsigned long long": "Q", "float": "f", "double": "d"}


def _arg_code(decl, dtype):
    decl = " ".join(decl.replace("const", " ").replace("__restrict__", " ").split())
    if "*" in decl:
        return "P"
    ctype = decl.rsplit(" ", 1)[0]
    if ctype == "Dtype":
        return "d" if np.dtype(dtype) == np.float64 else "f"
    try:
        return _SCALARS[ctype]
    except KeyError:
        raise CaffeError("kernel argument '%s': unsupported type" % decl)


def kernel_signatures(source, dtype):
    """{kernel name: struct-style argument codes} of every ``__global__`` function in ``source``."""
    out = {}
    for name, args in _KERNEL_RE.findall(source):
        decls = [a.strip() for a in args.split(",") if a.strip()]
        out[name] = "".join(_arg_code(d, dtype) for d in decls)
    return out


# -- launch configuration ------------------------------------------------------------------------
def launch_config(n, threads=THREADS, max_blocks=MAX_BLOCKS):
    """(grid, block) for ``n`` work items of a grid-stride kernel; None when n == 0."""
    n = int(n)
    if n < 0:
        raise CaffeError("kernel launch over a negative count %d" % n)
    if n > INT32_MAX:
        raise CaffeError("kernel launch over %d items exceeds 32-bit indexing" % n)
    if n == 0:
        return None
    blocks = min((n + threads - 1) // threads, max_blocks)
    return (blocks, 1, 1), (threads, 1, 1)


_CONVERT = {"P": None, "f": float, "d": float, "i": int, "I": int, "q": int, "Q": int}


def converters(codes):
    """One converter per argument code: device pointers to ints, scalars to Python float / int
    (packed by the launcher into the kernel's C types)."""
    return tuple(_CONVERT[c] or device_pointer for c in codes)


def convert_args(codes, args, convs=None):
    """Turn Python arguments into the values a kernel takes, by the codes of its signature.

    Pointers: anything with ``.gpudata`` (GPUArray), ``.ctypes`` (numpy, the emulator) or an int.
    """
    if len(codes) != len(args):
        raise CaffeError("kernel takes %d arguments, got %d" % (len(codes), len(args)))
    return [f(a) for f, a in zip(convs or converters(codes), args)]


def device_pointer(a):
    if a is None:
        return 0
    gpudata = getattr(a, "gpudata", None)
    if gpudata is not None:
        return int(gpudata)
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    return int(a)


# -- cache -------------------------------------------------------------------------------------
class KernelCache(object):
    """Compiled modules keyed by (context key, family, dtype); ``compile_fn(text)`` on a miss.

    Safe from many threads: each key is compiled once (:class:`~.compile_cache.OnceMap`: the
    others wait for that module), and an entry is visible only once complete. :meth:`kernels`
    likewise makes one :class:`Kernels` per key.
    """

    def __init__(self, compile_fn):
        self.compile_fn = compile_fn
        self._modules = OnceMap()
        self._kernels = OnceMap()
        self._count = threading.Lock()
        self.compiles = 0

    @staticmethod
    def key(context_key, name, dtype):
        return (context_key, name, _dtype_key(dtype))

    def module(self, context_key, name, dtype):
        key = self.key(context_key, name, dtype)
        mod = self._modules.get(key)
        if mod is None:
            mod = self._modules.get_or_create(key, lambda: self._compile(name, dtype))
        return mod

    def _compile(self, name, dtype):
        if name not in SOURCES:
            load_all_sources()
        if name not in SOURCES:
            raise CaffeError("no kernel source named '%s' (known: %s)"
                             % (name, ", ".join(sorted(SOURCES))))
        mod = self.compile_fn(translation_unit(name, dtype))
        with self._count:
            self.compiles += 1
        return mod

    def kernels(self, context_key, name, dtype, get_function, launch):
        """The :class:`Kernels` of (context, family, dtype), made once (a device's ``kernels``)."""
        key = self.key(context_key, name, dtype)
        k = self._kernels.get(key)
        if k is None:
            k = self._kernels.get_or_create(key, lambda: Kernels(
                name, dtype, self.module(context_key, name, dtype), get_function, launch))
        return k


class Kernels(object):
    """The kernels of one family in one dtype: ``k.relu_forward(n, x, y, slope)`` launches over n.

Every kernel's first parameter is ``const int n``, the work-item count of its grid-stride loop;
the launcher passes it, and the caller gives the remaining arguments.

    ``get_function(name)`` comes from the compiled module; ``launch(fn, config, args)`` is the
    backend's (pycuda's prepared async call on caffepy's stream, or the test emulator's).
    """

    def __init__(self, name, dtype, module, get_function, launch):
        self.name = name
        self.dtype = np.dtype(dtype)
        self._module = module
        self._get_function = get_function
        self._launch = launch
        self._signatures = kernel_signatures(SOURCES[name], dtype)
        self._bound = {}

    def __getattr__(self, kname):
        if kname.startswith("_"):
            raise AttributeError(kname)
        fn = self._bound.get(kname)
        if fn is None:
            if kname not in self._signatures:
                raise AttributeError("kernel family '%s' has no kernel '%s'" % (self.name, kname))
            codes = self._signatures[kname]
            func = self._get_function(self._module, kname, codes)
            launch = self._launch
            convs = converters(codes)

            def fn(n, *args):
                config = launch_config(n)
                if config is not None:
                    launch(func, config, convert_args(codes, (n,) + args, convs))
            fn.__name__ = kname
            self._bound[kname] = fn
        return fn
