"""The user's own schema: a Caffe fork's ``caffe.proto``, compiled at run time and merged with
caffepy's, so that the fork's nets parse with the fork's fields.

Loading (:func:`load_schema`, the ``--proto PATH`` flag of every command, or the environment
variable ``CAFFEPY_PROTO``) compiles the file with grpcio-tools' protoc (the ``proto`` extra) into
a FileDescriptorSet in a temporary directory, and merges it into a copy of caffepy's own schema
(``caffe_pb2.DESCRIPTOR``):

* for every message caffepy has, the fork's fields it lacks (by name) are added, with the fork's
  number when caffepy's message does not use it, else with a free number from
  :data:`RENUMBER_BASE` up (named in one INFO line); nested messages and enums merge the same way;
* the fork's messages and enums caffepy lacks are added whole, and the values caffepy's enums lack
  are added to them (a value whose number caffepy uses is renumbered the same way);
* caffepy's (and BVLC's) fields always win a name clash; one INFO line names the clashes of type.

Fields caffepy's schema declares only because public forks define them
(:mod:`caffepy.proto.harvest_policy`) are accepted where the fork's file defines them too.

How caffepy uses it: :func:`caffepy.proto.io.parse_text` parses a text message with the merged
class of the requested message, then carries the result over to caffepy's own class by bytes. The
fields caffepy knows keep their numbers, so they carry over exactly; the fork's fields become
unknown fields of caffepy's message, which every copy keeps. A layer that needs a fork field reads
it from :func:`fork_view` (``fork_view(self.layer_param).my_fork_param``), which parses the layer's
bytes back with the merged class; :func:`caffepy.layers.base.fork_param` does so by itself. Renumbered
fields carry over the same way: inside one process the merged schema gives them the same number in
both directions. Text written while a schema is active (:func:`caffepy.proto.io.to_text`) shows the
fork's fields with their names. Binary files (.caffemodel) are parsed with caffepy's own classes,
unchanged: a fork field there keeps the fork's number (and is readable by :func:`fork_view` when it
was not renumbered).

A value that a field caffepy knows cannot hold in caffepy's enum (a fork's value) stays an error,
as without a schema (:mod:`caffepy.proto.unknown_fields`): caffepy's layer would compute something
else.
"""
import contextlib
import logging
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ..errors import ProtoError
from . import caffe_pb2, is_repeated

_log = logging.getLogger(__name__)

#: The environment variable naming a fork's caffe.proto (as ``--proto`` does).
ENV = "CAFFEPY_PROTO"
#: Fork fields and enum values whose number caffepy already uses get numbers from here up.
RENUMBER_BASE = 500000000

_FD = descriptor_pb2.FieldDescriptorProto


class Schema(object):
    """A merged schema: ``pool`` (a fresh DescriptorPool), ``path``, ``renumbered`` (notes)."""

    def __init__(self, path, key, pool, renumbered, clashes, defines=frozenset()):
        self.path, self.key, self.pool = path, key, pool
        self.renumbered, self.clashes = renumbered, clashes
        self.defines = defines   # "Message.field" / "Message.field=VALUE" the fork's file defines
        self._classes = {}

    def message_class(self, full_name):
        """The merged message class of ``full_name`` (``"caffe.NetParameter"``)."""
        cls = self._classes.get(full_name)
        if cls is None:
            desc = self.pool.FindMessageTypeByName(full_name)
            get = getattr(message_factory, "GetMessageClass", None)
            cls = get(desc) if get else message_factory.MessageFactory(self.pool).GetPrototype(desc)
            self._classes[full_name] = cls
        return cls

    def __getattr__(self, name):       # schema.NetParameter, schema.LayerParameter ...
        if name[:1].isupper():
            try:
                return self.message_class("caffe." + name)
            except KeyError:
                pass
        raise AttributeError(name)


_state = {"explicit": None, "env": None}


