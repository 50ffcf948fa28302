"""Process-wide state, as Caffe's ``Caffe`` singleton: compute mode, device, random generator.

``set_mode_cpu()`` / ``set_mode_gpu()`` pick where layers run; ``set_random_seed(seed)`` makes
fillers, Dropout and data shuffling reproducible. The generator is numpy's PCG64 (bit streams differ
from Caffe's Boost mt19937, distributions do not).
"""
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
