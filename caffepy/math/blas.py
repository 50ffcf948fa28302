"""The BLAS thread budget: how many threads one GEMM may use while other compute threads run.

numpy's BLAS (OpenBLAS, MKL, BLIS) starts one thread per core for each large GEMM. That is right
for one net in one process, but wrong when several nets compute at once: the distributed solver's
in-process engine runs every worker of a process on its own thread, and ``mpiexec -n K`` puts K
ranks on one host. Each GEMM then asks for every core while the others do the same, and OpenBLAS's
spinning threads take turns on too few cores. On 2 cores, 4 in-process LeNet workers ran 2.2x
slower with OpenBLAS's default than with one BLAS thread each.

:func:`budget` is a context manager that sets the process's BLAS pool to
``max(1, cores // compute_threads)`` threads (``compute_threads`` = nets computing at once on this
host) and restores it afterwards. It does nothing when the user chose a thread count through
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``BLIS_NUM_THREADS``, nor
without threadpoolctl (a dependency, but the limit is only an optimisation).
"""
import contextlib
import os

USER_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_active = []        # the limits of the budgets now applied (innermost last)


def cores():
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_gemm(compute_threads, ncores=None):
    """BLAS threads for each of ``compute_threads`` nets computing at once: at least 1."""
    ncores = cores() if ncores is None else ncores
    return max(1, ncores // max(1, int(compute_threads)))


def active_limit():
    """The thread limit of the budget now applied, or None. Kernels with a thread pool of their
    own (oneDNN's OpenMP threads, caffepy.layers.conv_onednn) follow it in each worker thread."""
    return _active[-1] if _active else None


def user_chose():
    return any(os.environ.get(v) for v in USER_VARS)


@contextlib.contextmanager
def budget(compute_threads, ncores=None):
    """Limit numpy's BLAS to :func:`threads_per_gemm` threads inside the block.

    Yields the limit applied, or None when nothing was changed."""
    if compute_threads <= 1 or user_chose():
        yield None
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield None
        return
    n = threads_per_gemm(compute_threads, ncores)
    _active.append(n)
    try:
        with threadpool_limits(limits=n, user_api="blas"):
            yield n
    finally:
        _active.pop()


# -- OpenBLAS's idle threads ---------------------------------------------------------------------
TIMEOUT_VAR = "OPENBLAS_THREAD_TIMEOUT"
QUIET_TIMEOUT = "4"     # 2^4 cycles of spinning before an idle thread sleeps (OpenBLAS's least)
SPIN_TIMEOUT = "28"     # OpenBLAS's default: about 0.1 s of spinning
_state = {"user": None, "regime": None}


def settle_at_import():
    """Called by ``import caffepy``: the quiet timeout unless the user set one (see
    :func:`use_regime`), in force for an OpenBLAS that starts later, and applied to one that has
    started already (numpy imported first)."""
    import sys
    _state["user"] = os.environ.get(TIMEOUT_VAR)
    if _state["user"] is None:
        os.environ[TIMEOUT_VAR] = QUIET_TIMEOUT
        if "numpy" in sys.modules:
            _restart_openblas()


def use_regime(regime):
    """Set OpenBLAS's idle-thread timeout for ``regime``: "train" (quiet) or "infer" (spin).

    A pthreads build of OpenBLAS (numpy's wheels) keeps each idle thread spinning for
    2^``OPENBLAS_THREAD_TIMEOUT`` cycles after every GEMM. In training, the oneDNN and numba
    kernels between the GEMMs need those cores (CIFAR10-quick and LeNet steps at 2 threads,
    measured: 1.7-2x slower spinning than quiet); a forward pass of one image on the exact path
    runs GEMM after GEMM, where sleeping threads cost their wake-up each time (SqueezeNet and
    GoogLeNet at batch 1, 2 threads: 1.2-1.4x slower quiet than spinning). caffepy builds a
    TRAIN net or a solver under "train", a TEST net under "infer"; "train" stays once set (a
    solver's test nets do not undo it). The timeout is read when OpenBLAS starts its threads, so
    a change stops them (``openblas_read_env`` + ``blas_thread_shutdown_``, the steps OpenBLAS
    takes after a fork) and the next GEMM starts them again. That is only done while this
    process runs one Python thread (stopping OpenBLAS's threads during another thread's GEMM
    would hang it); otherwise, and for a timeout the user set, other BLAS libraries and OpenMP
    builds of OpenBLAS, nothing changes. Returns the libraries restarted."""
    import threading
    if _state["user"] is not None or _state["regime"] == "train" or regime == _state["regime"] \
            or threading.active_count() != 1:
        return []
    want = QUIET_TIMEOUT if regime == "train" else SPIN_TIMEOUT
    _state["regime"] = regime
    if os.environ.get(TIMEOUT_VAR) == want:
        return []
    os.environ[TIMEOUT_VAR] = want
    return _restart_openblas()


def _restart_openblas():
    """Stop the threads of each loaded pthreads OpenBLAS after re-reading the environment (they
    start again at the next GEMM); the libraries restarted (none while other threads run)."""
    import threading
    if threading.active_count() != 1:
        return []
    try:
        import ctypes
        from threadpoolctl import ThreadpoolController
        libs = [c for c in ThreadpoolController().lib_controllers
                if c.internal_api == "openblas" and getattr(c, "threading_layer", None) == "pthreads"]
    except Exception:       # threadpoolctl missing or unable to inspect: only an optimisation
        return []
    changed = []
    for c in libs:
        try:
            lib = ctypes.CDLL(c.filepath)
            read_env, shutdown = lib.openblas_read_env, lib.blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        read_env()
        shutdown()
        changed.append(c.filepath)
    return changed