def reset():
    """Forget every loaded schema (caffepy's own schema alone is used again)."""
    _state["explicit"] = _state["env"] = None


def active():
    """The schema in use: the one :func:`load_schema` loaded, else ``$CAFFEPY_PROTO``'s, else None."""
    if _state["explicit"] is not None:
        return _state["explicit"]
    path = os.environ.get(ENV)
    if not path:
        return None
    env = _state["env"]
    if env is None or env.path != path or env.key != _key(path):
        try:
            _state["env"] = _build(path)
        except ProtoError as e:
            raise ProtoError("%s (%s)" % (e, ENV)) from None
    return _state["env"]


def load_schema(path):
    """Compile and merge the fork's ``caffe.proto`` at ``path``; it is used from now on (see the
    module doc). Loading the same unchanged file again returns the loaded schema."""
    path = os.fspath(path)
    current = _state["explicit"]
    if current is None or current.path != path or current.key != _key(path):
        _state["explicit"] = _build(path)
    return _state["explicit"]


@contextlib.contextmanager
def using(path, via=None):
    """Within the block, the schema at ``path`` (None: no change) is in use; the one before after.
    ``via`` (``"--proto"``) is named after a loading error."""
    saved = _state["explicit"]
    try:
        if path:
            try:
                load_schema(path)
            except ProtoError as e:
                if not via:
                    raise
                raise ProtoError("%s (%s)" % (e, via)) from None
        yield _state["explicit"]
    finally:
        _state["explicit"] = saved


def merged_for(msg):
    """A new, empty merged message of ``msg``'s type when a schema is active and ``msg`` is one of
    caffepy's own messages; else None."""
    schema = active()
    if schema is None or msg.DESCRIPTOR.file is not caffe_pb2.DESCRIPTOR:
        return None
    return schema.message_class(msg.DESCRIPTOR.full_name)()


def as_merged(msg):
    """``msg`` as the active schema's merged message (a copy), or ``msg`` itself when none is."""
    merged = merged_for(msg)
    if merged is None:
        return msg
    merged.ParseFromString(msg.SerializeToString())
    return merged


def fork_values(text, msg, merged):
    """The enum values in ``text`` that ``msg``'s enums lack and ``merged``'s have (a fork's values
    in fields caffepy reads: caffepy's layers cannot honour them)."""
    from .unknown_fields import find_unknown_values
    values = find_unknown_values(text, msg.DESCRIPTOR)
    if values:
        theirs = {(v.line, v.col) for v in find_unknown_values(text, merged.DESCRIPTOR)}
        values = [v for v in values if (v.line, v.col) not in theirs]
    return values


def fork_view(msg):
    """A copy of ``msg`` (a LayerParameter, a NetParameter ...) in which the fork's fields of the
    active schema are readable: ``fork_view(self.layer_param).my_fork_param.alpha``."""
    if active() is None:
        raise ProtoError("%s '%s' needs a fork's schema: pass --proto FORK/caffe.proto (or set %s)"
                         % (msg.DESCRIPTOR.name, getattr(msg, "name", ""), ENV))
    return as_merged(msg)


def _key(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), st.st_mtime_ns, st.st_size)


