"""Thread count of inference mode's forward passes (caffepy.optimize): the limit, or one thread.

The GEMMs (OpenBLAS) and the numba kernels split every layer statically over their threads and
wait for the slowest: on a machine whose cores are busy with other processes, a thread that is
not scheduled stalls each of the ~100-200 parallel regions of a forward pass, and two threads
can take several times longer than one (measured on the shared 2-core VM: SqueezeNet b1 1.36 s
with 2 threads vs 75 ms with 1 at load 15). So, as OpenMP's ``OMP_DYNAMIC`` does, a forward pass
may run on fewer threads than the limit: :class:`ThreadChoice` times the passes run with the
limit and with one thread (a moving average of each) and runs the faster, trying the other one
every ``EXPLORE``-th pass so that it follows a change of load. It never uses more threads than
the limit, which is the BLAS library's (``threadpoolctl.threadpool_limits`` or
``OPENBLAS_NUM_THREADS``); numba's kernels follow the same count. ``CAFFEPY_THREADS=fixed`` in
the environment (or ``Net.optimize(threads="fixed")``) always uses the limit.
"""
import os
import time

from .math import kernels

EXPLORE = 8          # every EXPLORE-th pass runs the count that is not the faster one
ALPHA = 0.4          # weight of the newest time in the moving average


class _Blas(object):
    """The loaded BLAS libraries' thread controls (threadpoolctl), found once."""
    libs = None

    @classmethod
    def get(cls):
        if cls.libs is None:
            from threadpoolctl import ThreadpoolController
            cls.libs = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        return cls.libs


def _numba():
    if kernels.get() is None:
        return None
    import numba
    return numba


def _set(libs, n, numba_n):
    for lib in libs:
        lib.set_num_threads(n)
    nb = _numba()
    if nb is not None:
        nb.set_num_threads(numba_n)


class ThreadChoice(object):
    """Runs ``fn`` with the thread limit or with one thread, whichever has been faster."""

    def __init__(self, mode=None):
        mode = mode or os.environ.get("CAFFEPY_THREADS", "auto")
        if mode not in ("auto", "fixed"):
            raise ValueError("threads must be 'auto' or 'fixed', got %r" % (mode,))
        self.mode = mode
        self.avg = {}            # thread count -> moving average of seconds per pass
        self.passes = 0
        self.last = None         # the thread count of the last pass

    def pick(self, limit):
        if self.mode == "fixed" or limit <= 1:
            return limit
        self.passes += 1
        if self.passes == 1:
            return limit                     # the first pass pays first-touch costs: untimed
        for n in (limit, 1):
            if n not in self.avg:
                return n
        best, other = sorted((limit, 1), key=self.avg.get)
        return other if self.passes % EXPLORE == 0 else best

    def run(self, fn):
        libs = _Blas.get()
        limit = max([lib.get_num_threads() or 1 for lib in libs] + [1])
        n = self.pick(limit)
        if n != limit:
            nb = _numba()
            numba_n = nb.get_num_threads() if nb is not None else 1
            _set(libs, n, 1)
        start = time.perf_counter()
        try:
            return fn()
        finally:
            took = time.perf_counter() - start
            if n != limit:
                _set(libs, limit, numba_n)
            if self.mode == "auto" and limit > 1 and self.passes > 1:
                old = self.avg.get(n)
                self.avg[n] = took if old is None else ALPHA * took + (1 - ALPHA) * old
            self.last = n
