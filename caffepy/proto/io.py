"""Reading and writing Caffe's protobuf files with precise, one-line errors.

Text (.prototxt, solver files) and binary (.caffemodel, .binaryproto, .solverstate). Every
reader returns messages in the current schema: legacy V0/V1 nets, ``input_dim`` inputs and
``solver_type`` enums are upgraded on load by :mod:`caffepy.proto.upgrade`. Every writer is atomic:
it writes a temporary file in the same directory, fsyncs it and renames it over the target, so a
crash mid-write never leaves a file that looks complete.

Text or binary is decided from the bytes (:func:`looks_binary`), not the file name: a binary
message nearly always holds NUL bytes, bytes that are not UTF-8 or many control characters, and a
text file none of these. When the guess is text and the text does not parse, a binary parse is tried
before the text error is reported.

Text errors read ``file:line:column: what is wrong (layer 'name')``, for example
``net.prototxt:12:5: no field named "foo" in LayerParameter (layer 'conv1')``
(:mod:`caffepy.proto.text_errors`). When text does not parse, :func:`parse_text` tries, in turn:
fork spellings of n-d fields and fork-repeated fields (:mod:`caffepy.proto.upgrade`), the lenient
readings of :mod:`caffepy.proto.lenient_text`, then dropping fields the schema lacks
(:mod:`caffepy.proto.unknown_fields`) and enum values its enums lack
(:mod:`caffepy.proto.unknown_values`).
"""
import logging
import os
import re

from google.protobuf import message as _message
from google.protobuf import text_format

from ..errors import ProtoError
from . import caffe_pb2
from .atomic import atomic_path, atomic_write, file_mode, write_error  # noqa: F401
from . import harvest_policy as _harvest
from . import own_schema as _own
from . import templates as _templates
from . import lenient_text as _lenient
from . import unknown_fields as _unknown
from . import unknown_values as _values
from . import user_schema as _user
from .text_errors import parse_located
from .unknown_values import check_binary_values

_log = logging.getLogger(__name__)

_TEXT_BYTES = frozenset(range(32, 127)) | frozenset(b"\n\r\t\f\b\v")


# a quoted string (kept) or a '#' comment (dropped), in protobuf text's bytes
_STRING_OR_COMMENT = re.compile(rb'("(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')|#[^\n]*')


def without_comments(data):
    """``data`` (protobuf text, bytes) with its comments removed (line breaks kept)."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(1) or b"", data)


def _not_utf8_at(data, sample=True):
    """Index of the first byte of ``data`` that is not UTF-8, or None; in a ``sample`` (the head
    of a file) a character cut at its end does not count."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start if not sample or e.start < len(data) - 4 else None
    return None