def _build(path):
    key = _key(path)
    if key is None or not os.path.isfile(path):
        raise ProtoError("%s: no such file (a fork's caffe.proto expected)" % path)
    fds = _compile(path)
    main = fds.file[-1]          # --include_imports lists the named file last
    if main.package != "caffe":
        raise ProtoError("%s: package is '%s', not 'caffe': not a Caffe schema"
                         % (path, main.package))
    if main.syntax == "proto3":
        raise ProtoError("%s: syntax is proto3; Caffe schemas are proto2: not a Caffe schema" % path)
    ours_files = [f for f in fds.file if f.package == "caffe"]
    if not any(m.name == "NetParameter" for f in ours_files for m in f.message_type):
        raise ProtoError("%s: defines no message NetParameter: not a Caffe schema" % path)
    merged = descriptor_pb2.FileDescriptorProto()
    caffe_pb2.DESCRIPTOR.CopyToProto(merged)
    merged.name = "caffepy_user_schema/%s" % os.path.basename(path)
    merger = _Merger()
    for f in ours_files:
        merger.enums(merged.enum_type, f.enum_type, "caffe")
    for f in ours_files:
        merger.messages(merged.message_type, f.message_type, "caffe")
    pool = descriptor_pool.DescriptorPool()
    try:
        for f in fds.file:
            if f.package != "caffe":
                pool.AddSerializedFile(f.SerializeToString())
                merged.dependency.append(f.name)
        pool.AddSerializedFile(merged.SerializeToString())
        pool.FindMessageTypeByName("caffe.NetParameter")
    except (TypeError, KeyError, ValueError) as e:
        raise ProtoError("%s: cannot merge with caffepy's schema: %s"
                         % (path, " ".join(str(e).split()))) from None
    if merger.renumbered:
        _log.info("%s: fork fields and values renumbered (caffepy uses their numbers): %s",
                  path, "; ".join(merger.renumbered))
    if merger.clashes:
        _log.info("%s: caffepy's definition kept for fields whose type differs in the fork: %s",
                  path, "; ".join(merger.clashes))
    if merger.skipped:
        _log.info("%s: fork definitions left out (their enum value names are caffepy's): %s",
                  path, "; ".join(merger.skipped))
    return Schema(path, key, pool, merger.renumbered, merger.clashes, _defined(ours_files))


def _defined(files):
    """What the fork's files define, as harvest_policy names it: ``Message.field`` and, for enum
    fields, ``Message.field=VALUE`` (the harvested fields it defines are then accepted)."""
    enums, fields = {}, []

    def walk(scope, messages, enum_types):
        for e in enum_types:
            enums[".%s.%s" % (scope, e.name)] = [v.name for v in e.value]
        for m in messages:
            full = "%s.%s" % (scope, m.name)
            fields.extend((full[6:], f) for f in m.field)
            walk(full, m.nested_type, m.enum_type)

    for f in files:
        walk("caffe", f.message_type, f.enum_type)
    out = set()
    for message, f in fields:
        out.add("%s.%s" % (message, f.name))
        out.update("%s.%s=%s" % (message, f.name, v) for v in enums.get(f.type_name, ()))
    return frozenset(out)


def _compile(path):
    """The FileDescriptorSet of ``path`` and its imports, from grpcio-tools' protoc."""
    try:
        import grpc_tools
    except ImportError:
        raise ProtoError("%s: compiling a .proto needs grpcio-tools: pip install 'caffepy[proto]'"
                         % path) from None
    folder = os.path.dirname(os.path.abspath(path))
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="caffepy-proto-") as tmp:
        out = os.path.join(tmp, "schema.pb")
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I" + folder, "-I" + well_known,
               "--include_imports", "--descriptor_set_out=" + out, os.path.basename(path)]
        run = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
        if run.returncode != 0 or not os.path.exists(out):
            lines = [ln.strip() for ln in run.stderr.splitlines()
                     if ln.strip() and "warning:" not in ln]
            first = lines[0] if lines else "protoc failed (exit code %d)" % run.returncode
            if first.startswith(os.path.basename(path) + ":"):
                first = os.path.join(os.path.dirname(path), first)
            raise ProtoError(first)
        with open(out, "rb") as f:
            return descriptor_pb2.FileDescriptorSet.FromString(f.read())


def _type_of(field):
    label = "repeated " if is_repeated(field) else ""    # required = optional
    return label + (field.type_name.lstrip(".").replace("caffe.", "") or
                    _FD.Type.Name(field.type)[5:].lower())


