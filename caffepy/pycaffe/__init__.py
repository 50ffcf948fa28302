"""The rest of pycaffe's surface: Timer, logging, solver rank, and the helper classes.

Module functions (exported from ``caffepy``): :class:`Timer`, :func:`init_log`, :func:`log`,
:func:`solver_count` / :func:`set_solver_count`, :func:`solver_rank` / :func:`set_solver_rank`,
:func:`set_multiprocess`, :func:`has_nccl` (always False: multi-GPU runs use ``caffepy.dist``),
:class:`NCCL` (constructing it raises a one-line "not supported" error).
Modules beside it: ``classifier`` (Classifier), ``detector`` (Detector), ``coord_map``
(pycaffe's coord_map for FCN crops). ``Net``'s pycaffe methods are in
:mod:`caffepy.net.pycaffe_net`.
"""
import importlib
import time

from .. import common


class Timer(object):
    """Caffe's Timer: ``start()``, ``stop()``, ``ms`` (elapsed milliseconds of the last start/stop)."""

    def __init__(self):
        self._start = None
        self._elapsed = 0.0
        self.running = False

    def start(self):
        self._start = time.perf_counter()
        self.running = True

    def stop(self):
        if self.running:
            self._elapsed = time.perf_counter() - self._start
            self.running = False

    def _seconds(self):
        if self.running:
            return time.perf_counter() - self._start
        return self._elapsed

    ms = property(lambda self: self._seconds() * 1e3)
    us = property(lambda self: self._seconds() * 1e6)
    seconds = property(_seconds)


def init_log(level=None, std_err=True):
    """Send caffepy's glog-format log to stderr; ``level`` is glog's minloglevel (0 INFO ...)."""
    import sys
    _log = importlib.import_module("caffepy.log")
    _log.setup(stream=sys.stderr, minloglevel=level)


def log(message):
    """One INFO line in caffepy's log (pycaffe's ``caffe.log``; here ``caffepy.pycaffe.log``, as
    ``caffepy.log`` is the logging module)."""
    importlib.import_module("caffepy.log").info("pycaffe", str(message))


def solver_count():
    return common._state.solver_count


def set_solver_count(count):
    common._state.solver_count = int(count)


def solver_rank():
    return common._state.solver_rank


def set_solver_rank(rank):
    common._state.solver_rank = int(rank)


def set_multiprocess(multiprocess):
    common._state.multiprocess = bool(multiprocess)


def has_nccl():
    """pycaffe's ``has_nccl``: caffepy has no NCCL binding (use ``caffepy.dist``)."""
    return False


_NO_NCCL = ("NCCL is not supported by caffepy (CPU or one GPU per process); train on several "
            "GPUs with `caffepy train --gpu 0,1` or a cluster file (caffepy.dist)")


class NCCL(object):
    """pycaffe's ``caffe.NCCL(solver, uid)``: present so scripts import; constructing it (or
    ``NCCL.new_uid()``) raises a one-line CaffeError, as ``has_nccl()`` is False."""

    def __init__(self, solver=None, uid=None):
        from ..errors import CaffeError
        raise CaffeError(_NO_NCCL)

    @staticmethod
    def new_uid():
        from ..errors import CaffeError
        raise CaffeError(_NO_NCCL)
