"""``caffe``: pycaffe's import name for caffepy, so pycaffe scripts and Python layers run unchanged.

``import caffe`` gives caffepy's objects under pycaffe's names (``caffe.Net is caffepy.Net``;
attributes are looked up on :mod:`caffepy` on first use). The submodules pycaffe has --
``caffe.proto.caffe_pb2``, ``caffe.io``, ``caffe.draw``, ``caffe.net_spec``, ``caffe.coord_map``,
``caffe.classifier``, ``caffe.detector``, ``caffe.pycaffe`` -- are small files that put caffepy's
module in ``sys.modules`` under the ``caffe.`` name (:func:`caffe._alias.become`), so each is the
same module object as caffepy's: one descriptor pool, every proto file registered once.

This package is found like any other, so a real pycaffe earlier on ``sys.path`` / ``PYTHONPATH``
wins, except in the Python layers caffepy runs: before a layer's module is imported, this package
is put in ``sys.modules`` from caffepy's own directory (unless a ``caffe`` is imported already),
so a fork's pycaffe sources that the module puts on ``sys.path`` do not take its place. ``CAFFEPY_CAFFE_ALIAS=0`` turns the alias off: ``import caffe`` then loads the next ``caffe``
on ``sys.path`` (a real pycaffe installed after caffepy) or fails with ImportError.
"""
import os as _os
import sys as _sys

_OFF = ("0", "false", "no", "off")


def _load_next_caffe():
    """Replace this module with the next ``caffe`` package on sys.path, or raise ImportError."""
    import importlib.machinery
    import importlib.util
    here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    rest = [p for p in _sys.path if _os.path.abspath(p or _os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("caffe", rest)
    if spec is None or spec.loader is None:
        del _sys.modules[__name__]
        raise ImportError("No module named 'caffe' (caffepy's `caffe` alias is turned off by "
                          "CAFFEPY_CAFFE_ALIAS=%s and no other caffe is on sys.path)"
                          % _os.environ.get("CAFFEPY_CAFFE_ALIAS"), name="caffe")
    module = importlib.util.module_from_spec(spec)
    _sys.modules[__name__] = module
    spec.loader.exec_module(module)


if _os.environ.get("CAFFEPY_CAFFE_ALIAS", "1").strip().lower() in _OFF:
    _load_next_caffe()
else:
    import caffepy as _caffepy

    # python/caffe/__init__.py's names (``from caffe import *``)
    __all__ = ["Net", "SGDSolver", "NesterovSolver", "AdaGradSolver", "RMSPropSolver",
               "AdaDeltaSolver", "AdamSolver", "NCCL", "Timer", "init_log", "log", "set_mode_cpu",
               "set_mode_gpu", "set_device", "Layer", "get_solver", "layer_type_list",
               "set_random_seed", "solver_count", "set_solver_count", "solver_rank",
               "set_solver_rank", "set_multiprocess", "has_nccl", "TRAIN", "TEST", "Classifier",
               "Detector", "io", "layers", "params", "NetSpec", "to_proto", "__version__"]

    def __getattr__(name):
        if name.startswith("__") and name != "__version__":
            raise AttributeError(name)
        try:
            value = getattr(_caffepy, name)
        except AttributeError:
            raise AttributeError("module 'caffe' (caffepy) has no attribute '%s'" % name)
        globals()[name] = value
        return value

    def __dir__():
        return sorted(set(globals()) | set(__all__) | set(dir(_caffepy)))
