"""Solver field overrides for ``caffepy train``: ``--max_iter 200 --test_interval 50
--snapshot_prefix runs/quick --base_lr=0.001`` (gflags spellings too: ``-max_iter=200``).

Every scalar field of SolverParameter (numbers, strings, bools, enums by name or number) gets a
flag of its own name, unless the command already has a flag of that name (``--snapshot`` is
Caffe's resume flag, so the snapshot interval is not overridable; ``--weights`` and ``--solver``
keep their meaning). The values replace the solver file's, are logged as one ``Override:`` line
each, and the result is validated as a solver file is (:func:`caffepy.solvers.params.validate`).
"""
import argparse

from google.protobuf import descriptor

from ..errors import SolverError
from ..proto import caffe_pb2, field_label

_DEST = "solver_override_"
_T = descriptor.FieldDescriptor
_LEGACY = frozenset(["solver_type"])      # upgraded away when the file is read


def _scalar_fields(parser):
    taken = {a.dest for a in parser._actions}
    for f in caffe_pb2.SolverParameter.DESCRIPTOR.fields:
        if field_label(f) == "repeated" or f.type == _T.TYPE_MESSAGE or f.name in _LEGACY:
            continue
        if f.name in taken:
            continue
        yield f


def _converter(field):
    def convert(text):
        if field.type == _T.TYPE_BOOL:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise argparse.ArgumentTypeError("expected true or false, got '%s'" % text)
        if field.type == _T.TYPE_ENUM:
            from ..proto.harvest_policy import table
            forks_only = table()       # values the schema declares only because forks define them
            names = [v.name for v in field.enum_type.values
                     if "%s.%s=%s" % (field.containing_type.name, field.name, v.name) not in forks_only]
            if text in names:
                return field.enum_type.values_by_name[text].number
            if text.lstrip("-").isdigit() and int(text) in field.enum_type.values_by_number:
                return int(text)
            raise argparse.ArgumentTypeError("expected one of %s, got '%s'"
                                             % (", ".join(names), text))
        if field.cpp_type in (_T.CPPTYPE_FLOAT, _T.CPPTYPE_DOUBLE):
            return float(text)
        if field.cpp_type in (_T.CPPTYPE_INT32, _T.CPPTYPE_INT64, _T.CPPTYPE_UINT32,
                              _T.CPPTYPE_UINT64):
            return int(text)
        return text
    convert.__name__ = field.name          # argparse names the field in its error message
    return convert


def add_arguments(parser):
    group = parser.add_argument_group(
        "solver overrides", "--FIELD VALUE (or --FIELD=VALUE) replaces any scalar "
        "SolverParameter field of the solver file for this run, e.g. --max_iter 200 "
        "--test_interval 50 --snapshot_prefix runs/quick --base_lr 0.001 (not --snapshot, the "
        "resume flag); each override is logged")
    for f in _scalar_fields(parser):
        group.add_argument("--" + f.name, dest=_DEST + f.name, type=_converter(f), default=None,
                           metavar=f.name.upper(), help=argparse.SUPPRESS)


def apply(args, param, solver_file, log_line):
    """Set every override given in ``args`` on ``param``; ``log_line(text)`` logs each; returns
    the names set. snapshot_prefix follows the solver file's rule (a directory: its stem in it)."""
    from ..solvers import params as solver_params
    names = []
    for f in caffe_pb2.SolverParameter.DESCRIPTOR.fields:
        value = getattr(args, _DEST + f.name, None)
        if value is None:
            continue
        before = _show(f, getattr(param, f.name)) if param.HasField(f.name) else "unset"
        setattr(param, f.name, value)
        if f.name == "snapshot_prefix":
            solver_params._upgrade_snapshot_prefix(param, solver_file)
        log_line("Override: %s = %s (solver file: %s)"
                 % (f.name, _show(f, getattr(param, f.name)), before))
        names.append(f.name)
    if names:
        try:
            solver_params.validate(param, solver_file)
        except SolverError as e:
            raise SolverError("%s (after the overrides %s)" % (e, ", ".join("--" + n for n in names)))
    return names


def _show(field, value):
    if field.type == _T.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type == _T.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == _T.TYPE_STRING:
        return '"%s"' % value
    return "%g" % value if isinstance(value, float) else str(value)
