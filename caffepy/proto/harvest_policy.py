"""What to do with fields caffepy's schema declares only because public Caffe forks define them.

caffe.proto declares the fields, messages and enum values of some hundred Caffe forks (the harvest,
``proto/harvest.json``), so their files parse and no such field is "unknown". caffepy does not
compute them: :data:`harvested_fields.json <TABLE>` names each with the forks defining it. A file
that sets one to a value other than its default is read according to the mode:

* structure only (:func:`structure_only`: ``caffepy summary``, ``caffepy draw``): accepted, with
  ONE WARNING per file naming the fields and their forks; with their ``--strict``
  (``structure_only(strict_fields=True)``) refused as below, so a net they build strictly is one
  the computing commands build, except in the layers the command replaces (``replaced``:
  ``caffepy summary`` shows a data layer as an Input layer of its shape, so a reader's fields
  are read for the structure there too);
* strict (the default; train / test / time / Net construction / export): one error line,
  ``FILE:LINE: layer 'x': field 'pad_l' of ConvolutionParameter is known only from forks (a/b,
  +N): caffepy does not compute it; ...``;
* lenient (``--ignore-unknown-fields``, :func:`unknown_fields.lenient`): one WARNING; the field
  keeps its value and nothing reads it.

A field holding its default value changes nothing and is accepted silently. The check runs where
:func:`caffepy.proto.io.parse_text` reads text; line numbers come from the same token scan
:mod:`caffepy.proto.unknown_fields` uses. Harvested fields that a caffepy layer now reads are listed
in :data:`COMPUTED` (:mod:`caffepy.proto.harvest_computed`): they are accepted like any field of caffepy's own schema; so is a fork's V1
layer type that upgrades to the type string of a caffepy layer (:mod:`caffepy.proto.v1_fork_types`), and a fork's
V1 field the V1 upgrade copies into a LayerParameter field caffepy reads (:func:`_carried_to_layer`).
With a fork's own schema loaded (``--proto``, :mod:`caffepy.proto.user_schema`), the harvested
fields and values its file defines are accepted.
"""
import contextlib
import contextvars
import json
import logging
import math
import os
import struct

from ..errors import ProtoError
from . import is_repeated
from . import unknown_fields as _unknown
from .harvest_computed import COMPUTED  # noqa: F401 -- the fields fork layers compute

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harvested_fields.json")
_log = logging.getLogger(__name__)
_STRUCTURE = contextvars.ContextVar("caffepy_structure_only", default=False)
_STRICT_FIELDS = contextvars.ContextVar("caffepy_structure_strict_fields", default=(False, None))
_table = []
#: Repeated fields the forks declare without a default (proto2 has none for repeated fields)
#: whose sources read a missing value as this one: elements all equal to it change nothing.
#: PoolingParameter.dilation: naibaf7/caffe's (OpenCL Caffe) pooling_layer.cpp takes 1 when
#: the field is empty, and a dilation of 1 is plain pooling.
NEUTRAL = {"PoolingParameter.dilation": "1"}
_LAYERS = ("LayerParameter", "V1LayerParameter", "V0LayerParameter")


def table():
    """{"Message.field" or "Message.field=VALUE": {"forks": [first five], "count": n, ...}}."""
    if not _table:
        from .own_not_computed import entries
        try:
            with open(TABLE) as f:
                loaded = json.load(f)
        except FileNotFoundError:
            loaded = {}
        for key, entry in entries().items():      # the own schema's fields nothing computes
            loaded.setdefault(key, entry)
        _table.append(loaded)
    return _table[0]


@contextlib.contextmanager
def structure_only(enabled=True, strict_fields=False, replaced=None):
    """Within the block, harvested fields are accepted with one WARNING per file: for commands that
    only read a net's structure (summary, draw). ``strict_fields``: a strict reader still refuses
    them (those commands' ``--strict``), except in a layer for which ``replaced(LayerParameter)``
    is true (one the command does not build as written: summary's data layers); the rest of the
    structure-only reading stays."""
    token = _STRUCTURE.set(bool(enabled))
    fields = _STRICT_FIELDS.set((bool(strict_fields), replaced))
    try:
        yield
    finally:
        _STRICT_FIELDS.reset(fields)
        _STRUCTURE.reset(token)


