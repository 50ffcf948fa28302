"""Process-wide state, as Caffe's ``Caffe`` singleton: compute mode, device, random generator.

``set_mode_cpu()`` / ``set_mode_gpu()`` pick where layers run; ``set_random_seed(seed)`` makes
fillers, Dropout and data shuffling reproducible. The generator is numpy's PCG64 (bit streams differ
from Caffe's Boost mt19937, distributions do not).

GPU activation is a hook (:func:`set_gpu_activator`): the CPU core (blobs, layers) calls
:func:`activate_gpu` and never imports the GPU package; ``caffepy/__init__`` installs the activator
that imports ``caffepy.gpu`` on first use. :func:`thread_pool` keeps the process's worker
thread pools.
"""
import os
import sys
import threading

import numpy as np

CPU, GPU = "CPU", "GPU"


class _State(threading.local):
    def __init__(self):
        self.mode = CPU
        self.device_id = 0
        self.rng = np.random.default_rng()
        self.seed = None
        self.solver_rank = 0
        self.solver_count = 1


_state = _State()
_pools = {}
_pools_lock = threading.Lock()
if hasattr(os, "register_at_fork"):       # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_pools.clear)


def thread_pool(name, workers, initializer=None):
    """The process's ``ThreadPoolExecutor`` of ``workers`` threads named ``name``, made on first
    use (``initializer`` runs in each of its threads); a forked child makes its own."""
    with _pools_lock:
        pool = _pools.get((name, workers))
        if pool is None:
            import concurrent.futures
            pool = _pools[name, workers] = concurrent.futures.ThreadPoolExecutor(
                workers, thread_name_prefix=name, initializer=initializer)
        return pool


def mode():
    return _state.mode


def set_mode_cpu():
    _state.mode = CPU


def set_mode_gpu():
    _state.mode = GPU


def set_device(device_id):
    _state.device_id = int(device_id)


def device_id():
    return _state.device_id


def set_random_seed(seed):
    """Seed the generator used by fillers, Dropout and shuffling (Caffe's ``random_seed``)."""
    _state.seed = int(seed)
    _state.rng = np.random.default_rng(int(seed))


def rng():
    """The current thread's random generator (a ``numpy.random.Generator``)."""
    return _state.rng


_gpu_activator = [None]


def release_gpu_thread():
    """Call before a thread that ran in GPU mode ends: pops the device context the thread pushed
    (pycuda aborts the process when a thread exits with a context on its stack). A no-op where
    the GPU package was never imported."""
    gpu = sys.modules.get("caffepy.gpu")
    if gpu is not None:
        gpu.release_thread()


def set_gpu_activator(activate):
    """Install ``activate(device_id)``, which makes GPU mode usable on a device (caffepy.gpu)."""
    _gpu_activator[0] = activate


def activate_gpu(device_id=None):
    """Make GPU mode usable on ``device_id`` (default: :func:`device_id`); True when it is.
    Raises the activator's one-line error when pycuda or a device is missing."""
    if _gpu_activator[0] is None:
        from .errors import CaffeError
        raise CaffeError("GPU mode is not available in this build of caffepy")
    return _gpu_activator[0](device_id)
