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


def quiet_idle_threads():
    """Make numpy's OpenBLAS put its idle threads to sleep at once; returns the libraries changed.

    A pthreads build of OpenBLAS (numpy's wheels) keeps each idle thread spinning for
    2^``OPENBLAS_THREAD_TIMEOUT`` cycles (28 unless set: about 0.1 s) after every GEMM, on the
    cores that the numba and oneDNN kernels between the GEMMs need (measured: CIFAR10-quick
    training steps at 2 threads 1.7x slower). OpenBLAS reads the variable when it starts its
    threads; ``import caffepy`` sets it to 4 when unset, which is enough when numpy is imported
    afterwards. When numpy came first (``import numpy`` before ``import caffe`` in a pycaffe
    script) OpenBLAS has started its threads already, so this re-reads the environment and stops
    them (``openblas_read_env``, ``blas_thread_shutdown_``: the steps OpenBLAS takes after a
    fork); the next GEMM starts them again with the short timeout. Run at import, before any
    caffepy thread exists. Other BLAS libraries, OpenMP builds of OpenBLAS and builds without
    those entry points are left alone, as is a timeout the user set."""
    if os.environ.get(TIMEOUT_VAR, QUIET_TIMEOUT) != QUIET_TIMEOUT:
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
        os.environ[TIMEOUT_VAR] = QUIET_TIMEOUT
        read_env()
        shutdown()
        changed.append(c.filepath)
    return changed
