"""Loading and validating a SolverParameter, so every mistake fails when the file is read.

Checked at load: the solver ``type`` (one of :data:`SOLVER_TYPES`), the ``lr_policy`` and the fields
it needs (:mod:`lr_policies`), ``regularization_type`` (L1 / L2), ``average_loss >= 1``,
``iter_size >= 1``, ``display`` / ``snapshot`` / ``test_interval`` / ``max_iter`` non-negative.
``snapshot_prefix`` follows Caffe's ``UpgradeSnapshotPrefixProperty``: unset, it is the solver
file's path without extension; a directory, the solver file's stem inside it.
"""
import os

from ..errors import SolverError
from ..proto import caffe_pb2, io as proto_io
from . import lr_policies

SOLVER_TYPES = ("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam")
_LEGACY_TYPES = {0: "SGD", 1: "Nesterov", 2: "AdaGrad", 3: "RMSProp", 4: "AdaDelta", 5: "Adam"}


def _upgrade_solver_type(param, name):
    """Fallback for the legacy ``solver_type`` enum if the upgrade module left it in place."""
    if not param.HasField("solver_type"):
        return
    if param.HasField("type"):
        raise SolverError("%s: old solver_type field (enum) and new type field (string) cannot "
                          "be both specified" % name)
    param.type = _LEGACY_TYPES[param.solver_type]
    param.ClearField("solver_type")


def _upgrade_snapshot_prefix(param, path):
    if not param.HasField("snapshot_prefix"):
        param.snapshot_prefix = os.path.splitext(path)[0]
    elif os.path.isdir(param.snapshot_prefix):
        stem = os.path.splitext(os.path.basename(path))[0]
        param.snapshot_prefix = os.path.join(param.snapshot_prefix, stem)


def validate(param, name="<solver>"):
    """Raise SolverError naming the solver file if any setting is invalid."""
    try:
        if param.type not in SOLVER_TYPES:
            raise SolverError("unknown solver type '%s'; known types: %s"
                              % (param.type, ", ".join(SOLVER_TYPES)))
        lr_policies.validate(param)
        if param.regularization_type not in ("L1", "L2"):
            raise SolverError("unknown regularization_type '%s' (L1 or L2)" % param.regularization_type)
        if param.average_loss < 1:
            raise SolverError("average_loss should be >= 1 (got %d)" % param.average_loss)
        if param.iter_size < 1:
            raise SolverError("iter_size should be >= 1 (got %d)" % param.iter_size)
        for field in ("display", "snapshot", "test_interval", "max_iter"):
            if getattr(param, field) < 0:
                raise SolverError("%s should be >= 0 (got %d)" % (field, getattr(param, field)))
        for i, n in enumerate(param.test_iter):
            if n < 0:
                raise SolverError("test_iter #%d should be >= 0 (got %d)" % (i, n))
    except SolverError as e:
        raise SolverError("%s: %s" % (name, e))
    return param


def load_solver_param(source):
    """A validated SolverParameter from a path, prototxt text or SolverParameter."""
    if isinstance(source, caffe_pb2.SolverParameter):
        param = caffe_pb2.SolverParameter()
        param.CopyFrom(source)
        name = "<SolverParameter>"
    else:
        source = os.fspath(source)
        param = proto_io.read_solver(source)
        name = source if os.path.exists(source) else "<string>"
        if os.path.exists(source):
            _upgrade_snapshot_prefix(param, source)
    _upgrade_solver_type(param, name)
    return validate(param, name)