def looks_binary(data):
    """True when ``data`` (bytes) is a binary protobuf rather than protobuf text: a NUL byte,
    bytes that are not UTF-8 outside comments (an editor's legacy encoding, GBK or Latin-1, in
    a comment stays text, as Caffe's parser skips comments byte by byte), or control bytes."""
    head = bytes(data[:65536])
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 128 and b not in _TEXT_BYTES)
    if _not_utf8_at(head) is not None and _not_utf8_at(without_comments(head)) is not None:
        return control > 0
    return control > max(1, len(head) // 100)


def is_binary_file(path):
    """True when the file at ``path`` holds a binary protobuf (see :func:`looks_binary`)."""
    with open(path, "rb") as f:
        return looks_binary(f.read(65536))


def _parse_located(text, msg, filename):
    return parse_located(text, msg, filename, merge=_lenient.takes_last())


def parse_text(text, msg, filename="<string>", strict=None, hints=None):
    """Parse protobuf text into ``msg``; errors become ``file:line:column: what (layer 'x')``.

    Fields ``msg``'s schema lacks follow :mod:`caffepy.proto.unknown_fields`: hints that change no
    math are dropped (named in one INFO line, or appended to the list ``hints`` when given); any
    other is an error unless ``strict`` is false (``None``: :func:`unknown_fields.strict_default`),
    in which case it is dropped and named in one WARNING. A value an enum field's enum lacks (a
    fork's value) is an error naming the field and value; when not strict, one in a field that
    changes no math (a hint) is dropped with a WARNING, and any other stays an error saying so;
    under :func:`caffepy.proto.harvest_policy.structure_only` a V1 layer type the enum lacks is
    kept as its name (see :func:`read_net`) and, when not strict, any other value is dropped.
    Fields the schema declares only because forks define them follow
    :mod:`caffepy.proto.harvest_policy` (an error when strict and set to a non-default value,
    except in its structure-only mode). With a fork's schema loaded (:mod:`caffepy.proto.user_schema`)
    the text is parsed with it and carried over to ``msg`` by bytes (the fork's fields ride along as
    unknown fields), and the harvested fields that the fork's file defines are accepted.
    Template placeholders given values (``--define``, :mod:`caffepy.proto.templates`) are
    written in first.
    """
    text = _templates.substitute(text)
    _parse_text(text, msg, filename, strict, hints)
    return _harvest.check(msg, text, filename,
                          _unknown.strict_default() if strict is None else strict)


def _parse_text(text, msg, filename, strict, hints):
    merged = _user.merged_for(msg)
    if merged is not None:
        _parse_text(text, merged, filename, strict, hints)
        _values.reject_values(_user.fork_values(text, msg, merged), filename, strict)
        msg.MergeFromString(merged.SerializeToString())
        return msg
    try:
        return _parse_located(text, msg, filename)
    except ProtoError as error:
        from .fork_text import respell_nd_fields
        respelled = respell_nd_fields(text, msg.DESCRIPTOR, filename)
        if respelled is not None:
            msg.Clear()
            return _parse_text(respelled, msg, filename, strict, hints)
        if "should not have multiple" in str(error):
            from .fork_text import collapse_fork_repeated
            collapsed = collapse_fork_repeated(text, msg.DESCRIPTOR, filename)
            if collapsed is not None:
                msg.Clear()
                return _parse_text(collapsed, msg, filename, strict, hints)
            if not _lenient.take_last_scalars(text, msg, filename, strict):
                raise
            with _lenient.taking_last():
                msg.Clear()
                return _parse_text(text, msg, filename, strict, hints)
        if _lenient.has_quoted_v1_types(text):
            return _lenient.read_quoted_v1_types(
                text, msg, filename, strict, error,
                lambda respelled: _parse_text(respelled, msg, filename, strict, hints))
        if "no field named" not in str(error) and "no value named" not in str(error):
            return _lenient.read_repaired(
                text, msg, filename, strict, error,
                lambda repaired: _parse_text(repaired, msg, filename, strict, hints))
        first_error = error
    try:
        unknown = _unknown.find_unknown(text, msg.DESCRIPTOR)
        values = _unknown.find_unknown_values(text, msg.DESCRIPTOR)
    except (IndexError, ValueError, RecursionError):  # too malformed / deep to scan: the parser's error
        unknown, values = [], []
    if not unknown and not values:
        raise first_error
    strict = _unknown.strict_default() if strict is None else strict
    kept_types, dropped, checked = _values.structure_values(values, strict)
    risky = [u for u in unknown if not u.harmless]
    blanked = _unknown.blank(text, unknown + values)
    scratch = []                # the blanked text parsed, when the spared check needed it

    def parse_blanked():
        scratch.append(_parsed_blanked(blanked, msg))
        return scratch[0]
    spared = _harvest.spared_in_replaced(risky + checked, parse_blanked,
                                         {v.layer.ordinal: str(v.value) for v in kept_types})
    risky = [u for u in risky if u not in spared]
    checked = [v for v in checked if v not in spared]
    first_bad = sorted(risky + [v for v in checked if strict or not v.harmless],
                       key=lambda u: u.start)
    if first_bad and (strict or isinstance(first_bad[0], _unknown.UnknownValue)):
        u = first_bad[0]
        if isinstance(u, _unknown.UnknownValue):
            raise ProtoError(u.describe(filename, lenient=not strict))
        layer = " (layer '%s')" % u.layer[0] if u.layer and u.layer[0] else ""
        raise ProtoError('%s:%d:%d: no field named "%s" in %s%s%s'
                         % (filename, u.line, u.col, u.name, u.message, layer,
                            _own.hint(filename, u.name, u.message)))
    msg.Clear()
    if scratch and scratch[0] is not None:
        msg.CopyFrom(scratch[0])
    else:
        try:
            _parse_located(blanked, msg, filename)
        except ProtoError as error:
            _lenient.read_repaired(blanked, msg, filename, strict, error,
                                   lambda repaired: _parse_located(repaired, msg, filename))
    harmless = [u.name for u in unknown if u.harmless]
    if hints is not None:
        hints.extend(harmless)
    elif harmless:
        _log.info("%s: ignored fields that change no math in caffepy (memory, caching, precision "
                  "or engine hints): %s", filename, _unknown.summarize(harmless))
    if spared:
        _log.warning("%s: %d field(s) or value(s) no schema declares, in data layers shown as "
                     "Input layers, read for the structure only (training refuses them): %s",
                     filename, len(spared), "; ".join(u.where() for u in spared))
    if risky:
        _log.warning("%s: ignored %d unknown field(s) (%s): %s", filename, len(risky),
                     _unknown.lenient_reason(), "; ".join(u.where() for u in risky))
    if checked:
        _log.warning("%s: ignored %d unknown enum value(s) of fields that change no math "
                     "(%s): %s", filename, len(checked), _unknown.lenient_reason(),
                     "; ".join(v.where() for v in checked))
    if kept_types:
        _log.warning("%s: %d V1 layer type(s) the V1 enum lacks (a fork's) kept as their names "
                     "for the structure: %s", filename, len(kept_types),
                     "; ".join(v.where() for v in kept_types))
    if dropped:
        _log.warning("%s: ignored %d unknown enum value(s) (%s): %s", filename, len(dropped),
                     _unknown.lenient_reason(), "; ".join(v.where() for v in dropped))
    return msg


def _parsed_blanked(blanked, msg):
    """``blanked`` (text without its unknown fields and values) parsed into a new message of
    ``msg``'s type, or None when it does not parse so."""
    scratch = type(msg)()
    try:
        _parse_located(blanked, scratch, "<text>")
    except ProtoError:
        return None
    return scratch


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ProtoError("%s: cannot read: %s" % (path, e.strerror or e))


def _decode_text(data, path):
    """Protobuf text as str. Bytes that are not UTF-8 read as U+FFFD: in comments silently (Caffe
    skips them), elsewhere (a name or path in a legacy encoding) after one WARNING naming the
    line, as Caffe's proto2 parser takes such strings."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    bare = without_comments(bytes(data))
    at = _not_utf8_at(bare, sample=False)
    if at is not None:
        _log.warning("%s:%d: bytes that are not UTF-8 outside comments, read as U+FFFD",
                     path, bare[:at].count(b"\n") + 1)
    return bytes(data).decode("utf-8", errors="replace")


def parse_binary(data, msg, filename="<bytes>"):
    """Parse a serialized message into ``msg``; a bad message is a one-line ProtoError."""
    try:
        msg.ParseFromString(bytes(data))
    except _message.DecodeError as e:
        raise ProtoError("%s: not a valid binary %s (%s)" % (filename, msg.DESCRIPTOR.name,
                                                             " ".join(str(e).split())))
    return msg


def read_text(path, msg, strict=None):
    """Parse the text file at ``path`` into ``msg`` (no upgrade)."""
    path = os.fspath(path)
    return parse_text(_decode_text(_read_bytes(path), path), msg, filename=path, strict=strict)


def read_binary(path, msg):
    """Parse the binary file at ``path`` into ``msg`` (no upgrade)."""
    path = os.fspath(path)
    return parse_binary(_read_bytes(path), msg, filename=path)


def _unknown_fields(msg):
    """Number of top-level fields the schema does not know (a sign the bytes are not this message)."""
    try:
        from google.protobuf import unknown_fields
    except ImportError:  # protobuf < 4.24: no UnknownFieldSet; accept the parse
        return 0
    return len(unknown_fields.UnknownFieldSet(msg))


def parse_any(data, msg, filename, strict=None, hints=None):
    """``data`` (bytes) as binary or text, whichever it is (see the module doc).

    A guess of text that fails to parse is retried as binary; the binary reading is kept only if it
    yields fields and no unknown ones, otherwise the text error is raised.
    """
    if looks_binary(data):
        return check_binary_values(parse_binary(data, msg, filename), filename, strict)
    text = _decode_text(data, filename)
    try:
        return parse_text(text, msg, filename, strict=strict, hints=hints)
    except ProtoError as text_error:
        trial = type(msg)()
        try:
            trial.ParseFromString(bytes(data))
        except _message.DecodeError:
            raise text_error from None
        if trial.ListFields() and not _unknown_fields(trial):
            msg.CopyFrom(trial)
            return msg
        raise text_error from None


def read_message(path, msg, strict=None, hints=None):
    """Parse the file at ``path`` (text or binary, detected) into ``msg`` (no upgrade). An empty
    file (no bytes, or only white space) is an error: no Caffe net, solver or weights file is."""
    path = os.fspath(path)
    data = _read_bytes(path)
    if not data.strip():
        raise ProtoError("%s: empty file (%d bytes): not a %s" % (path, len(data), msg.DESCRIPTOR.name))
    return parse_any(data, msg, path, strict=strict, hints=hints)


def _looks_like_text_proto(s):
    return "\n" in s or "{" in s or ":" in s


def _log_hints(msg, name, hints):
    """One INFO line naming the hint fields (dropped unknown ones and declared ones) of a file."""
    hints = hints + _unknown.declared_hints(msg)
    if hints:
        _log.info("%s: fields that change no math in caffepy (memory, caching, precision or engine "
                  "hints) are ignored: %s", name, _unknown.summarize(hints))


def read_net(source, upgrade=True, strict=None):
    """A NetParameter from a path (text or binary), text, bytes, or a NetParameter (copied).

    The result is upgraded to the current format unless ``upgrade`` is false. ``strict``: what to
    do with fields the schema lacks (see :func:`parse_text`; ``None``: the current default).
    """
    from . import upgrade as _upgrade
    net = caffe_pb2.NetParameter()
    hints, raw_types = [], None
    if isinstance(source, caffe_pb2.NetParameter):
        net.CopyFrom(source)
        name = "<NetParameter>"
    else:
        with _values.recording_v1_types() as raw_types:    # V1 types kept for the structure
            if isinstance(source, (bytes, bytearray, memoryview)):
                name = "<bytes>"
                parse_any(bytes(source), net, name, strict=strict, hints=hints)
            else:
                name = _read_path_or_text(source, net, strict, hints)
    if name != "<NetParameter>":
        _log_hints(net, name, hints)
    if upgrade:
        _upgrade.upgrade_net(net, filename=name, raw_types=raw_types)
    return net


def _read_path_or_text(source, msg, strict=None, hints=None):
    """Fill ``msg`` from an existing file (text or binary) or from prototxt text; returns the name
    errors and upgrades report ("<string>" for text)."""
    source = os.fspath(source)
    if os.path.exists(source):
        read_message(source, msg, strict=strict, hints=hints)
        return source
    if _looks_like_text_proto(source):
        parse_text(source, msg, filename="<string>", strict=strict, hints=hints)
        return "<string>"
    raise ProtoError("%s: no such file" % source)


def read_solver(source, upgrade=True, strict=None):
    """A SolverParameter from a path, text or SolverParameter (solver_type upgraded to type)."""
    from . import upgrade as _upgrade
    sp = caffe_pb2.SolverParameter()
    hints = []
    if isinstance(source, caffe_pb2.SolverParameter):
        sp.CopyFrom(source)
        name = "<SolverParameter>"
    else:
        name = _read_path_or_text(source, sp, strict, hints)
        _log_hints(sp, name, hints)
    if upgrade:
        _upgrade.upgrade_solver(sp, filename=name)
    return sp


def write_binary(msg, path):
    atomic_write(path, msg.SerializeToString())


def write_text(msg, path):
    atomic_write(path, to_text(msg).encode("utf-8"))


def to_text(msg):
    """``msg`` as protobuf text (with a fork's schema loaded, its fields too, by name)."""
    return text_format.MessageToString(_user.as_merged(msg))