class _Merger(object):
    """Adds a fork's definitions to caffepy's (FileDescriptorProto parts), noting what moved."""

    def __init__(self):
        self.renumbered, self.clashes, self.skipped = [], [], []
        self.left_out = set()       # full names (".caffe.X.Y") of the fork's enums left out

    def messages(self, ours, theirs, scope):
        by_name = {m.name: m for m in ours}
        for m in theirs:
            if m.name in by_name:
                self.message(by_name[m.name], m, "%s.%s" % (scope, m.name))
            else:
                ours.add().CopyFrom(m)

    def enums(self, ours, theirs, scope):
        """Merge the enums of one scope (a fork's enum whose value names caffepy's enums of the
        scope have is left out: value names share their scope)."""
        by_name = {e.name: e for e in ours}
        values = {v.name for e in ours for v in e.value}     # value names share the scope
        for e in theirs:
            if e.name not in by_name:
                clash = sorted(v.name for v in e.value if v.name in values)
                if clash:
                    self.skipped.append("%s (values %s are caffepy's)"
                                        % (_where(scope, e.name), ", ".join(clash)))
                    self.left_out.add(".%s.%s" % (scope, e.name))
                    continue
                ours.add().CopyFrom(e)
                values.update(v.name for v in e.value)
                continue
            mine = by_name[e.name]
            names = {v.name for v in mine.value}
            used = {v.number for v in mine.value}
            for v in e.value:
                if v.name in names:
                    continue
                if v.name in values:
                    self.skipped.append(_where(scope, e.name, v.name))
                    continue
                new = mine.value.add()
                new.CopyFrom(v)
                if v.number in used:
                    new.number = _free(used)
                    self._moved(_where(scope, e.name, v.name), v.number, new.number)
                used.add(new.number)
                values.add(v.name)

    def message(self, ours, theirs, full):
        self.enums(ours.enum_type, theirs.enum_type, full)
        mine = {f.name: f for f in ours.field}
        jsons = {_json(f) for f in ours.field}
        used = {f.number for f in ours.field}
        taken = [(r.start, r.end) for r in list(ours.reserved_range) + list(ours.extension_range)]
        moved = []
        for f in theirs.field:
            if f.name in mine:
                if _type_of(mine[f.name]) != _type_of(f):
                    self.clashes.append("%s (caffepy: %s; fork: %s)" % (
                        _where(full, f.name), _type_of(mine[f.name]), _type_of(f)))
                continue
            if f.type_name in self.left_out:
                self.skipped.append(_where(full, f.name))
                continue
            new = ours.field.add()
            new.CopyFrom(f)
            if _json(f) in jsons:       # pad_out_W beside caffepy's pad_out_w: both padOutW
                new.json_name = f.name
            jsons.add(_json(new))
            if f.HasField("oneof_index"):
                new.oneof_index = self._oneof(ours, theirs.oneof_decl[f.oneof_index].name)
            if f.number in used or any(a <= f.number < b for a, b in taken):
                moved.append(new)
            else:
                used.add(f.number)
        for new in moved:
            number = _free(used)
            self._moved(_where(full, new.name), new.number, number)
            new.number = number
            used.add(number)
        self.messages(ours.nested_type, theirs.nested_type, full)

    @staticmethod
    def _oneof(ours, name):
        for i, decl in enumerate(ours.oneof_decl):
            if decl.name == name:
                return i
        ours.oneof_decl.add(name=name)
        return len(ours.oneof_decl) - 1

    def _moved(self, where, old, new):
        self.renumbered.append("%s %d -> %d" % (where, old, new))


def _where(scope, *names):
    """``Message.field`` from a full scope (``caffe.Message``) and names."""
    return ".".join(([scope[6:]] if scope != "caffe" else []) + list(names))


def _json(field):
    if field.HasField("json_name"):
        return field.json_name
    parts = field.name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _free(used):
    n = RENUMBER_BASE
    while n in used:
        n += 1
    return n
