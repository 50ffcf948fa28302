"""The net a solver file names, for the commands that look at one net (``summary``, ``draw``).

Caffe's solver files carry their nets in one of four ways (SolverParameter, caffe.proto):
``net_param`` / ``train_net_param`` / ``test_net_param`` (the net written inside the solver, as in
BVLC's ``examples/mnist/lenet_consolidated_solver.prototxt``) or ``net`` / ``train_net`` /
``test_net`` (a path). Given such a file, ``caffepy summary`` and ``caffepy draw`` show the net the
solver would build for the phase asked for, in the state it would build it with:

* TEST: ``test_net_param[0]``, else ``test_net[0]``, else the generic ``net_param`` / ``net``; the
  state is ``test_state[0]`` when given (its stages select the layers, as Solver::InitTestNets does);
* TRAIN: ``train_net_param``, ``train_net``, else the generic net; the state is ``train_state``.

A solver file is recognised by its top-level field names: one of SolverParameter's fields that
NetParameter lacks, and no ``layer`` / ``layers`` block (:func:`is_solver_text`). Net paths are read
as Caffe reads them, from the working directory; a path that does not exist there is looked up
under the solver file's directory and its parents (files written for ``caffe train`` run from a
repository's top directory), and a path found nowhere is a one-line error naming both.
"""
import os

from ..errors import ProtoError
from . import caffe_pb2

_NET_FIELDS = frozenset(f.name for f in caffe_pb2.NetParameter.DESCRIPTOR.fields)
SOLVER_ONLY = frozenset(f.name for f in caffe_pb2.SolverParameter.DESCRIPTOR.fields) - _NET_FIELDS
PARENTS = 4     # how many directories above the solver file a relative net path is looked for


def top_level_keys(text):
    """The field names written at the outermost level of protobuf text (comments and strings
    skipped, nested ``{ }`` / ``< >`` blocks not entered)."""
    keys, depth, i, n = set(), 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif c in "{<":
            depth, i = depth + 1, i + 1
        elif c in "}>":
            depth, i = max(depth - 1, 0), i + 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if depth == 0:
                keys.add(text[i:j])
            i = j
        else:
            i += 1
    return keys


def is_solver_text(text):
    """Whether protobuf text is a SolverParameter rather than a NetParameter."""
    keys = top_level_keys(text)
    return bool(keys & SOLVER_ONLY) and not keys & {"layer", "layers"}


def is_solver_file(path):
    """Whether ``path`` is a text solver file (False for binary files and unreadable ones)."""
    from .io import looks_binary
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if looks_binary(data):
        return False
    return is_solver_text(data.decode("utf-8", errors="replace"))


def _resolve(path, solver_path):
    if os.path.exists(path) or os.path.isabs(path):
        return path
    base = os.path.dirname(os.path.abspath(solver_path))
    for _ in range(PARENTS + 1):
        candidate = os.path.join(base, path)
        if os.path.exists(candidate):
            return candidate
        parent = os.path.dirname(base)
        if parent == base:
            break
        base = parent
    raise ProtoError("%s: the solver's net file '%s' exists neither in the working directory nor "
                     "under the solver's directory or its parents" % (solver_path, path))


def solver_net(solver_path, phase=caffe_pb2.TEST):
    """``(NetParameter, source, what)`` of the net the solver at ``solver_path`` builds for
    ``phase``: the net with the solver's state for that phase in its ``state``, the file its layers
    are written in (for line numbers), and one line saying which net was taken."""
    from .io import read_net, read_solver
    sp = read_solver(solver_path)
    train = phase == caffe_pb2.TRAIN
    if train:
        order = (("train_net_param", False), ("train_net", False), ("net_param", False), ("net", False))
    else:
        order = (("test_net_param", True), ("test_net", True), ("net_param", False), ("net", False))
    for field, repeated in order:
        value = getattr(sp, field)
        if repeated and not len(value):
            continue
        if not repeated and not sp.HasField(field):
            continue
        value = value[0] if repeated else value
        what = field + ("[0]" if repeated else "")
        if isinstance(value, str):
            source = _resolve(value, solver_path)
            net = read_net(source)
            what += " '%s'" % value
        else:
            source = solver_path
            net = read_net(value)
        break
    else:
        raise ProtoError("%s: a solver file that names no net (none of net, net_param, %s_net, "
                         "%s_net_param)" % (solver_path, "train" if train else "test",
                                            "train" if train else "test"))
    state = caffe_pb2.NetState()
    state.CopyFrom(net.state)
    given = sp.train_state if train else (sp.test_state[0] if len(sp.test_state) else None)
    if given is not None:
        state.MergeFrom(given)
    state.phase = phase
    net.state.CopyFrom(state)
    stages = ", stage %s" % "/".join(state.stage) if len(state.stage) else ""
    return net, source, "%s is a solver file: showing its %s net, %s%s" % (
        solver_path, "TRAIN" if train else "TEST", what, stages)