def is_structure_only():
    return _STRUCTURE.get()


class Harvested:
    """One harvested field set to a non-default value (or a harvested enum value)."""
    __slots__ = ("message", "field", "path", "layer", "value", "entry", "line")

    def __init__(self, message, field, path, layer, entry, value=None):
        self.message, self.field, self.path, self.layer = message, field, path, layer
        self.entry, self.value, self.line = entry, value, None

    def forks(self, shown=2):
        names = self.entry["forks"][:shown]
        more = self.entry["count"] - len(names)
        return ", ".join(names + (["+%d" % more] if more > 0 else []))

    def what(self):
        if self.value is None:
            return "field '%s' of %s" % (self.field, self.message)
        return "value %s of field '%s' of %s" % (self.value, self.field, self.message)

    def brief(self):
        where = " (layer '%s')" % self.layer if self.layer else ""
        value = "=%s" % self.value if self.value is not None else ""
        return "%s.%s%s%s [%s]" % (self.message, self.field, value, where, self.forks())


def _full(desc):
    name = desc.full_name
    return name.split(".", 1)[1] if "." in name else name


def _same(fd, a, b):
    if fd.type == fd.TYPE_FLOAT:
        a, b = (struct.unpack("<f", struct.pack("<f", float(x)))[0] for x in (a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _parse_default(fd, text):
    """A fork's default (as protoc wrote it; "" for the type's zero) as a field value."""
    if fd.enum_type is not None:
        value = fd.enum_type.values_by_name.get(text) if text else fd.enum_type.values[0]
        return value.number if value is not None else None
    if fd.type in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE):
        return float(text) if text else 0.0
    if fd.type == fd.TYPE_BOOL:
        return text == "true"
    if fd.type == fd.TYPE_STRING:
        return text
    if fd.type == fd.TYPE_BYTES:
        return text.encode("latin-1", "backslashreplace")
    return int(text) if text else 0


def _message_is_default(msg):
    return all(_is_default(fd, value) for fd, value in msg.ListFields())


def _is_default(fd, value, fork_default=None):
    """Whether ``value`` of field ``fd`` changes nothing: its default (for a field caffepy declares
    repeated where forks have it optional, every element the forks' default)."""
    if fd.message_type is not None:
        values = value if is_repeated(fd) else [value]
        return all(_message_is_default(v) for v in values)
    if is_repeated(fd):
        if fork_default is None:
            return False
        default = _parse_default(fd, fork_default)
        return all(_same(fd, v, default) for v in value)
    return _same(fd, value, fd.default_value)


def unread_fields(msg, read):
    """The names of the fields of ``msg`` that ``read`` does not list and that are set to a value
    that changes something (not the field's default; a message counts as default when all its
    set fields are): what a reader of a parameter message several forks declare refuses."""
    return [fd.name for fd, value in msg.ListFields()
            if fd.name not in read and not _is_default(fd, value)]


def _v1_type_computed(number):
    """Whether a fork's V1 layer type upgrades (caffepy.proto.v1_fork_types) to a type string a
    caffepy layer class computes."""
    from ..layers import base
    from .upgrade import V1_TYPES
    name = V1_TYPES.get(number)
    if not name:
        return False
    base.load_all()
    return base.has_layer_type(name)


def _carried_to_layer(fd, tab):
    """Whether harvested V1 field ``fd`` (``V1LayerParameter.x_param``) is one the V1 → current
    upgrade carries over (:func:`caffepy.proto.upgrade.upgrade_v1_layer` copies a V1 field into the
    LayerParameter field of its name when both have the same message type, or the same scalar
    type, and the same label) to a LayerParameter field caffepy reads: not itself a harvested field
    no fork layer computes. Its sub-fields are then checked as that message's fields, so a fork's
    V1 ``layers { type: ROI_POOLING roi_pooling_param { ... } }`` is read as the current ``layer``
    of the same content."""
    from . import caffe_pb2
    target = caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name.get(fd.name)
    if fd.containing_type.name != "V1LayerParameter" or target is None:
        return False
    if is_repeated(target) != is_repeated(fd):
        return False
    if fd.message_type is not None or target.message_type is not None:
        if target.message_type is not fd.message_type:
            return False
    elif target.type != fd.type:
        return False
    key = "LayerParameter.%s" % fd.name
    return key not in tab or key in COMPUTED


def find_harvested(msg):
    """Every harvested field ``msg`` (and its sub-messages) sets to a non-default value, and every
    harvested enum value it holds: :class:`Harvested` records (field path, layer name, forks)."""
    out = []
    if table():
        _walk(msg, [], None, out, table())
    return out


def _walk(msg, path, layer, out, tab):
    desc = msg.DESCRIPTOR
    mname = _full(desc)
    if desc.name in _LAYERS and msg.name:
        layer = msg.name
    for fd, value in msg.ListFields():
        key = "%s.%s" % (mname, fd.name)
        fpath = path + [fd.name]
        entry = tab.get(key) if key not in COMPUTED else None
        if entry is not None and _carried_to_layer(fd, tab):
            entry = None
        if entry is not None:
            if not _is_default(fd, value, entry.get("default", NEUTRAL.get(key))):
                out.append(Harvested(mname, fd.name, ".".join(fpath), layer, entry))
            continue
        values = value if is_repeated(fd) else [value]
        if fd.enum_type is not None:
            for v in values:
                ev = fd.enum_type.values_by_number.get(v)
                vkey = "%s=%s" % (key, ev.name) if ev is not None else None
                entry = tab.get(vkey) if vkey is not None and vkey not in COMPUTED else None
                if entry is not None and key == "V1LayerParameter.type" and _v1_type_computed(v):
                    entry = None
                if entry is not None:
                    out.append(Harvested(mname, fd.name, ".".join(fpath), layer, entry, ev.name))
                    break
        elif fd.message_type is not None:
            for sub in values:
                _walk(sub, fpath, layer, out, tab)


def _locate(found, text, descriptor):
    """Set each record's ``line`` from the text scan (the first matching occurrence)."""
    try:
        seen = _unknown.known_fields(text, descriptor)
    except (IndexError, ValueError):
        return
    used = set()
    for rec in found:
        for i, (desc, name, line, _, layer) in enumerate(seen):
            if i not in used and name == rec.field and _full(desc) == rec.message and (
                    rec.layer is None or layer is None or layer == rec.layer):
                rec.line = line
                used.add(i)
                break


def _fork_defines(rec):
    """Whether the fork schema loaded with --proto (caffepy.proto.user_schema) defines the field or
    value: the user named the fork whose nets these are (a --layers plug-in computes it)."""
    from . import user_schema
    schema = user_schema.active()
    key = "%s.%s%s" % (rec.message, rec.field, "=%s" % rec.value if rec.value is not None else "")
    return schema is not None and key in schema.defines


def _in_replaced_layer(msg, name, replaced):
    """Whether the layer ``name`` of NetParameter ``msg`` (a V1 ``layers`` entry by its current
    type name) is one ``replaced`` says the command does not build as written."""
    if name is None or msg.DESCRIPTOR.name != "NetParameter":
        return False
    for lp in msg.layer:
        if lp.name == name:
            return bool(replaced(lp))
    for v1 in msg.layers:
        if v1.name == name:
            return bool(replaced(_v1_as_layer(v1)))
    return False


def _v1_as_layer(v1, type_name=None):
    """A V1 ``layers`` block as the LayerParameter ``replaced`` judges: its name, bottoms and tops,
    and its current type name (``type_name``: a fork's V1 type kept as its name)."""
    from . import caffe_pb2
    from .upgrade import V1_TYPES
    return caffe_pb2.LayerParameter(name=v1.name, bottom=v1.bottom, top=v1.top,
                                    type=type_name or V1_TYPES.get(v1.type, ""))


def _layer_at(net, field, ordinal, raw_types):
    """The LayerParameter of the ``ordinal``-th ``field`` block ("layer" or "layers") of ``net``
    (a V1 block by :func:`_v1_as_layer`, ``raw_types`` giving the kept names by ordinal)."""
    blocks = getattr(net, field, ())
    if ordinal >= len(blocks):
        return None
    if field == "layer":
        return blocks[ordinal]
    return _v1_as_layer(blocks[ordinal], raw_types.get(ordinal))


def spared_in_replaced(records, parse_blanked, raw_types=None):
    """The records of fields (or enum values) no schema declares
    (:mod:`caffepy.proto.unknown_fields`) that sit in a layer the structure-only reading does not
    build as written (``replaced``: summary's data layers, shown as Input layers of their shapes):
    they are read for the structure only, as harvested fork fields there are, and the strict
    reading does not refuse them. ``parse_blanked()``: the text parsed without every unknown field
    and value (None when it does not parse), called only when a record could be spared.
    ``raw_types``: {ordinal: name} of V1 ``layers`` types kept as their names."""
    _, replaced = _STRICT_FIELDS.get()
    if replaced is None or not is_structure_only():
        return []
    by_layer = {}
    for rec in records:
        ref = rec.layer
        if getattr(ref, "field", None) in ("layer", "layers"):
            by_layer.setdefault((ref.field, ref.ordinal), []).append(rec)
    if not by_layer:
        return []
    net = parse_blanked()
    if net is None or net.DESCRIPTOR.name != "NetParameter":
        return []
    spared = []
    for (field, ordinal), recs in by_layer.items():
        lp = _layer_at(net, field, ordinal, raw_types or {})
        names = [r.name for r in recs if r.message in _LAYERS]
        if lp is not None and replaced(lp, names):
            spared.extend(recs)
    return spared


def check(msg, text, filename, strict):
    """Apply the policy (module doc) to ``msg``, just parsed from ``text``: raises ProtoError when
    ``strict`` (in the structure-only mode only with ``strict_fields``, and not for the layers it
    names as replaced), else logs one WARNING when a harvested field is set."""
    found = [r for r in find_harvested(msg) if not _fork_defines(r)]
    if not found:
        return msg
    _locate(found, text, msg.DESCRIPTOR)
    found.sort(key=lambda r: (r.line is None, r.line or 0))
    structure = is_structure_only()
    strict_fields, replaced = _STRICT_FIELDS.get()
    refused = found if strict and (not structure or strict_fields) else []
    if refused and structure and replaced is not None:
        refused = [r for r in refused if not _in_replaced_layer(msg, r.layer, replaced)]
    if refused:
        first = refused[0]
        loc = "%s:%d" % (filename, first.line) if first.line else filename
        layer = " layer '%s':" % first.layer if first.layer else ""
        more = " (%d more such field(s) in this file)" % (len(refused) - 1) \
            if len(refused) > 1 else ""
        raise ProtoError("%s:%s %s is known only from forks (%s): caffepy does not compute it; use "
                         "--ignore-unknown-fields to build without it, or --proto FORK/caffe.proto "
                         "/ a --layers plug-in%s" % (loc, layer, first.what(), first.forks(), more))
    if structure:
        _log.warning("%s: %d field(s) known only from Caffe forks, read for the structure only "
                     "(caffepy does not compute them): %s", filename, len(found),
                     "; ".join(r.brief() for r in found))
    else:
        _log.warning("%s: ignored %d field(s) known only from Caffe forks (--ignore-unknown-fields; "
                     "caffepy does not compute them): %s", filename, len(found),
                     "; ".join(r.brief() for r in found))
    return msg
