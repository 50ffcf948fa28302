"""Thread count of inference mode's forward passes (caffepy.infer.plan): the limit, or one thread.

The GEMMs (OpenBLAS) and the numba kernels split every layer statically over their threads and
wait for the slowest: on a machine whose cores are busy with other processes, a thread that is
not scheduled stalls each of the ~100-200 parallel regions of a forward pass, and two threads
can take several times longer than one (measured on the shared 2-core VM: SqueezeNet b1 1.36 s
with 2 threads vs 75 ms with 1 at load 15). So, as OpenMP's ``OMP_DYNAMIC`` does, a forward pass
may run on fewer threads than the limit. :class:`ThreadChoice` times the passes run with three
settings, (BLAS threads, numba threads) = (limit, limit), (limit, 1) and (1, 1), and for a batch
of several images a fourth, the batch split into ``limit`` parts that run at once on one thread
each (caffepy.infer.shards), keeps a moving average of each and runs the fastest, trying the
others in turn every ``EXPLORE``-th pass so that it follows a change of load. (limit, 1) exists
because OpenBLAS's threads spin for a while after each GEMM and then compete with numba's
threads for the same cores. It never uses more threads than the limit, which is the BLAS
library's (``threadpoolctl.threadpool_limits`` or ``OPENBLAS_NUM_THREADS``) and numba's
(``numba.set_num_threads``). ``CAFFEPY_THREADS=fixed`` in the environment (or
``Net.optimize(threads="fixed")``) always uses the limits.
"""
import os
import time

from ..math import kernels

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


def limit():
    """The thread limit of inference mode: the loaded BLAS libraries' (``OMP_NUM_THREADS`` /
    ``OPENBLAS_NUM_THREADS``, ``threadpoolctl.threadpool_limits``, else the cores), at least 1.
    The onnxruntime engine gives its sessions this many intra-op threads, the openvino engine
    its compiled models this many inference threads."""
    return max([lib.get_num_threads() or 1 for lib in _Blas.get()] + [1])


def _numba():
    if kernels.get() is None:
        return None
    import numba
    return numba


def _set(libs, n, numba_n):
    for lib in libs:
        lib.set_num_threads(n)
    nb = _numba()
    if nb is not None and nb.get_num_threads() != numba_n:
        nb.set_num_threads(numba_n)


class ThreadChoice(object):
    """Runs a forward pass with the (BLAS threads, numba threads, batch parts) setting that has
    been fastest lately."""

    def __init__(self, mode=None):
        mode = mode or os.environ.get("CAFFEPY_THREADS", "auto")
        if mode not in ("auto", "fixed"):
            raise ValueError("threads must be 'auto' or 'fixed', got %r" % (mode,))
        self.mode = mode
        self.avg = {}            # (BLAS threads, numba threads, parts) -> moving average of s
        self.passes = 0
        self.explored = 0
        self.last = None         # the setting of the last pass

    def pick(self, limit, numba_limit, parts=False):
        """The (BLAS threads, numba threads, parts) of the next pass under these limits;
        ``parts``: whether the pass may be split over the batch (then (1, 1, limit) is one of
        the settings)."""
        full = (limit, numba_limit, 1)
        if self.mode == "fixed" or max(full) <= 1:
            return full
        self.passes += 1
        if self.passes == 1:
            return full                      # the first pass pays first-touch costs: untimed
        options = sorted({full, (limit, 1, 1), (1, 1, 1)}
                         | ({(1, 1, limit)} if parts and limit > 1 else set()), reverse=True)
        for o in options:
            if o not in self.avg:
                return o
        ranked = sorted(options, key=self.avg.get)
        if self.passes % EXPLORE:
            return ranked[0]
        self.explored += 1
        return ranked[1 + (self.explored - 1) % (len(ranked) - 1)]

    def run(self, fn, split=None):
        """``fn()`` under the chosen thread setting; ``split(t)``: the pass split into t parts
        of the batch as a function, or None when the batch cannot be split (``split`` None:
        never split)."""
        libs = _Blas.get()
        blas = limit()
        nb = _numba()
        numba_limit = nb.get_num_threads() if nb is not None else 1
        full = (blas, numba_limit, 1)
        parted = split(blas) if split is not None and blas > 1 else None
        n = self.pick(blas, numba_limit, parted is not None)
        if n != full:
            _set(libs, n[0], n[1])
        start = time.perf_counter()
        try:
            return fn() if n[2] == 1 else parted()
        finally:
            took = time.perf_counter() - start
            if n != full:
                _set(libs, blas, numba_limit)
            if self.mode == "auto" and self.passes > 1 and max(full) > 1:
                old = self.avg.get(n)
                self.avg[n] = took if old is None else ALPHA * took + (1 - ALPHA) * old
            self.last = n
