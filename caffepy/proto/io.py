"""Reading and writing Caffe's protobuf files with precise, one-line errors.

Text (.prototxt, solver files) and binary (.caffemodel, .binaryproto, .solverstate). Every
reader returns messages in the current schema: legacy V0/V1 nets, ``input_dim`` inputs and
``solver_type`` enums are upgraded on load by :mod:`caffepy.proto.upgrade`. Every writer is atomic:
it writes a temporary file in the same directory, fsyncs it and renames it over the target, so a
crash mid-write never leaves a file that looks complete.
"""
import os
import re
import tempfile

from google.protobuf import message as _message
from google.protobuf import text_format

from ..errors import ProtoError
from . import caffe_pb2

_LOC = re.compile(r"^(\d+):(\d+)\s*:\s*(.*)$", re.S)


def parse_text(text, msg, filename="<string>"):
    """Parse protobuf text into ``msg``; errors become ``file:line:column: what is wrong``."""
    try:
        text_format.Parse(text, msg, allow_unknown_extension=False)
    except text_format.ParseError as e:
        m = _LOC.match(str(e))
        if m:
            line, col, what = m.groups()
            raise ProtoError("%s:%s:%s: %s" % (filename, line, col, " ".join(what.split())))
        raise ProtoError("%s: %s" % (filename, " ".join(str(e).split())))
    return msg


def read_text(path, msg):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise ProtoError("%s: cannot read: %s" % (path, e.strerror or e))
    return parse_text(text, msg, filename=path)


def read_binary(path, msg):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ProtoError("%s: cannot read: %s" % (path, e.strerror or e))
    try:
        msg.ParseFromString(data)
    except _message.DecodeError as e:
        raise ProtoError("%s: not a valid binary %s (%s)" % (path, msg.DESCRIPTOR.name, e))
    return msg


def is_binary_file(path):
    """Heuristic: text prototxt is printable; binary protobuf has control bytes early on."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if not head:
        return False
    text_chars = bytes(range(32, 127)) + b"\n\r\t\f\b"
    nontext = sum(1 for b in head if b not in text_chars)
    return nontext > max(1, len(head) // 100)


def read_net(source, upgrade=True):
    """A NetParameter from a path (text or binary), text, or a NetParameter (copied)."""
    from . import upgrade as _upgrade
    if isinstance(source, caffe_pb2.NetParameter):
        net = caffe_pb2.NetParameter()
        net.CopyFrom(source)
        name = "<NetParameter>"
    elif isinstance(source, (bytes, bytearray)):
        net = caffe_pb2.NetParameter()
        net.ParseFromString(bytes(source))
        name = "<bytes>"
    else:
        source = os.fspath(source)
        net = caffe_pb2.NetParameter()
        if os.path.exists(source):
            name = source
            if is_binary_file(source):
                read_binary(source, net)
            else:
                read_text(source, net)
        elif "\n" in source or "{" in source or ":" in source:
            name = "<string>"
            parse_text(source, net, filename=name)
        else:
            raise ProtoError("%s: no such file" % source)
    if upgrade:
        _upgrade.upgrade_net(net, filename=name)
    return net


def read_solver(source, upgrade=True):
    """A SolverParameter from a path, text or SolverParameter (solver_type upgraded to type)."""
    from . import upgrade as _upgrade
    if isinstance(source, caffe_pb2.SolverParameter):
        sp = caffe_pb2.SolverParameter()
        sp.CopyFrom(source)
        name = "<SolverParameter>"
    else:
        source = os.fspath(source)
        sp = caffe_pb2.SolverParameter()
        if os.path.exists(source):
            name = source
            read_text(source, sp)
        elif "\n" in source or ":" in source:
            name = "<string>"
            parse_text(source, sp, filename=name)
        else:
            raise ProtoError("%s: no such file" % source)
    if upgrade:
        _upgrade.upgrade_solver(sp, filename=name)
    return sp


def atomic_write(path, data):
    """Write bytes to ``path`` atomically (temp file in the same dir + fsync + rename)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def write_binary(msg, path):
    atomic_write(path, msg.SerializeToString())


def write_text(msg, path):
    atomic_write(path, text_format.MessageToString(msg).encode("utf-8"))


def to_text(msg):
    return text_format.MessageToString(msg)
