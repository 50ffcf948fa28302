"""caffepy: a Caffe-compatible deep-learning framework in Python.

``import caffepy as caffe`` gives the pycaffe surface: ``Net``, ``TRAIN`` / ``TEST``, solvers,
``set_mode_cpu`` / ``set_mode_gpu``, ``layers`` / ``params`` / ``NetSpec``, ``io``, ``draw``;
``register_layer`` and ``LayerBase`` for plug-in layers (see caffepy.layers.plugins).
Heavy optional pieces (solvers, data, draw) are imported lazily on first attribute access;
inference mode (caffepy.infer) when a net first enters it (the hook in caffepy.net).
"""
import importlib as _importlib
import os as _os

import sys as _sys

# OpenBLAS's idle threads spin for 2^28 cycles (about 0.1 s) after every GEMM, on the cores that
# the numba kernels between the GEMMs need (measured: CIFAR10-quick 2-thread steps 2x slower);
# 2^4 lets them sleep at once. Set here (a timeout the user set stays); nets and solvers choose
# between the two later (caffepy.math.blas.use_regime).
from .math import blas as _blas  # noqa: E402
_blas.settle_at_import()

__version__ = "0.1.0"

from . import _aliases  # noqa: E402
from . import common as _common  # noqa: E402

if not any(isinstance(f, _aliases.AliasFinder) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _aliases.AliasFinder())     # old module paths (caffepy.contrib ...)


def _activate_gpu(device_id=None):
    """caffepy.common's GPU hook: imports the GPU package only when GPU mode is first used."""
    return _importlib.import_module("caffepy.gpu").activate(device_id)


_common.set_gpu_activator(_activate_gpu)

from .common import set_mode_cpu, set_mode_gpu, set_device, set_random_seed  # noqa: F401,E402
from .proto.caffe_pb2 import TRAIN, TEST  # noqa: F401,E402
from .layers.base import layer_type_list  # noqa: F401,E402
from .layers.python_layer import Layer  # noqa: F401,E402  (base class of Python layers)
# plug-in layers: ``@caffepy.register_layer("MyType") class MyLayer(caffepy.LayerBase)``
from .layers.base import Layer as LayerBase  # noqa: F401,E402
from .layers.plugins import register_layer  # noqa: F401,E402
from .net import Net  # noqa: F401,E402
from . import net as _net  # noqa: E402


def _optimize(net, keep=(), threads=None, engine=None):
    """caffepy.net's inference-mode hook: imports caffepy.infer (which installs its own front
    door in its place) on first use."""
    return _importlib.import_module("caffepy.infer").optimize(net, keep, threads, engine)


_net.set_optimizer(_optimize)
from .blob import Blob  # noqa: F401,E402
# ``caffepy.layers`` is pycaffe's DSL object (``L.Convolution(...)``); it still resolves the layer
# package's modules (``caffepy.layers.base`` ...), so both uses of the name keep working.
from .netspec import NetSpec, layers, params, to_proto  # noqa: F401,E402

# name -> (module, attribute or None for the module itself); resolved on first use.
_LAZY = {
    "get_solver": ("caffepy.solvers", "get_solver"),
    "SGDSolver": ("caffepy.solvers", "SGDSolver"),
    "NesterovSolver": ("caffepy.solvers", "NesterovSolver"),
    "AdaGradSolver": ("caffepy.solvers", "AdaGradSolver"),
    "RMSPropSolver": ("caffepy.solvers", "RMSPropSolver"),
    "AdaDeltaSolver": ("caffepy.solvers", "AdaDeltaSolver"),
    "AdamSolver": ("caffepy.solvers", "AdamSolver"),
    "io": ("caffepy.io", None),
    "draw": ("caffepy.draw", None),
    "proto": ("caffepy.proto", None),
    "Classifier": ("caffepy.pycaffe.classifier", "Classifier"),
    "Detector": ("caffepy.pycaffe.detector", "Detector"),
    "coord_map": ("caffepy.pycaffe.coord_map", None),
    "classifier": ("caffepy.pycaffe.classifier", None),
    "detector": ("caffepy.pycaffe.detector", None),
    "net_spec": ("caffepy.netspec", None),
    "pycaffe": ("caffepy.pycaffe", None),
    "Timer": ("caffepy.pycaffe", "Timer"),
    "init_log": ("caffepy.pycaffe", "init_log"),
    "get_solver_from_file": ("caffepy.solvers", "get_solver"),
    "solver_count": ("caffepy.pycaffe", "solver_count"),
    "set_solver_count": ("caffepy.pycaffe", "set_solver_count"),
    "solver_rank": ("caffepy.pycaffe", "solver_rank"),
    "set_solver_rank": ("caffepy.pycaffe", "set_solver_rank"),
    "set_multiprocess": ("caffepy.pycaffe", "set_multiprocess"),
    "has_nccl": ("caffepy.pycaffe", "has_nccl"),
    "NCCL": ("caffepy.pycaffe", "NCCL"),
    "get_solver_from_string": ("caffepy.solvers", "get_solver_from_string"),
    "Solver": ("caffepy.solvers", "Solver"),
    "load_schema": ("caffepy.proto.user_schema", "load_schema"),
}


def __getattr__(name):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError("module 'caffepy' has no attribute '%s'" % name)
    mod = _importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value
