"""Multi-threaded CPU kernels for the non-GEMM work (numba, optional), with a numpy fallback.

numpy runs every element-wise pass, strided copy and reduction on one core; the GEMMs already
thread through BLAS. The kernels in :mod:`caffepy.math._numba_kernels` (im2col / col2im in the
'last' layout, the GEMM result -> image copy fused with the bias add and an optional ReLU, direct
depthwise convolution, max / average pooling, ReLU, per-channel affine, softmax) split their outer
loop over cores with ``numba.prange``.

numba is an optional dependency (``pip install caffepy[fast]``) imported on first use. Layers ask
:func:`get` for the kernel module and keep their numpy code when it returns None: numba is not
installed, or it is switched off by ``CAFFEPY_NUMBA=0`` in the environment or by
:func:`set_enabled` (``with kernels.disabled(): ...`` in tests). Kernels are compiled on first
call, once per dtype, and cached on disk next to the module (numba's ``cache=True``), so a process
pays the compile time only the first time a machine runs them.

Threads: numba's pool uses ``NUMBA_NUM_THREADS`` (default: all cores) or :func:`set_threads`.
Its OpenMP threads sleep between kernels (``OMP_WAIT_POLICY=PASSIVE`` unless the environment
says otherwise): spinning threads would compete with the BLAS threads of the GEMM that follows.
"""
import contextlib
import os

_state = {"module": None, "tried": False, "enabled": None}


def _env_enabled():
    return os.environ.get("CAFFEPY_NUMBA", "1").strip().lower() not in ("0", "false", "no", "off")


def get():
    """The compiled-kernel module, or None (numba missing or switched off)."""
    enabled = _state["enabled"]
    if enabled is None:
        enabled = _state["enabled"] = _env_enabled()
    if not enabled:
        return None
    if not _state["tried"]:
        _state["tried"] = True
        # numba's OpenMP pool would otherwise spin after each kernel, on the cores that the
        # BLAS threads of the next GEMM need (measured: LeNet / CIFAR10-quick steps 2x slower)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from . import _numba_kernels
            _state["module"] = _numba_kernels
        except ImportError:
            _state["module"] = None
    return _state["module"]


def available():
    return get() is not None


def set_enabled(flag):
    """Switch the numba kernels on (True), off (False), or back to the environment (None)."""
    _state["enabled"] = None if flag is None else bool(flag)


@contextlib.contextmanager
def disabled():
    """Run a block on the pure-numpy path."""
    old = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = old


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
