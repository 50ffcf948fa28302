"""Multi-threaded CPU kernels for the non-GEMM work (numba, optional), with a numpy fallback.

numpy runs every element-wise pass, strided copy and reduction on one core; the GEMMs already
thread through BLAS. The kernels in :mod:`caffepy.math._numba_kernels` (im2col / col2im in the
'last' layout, the GEMM result -> image copy fused with the bias add and an optional ReLU, direct
depthwise convolution, max / average pooling, ReLU, per-channel affine, softmax) split their outer
loop over cores with ``numba.prange``.

numba is a dependency where it has wheels (pyproject.toml), imported on first use. Layers ask
:func:`get` for the kernel module and keep their numpy code when it returns None: numba is not
installed, or it is switched off by ``CAFFEPY_NUMBA=0`` in the environment or by
:func:`set_enabled` (``with kernels.disabled(): ...`` in tests). Kernels are compiled on first
call, once per dtype, and cached on disk next to the module (numba's ``cache=True``), so a process
pays the compile time only the first time a machine runs them. Where that folder is not writable
(a read-only install: a container's image, a sandbox) and ``NUMBA_CACHE_DIR`` is unset, the cache
goes to ``$XDG_CACHE_HOME/caffepy/numba`` (``~/.cache``), else to ``<tmp>/caffepy-numba-<uid>``
(:func:`cache_dir_fallback`): numba itself would refuse to compile a cached kernel there.

Threads: numba's pool uses ``NUMBA_NUM_THREADS`` (default: all cores), else ``OMP_NUM_THREADS``
where the user set it (numba's OpenMP layer would otherwise hand its count to oneDNN's
primitives too), or :func:`set_threads`.
Its OpenMP threads sleep between kernels (``OMP_WAIT_POLICY=PASSIVE`` unless the environment
says otherwise): spinning threads would compete with the BLAS threads of the GEMM that follows.
"""
import contextlib
import os
import threading

def env_on(name):
    """Whether the environment variable ``name`` leaves a switch on: unset, or anything but
    ``0`` / ``false`` / ``no`` / ``off``."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


class Switch:
    """An optional accelerator that is loaded on first use: ``get()`` returns what ``load()``
    returned (None: not installed), or None while it is switched off by the environment variable
    ``env`` (``0`` / ``false`` / ``no`` / ``off``), by ``set_enabled(False)`` or inside
    ``with disabled():``. ``set_enabled(None)`` goes back to the environment."""

    def __init__(self, env, load):
        self.env, self.load = env, load
        self.value, self.tried, self.enabled = None, False, None
        self._lock = threading.Lock()

    def get(self):
        enabled = self.enabled
        if enabled is None:
            enabled = self.enabled = env_on(self.env)
        if not enabled:
            return None
        if not self.tried:      # one thread loads; the others wait for what it loaded (not
            with self._lock:    # None meanwhile: two workers would run different code paths)
                if not self.tried:
                    try:
                        self.value = self.load()
                    finally:
                        self.tried = True
        return self.value

    def available(self):
        return self.get() is not None

    def set_enabled(self, flag):
        self.enabled = None if flag is None else bool(flag)

    @contextlib.contextmanager
    def disabled(self):
        old = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = old


def _writable(path):
    """Whether files can be made in ``path`` (created if missing)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def cache_dir_fallback(module_dir=None, environ=None):
    """The folder numba should cache the kernels in when the one next to them
    (``caffepy/math/__pycache__``) is not writable, or None when it is (or the user chose one
    with ``NUMBA_CACHE_DIR``): ``$XDG_CACHE_HOME/caffepy/numba`` (``~/.cache/...``) if writable,
    else ``<tmp>/caffepy-numba-<uid>``."""
    import tempfile
    environ = os.environ if environ is None else environ
    if environ.get("NUMBA_CACHE_DIR"):
        return None
    module_dir = module_dir or os.path.dirname(os.path.abspath(__file__))
    pycache = os.path.join(module_dir, "__pycache__")
    if os.access(pycache if os.path.isdir(pycache) else module_dir, os.W_OK | os.X_OK):
        return None
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for path in (os.path.join(xdg, "caffepy", "numba"),
                 os.path.join(tempfile.gettempdir(), "caffepy-numba-%d" % os.getuid())):
        if _writable(path):
            return path
    return None


def _load():
    # numba's OpenMP pool would otherwise spin after each kernel, on the cores that the
    # BLAS threads of the next GEMM need (measured: LeNet / CIFAR10-quick steps 2x slower)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import numba
    except ImportError:
        return None
    fallback = cache_dir_fallback()
    if fallback is not None:            # read before the kernels' modules are imported
        numba.config.CACHE_DIR = fallback
    try:
        from . import _numba_kernels
    except ImportError:
        return None
    _follow_omp_num_threads()
    return _numba_kernels


def _follow_omp_num_threads():
    """numba's OpenMP layer sets the calling thread's OpenMP count to its own pool's (all cores)
    at each kernel, and oneDNN's primitives run from that thread then take it: a user's
    ``OMP_NUM_THREADS`` (without ``NUMBA_NUM_THREADS``) becomes numba's count too."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if not value.isdigit() or int(value) < 1 or os.environ.get("NUMBA_NUM_THREADS"):
        return
    import numba
    numba.set_num_threads(max(1, min(int(value), numba.config.NUMBA_NUM_THREADS)))
    try:                    # loading numba's layer set this thread's OpenMP count to its pool's
        import ctypes
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(int(value))
    except OSError:
        pass


_switch = Switch("CAFFEPY_NUMBA", _load)
get = _switch.get                   # the compiled-kernel module, or None
available = _switch.available
set_enabled = _switch.set_enabled   # on (True), off (False), or back to the environment (None)
disabled = _switch.disabled         # ``with disabled():`` runs a block on the pure-numpy path


def set_threads(n):
    """numba's thread count for the kernels (no-op without numba)."""
    if get() is not None:
        import numba
        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))


def threads():
    """numba's thread count for the kernels (1 without numba)."""
    if get() is None:
        return 1
    import numba
    return numba.get_num_threads()


def contiguous(*arrays):
    """True when every array is C-contiguous (the kernels index raw memory in C order)."""
    return all(a.flags.c_contiguous for a in arrays)


def flat_views(*arrays, dtypes=("float32", "float64")):
    """Flat views of ``arrays`` for a kernel that indexes them element by element: when the
    kernels are on and the arrays are C-contiguous and all of one dtype among ``dtypes``; else
    None (the caller's numpy path)."""
    if get() is None or not contiguous(*arrays):
        return None
    dtype = arrays[0].dtype
    if dtype.name not in dtypes or any(a.dtype != dtype for a in arrays):
        return None
    return [a.reshape(-1) for a in arrays]
