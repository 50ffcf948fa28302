"""Solvers: the training loop, the update rules, lr policies and solver-state files.

``get_solver(path)`` reads a solver prototxt (validated at load: solver type, lr_policy and its
fields, regularization_type ...) and builds the solver its ``type`` names, as pycaffe's
``caffe.get_solver``; ``get_solver_from_string(text)`` the same from prototxt text. The classes
carry pycaffe's names and interface: ``.net``, ``.test_nets``,
``.iter``, ``.step(n)``, ``.solve(resume=None)``, ``.restore(path)``, ``.snapshot()``,
``.add_callback(on_start, on_gradients_ready)``.
"""
import numpy as np

from .adaptive import AdaDeltaSolver, AdaGradSolver, AdamSolver, RMSPropSolver
from .params import SOLVER_TYPES, load_solver_param
from .sgd import NesterovSolver, SGDSolver
from .solver import Solver

SOLVERS = {cls.type: cls for cls in (SGDSolver, NesterovSolver, AdaGradSolver, RMSPropSolver,
                                     AdaDeltaSolver, AdamSolver)}


def solver_class(type_name):
    from ..errors import SolverError
    try:
        return SOLVERS[type_name]
    except KeyError:
        raise SolverError("unknown solver type '%s'; known types: %s"
                          % (type_name, ", ".join(SOLVER_TYPES)))


def get_solver(source, dtype=np.float32):
    """The solver a solver file (path, prototxt text or SolverParameter) describes."""
    param = load_solver_param(source)
    return solver_class(param.type)(param, dtype=dtype)


def get_solver_from_string(text, dtype=np.float32):
    """The solver that prototxt ``text`` describes (pycaffe's ``get_solver_from_string``); the
    text is never taken for a path. Net paths in it are relative to the current directory."""
    from ..proto import caffe_pb2, io as proto_io
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text(text, param, filename="<solver string>")
    return get_solver(param, dtype=dtype)


__all__ = ["get_solver", "get_solver_from_string", "solver_class", "Solver", "SGDSolver",
           "NesterovSolver", "AdaGradSolver",
           "RMSPropSolver", "AdaDeltaSolver", "AdamSolver", "SOLVERS", "load_solver_param"]
