"""What to do with prototxt fields from forks caffepy does not know.

Policy, applied by :func:`caffepy.proto.io.parse_text` when a text file names a field
its message lacks:

* a field whose name is a memory, caching, precision or engine hint of a major fork
  (:data:`caffepy.proto.hint_fields.NO_MATH_NAMES`: NVCaffe's ``forward_type`` / ``*_math`` /
  ``mem_param`` / ``eltwise_mem_sharing``, ``cache`` in data parameters, Intel's ``engine`` ...)
  changes no math in caffepy: it is dropped and named in one INFO line per file;
* any other unknown field may change the math: strict reading (the default) stops with one line,
  ``file:line:col: no field named "f" in Message (layer 'x') ...``; lenient reading
  (``Net(..., strict=False)``, ``--ignore-unknown-fields`` on ``summary`` / ``train`` / ``test`` /
  ``time``, or :func:`lenient`) drops it and names every dropped field in one WARNING.

A value that a known enum field's enum lacks (a fork's enum value, in text or as a number in a
binary file) is an error naming the file, line, field and value by default; lenient reading drops
it with a WARNING only where the field changes no math (the hints above and ``solver_mode``):
anything else stays an error that says it may change the math (:class:`UnknownValue`). Commands
that only read the structure (:func:`caffepy.proto.harvest_policy.structure_only`: summary, draw)
keep a V1 layer type the V1 enum lacks as its name and drop any other value with a WARNING unless
strict (:func:`caffepy.proto.io.parse_text`).

Fields the schema declares (proto/additions.d) parse normally; those of them that are such hints
(:data:`caffepy.proto.hint_fields.DECLARED_HINTS`) are named in the same INFO line by
:func:`caffepy.proto.hint_fields.declared_hints`.

The scan (:func:`find_unknown`) walks the text format's tokens against the message descriptors; a
dropped field's text (name, value or block) is blanked with spaces, newlines kept, so the line and
column of any later parse error stay those of the file.
"""
import contextlib
import contextvars
import re

from . import field_label
from .hint_fields import (  # noqa: F401
    DECLARED_HINTS, NO_MATH_NAMES, SAFE_ENUM_FIELDS, declared_hints, summarize)

_STRICT = contextvars.ContextVar("caffepy_strict_fields", default=True)
_REASON = contextvars.ContextVar("caffepy_unknown_fields_reason", default="--ignore-unknown-fields")

_TOK = re.compile(r"""
    (?P<ws>\s+) | (?P<comment>\#[^\n]*) |
    (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<punct>[{}<>\[\]:,;]) |
    (?P<word>[-+]?\d[\d.]*[eE][-+]?\d+[fF]?(?![\w.]) | [-+]?[\w.]+) | (?P<other>\S)""", re.X)


def strict_default():
    """Whether readers called with ``strict=None`` reject unknown fields (True unless lenient)."""
    return _STRICT.get()


@contextlib.contextmanager
def lenient(enabled=True, reason="--ignore-unknown-fields"):
    """Within the block, readers called with ``strict=None`` ignore unknown fields (with a WARNING
    that gives ``reason``)."""
    token = _STRICT.set(not enabled)
    why = _REASON.set(reason)
    try:
        yield
    finally:
        _REASON.reset(why)
        _STRICT.reset(token)


def lenient_reason():
    """Why unknown fields are being ignored (for the WARNING line)."""
    return _REASON.get()


class Unknown:
    """One unknown field: where it is, its message and name, and the text span it covers."""
    __slots__ = ("name", "message", "line", "col", "start", "end", "layer")

    def __init__(self, name, message, line, col, start, layer):
        self.name, self.message, self.line, self.col = name, message, line, col
        self.start, self.end, self.layer = start, start, layer

    @property
    def harmless(self):
        return self.name in NO_MATH_NAMES

    def where(self):
        layer = " (layer '%s')" % self.layer[0] if self.layer and self.layer[0] else ""
        return "%d:%d: %s.%s%s" % (self.line, self.col, self.message, self.name, layer)


class Repeated(Unknown):
    """A second (third ...) value of a singular field; ``block``: the field holds a message."""
    __slots__ = ("block",)

    def __init__(self, name, message, line, col, start, layer, block):
        super().__init__(name, message, line, col, start, layer)
        self.block = block


class _LayerRef(list):
    """The one-item list holding the name of the layer a record is in (filled in when the scan
    reaches its ``name``), and where the layer is: ``field`` ("layer" or "layers") and ``ordinal``
    (its index among the net's blocks of that field)."""

    def __init__(self, field, counts):
        list.__init__(self, [None])
        self.field, self.ordinal = field, counts.get(field, 0)
        counts[field] = self.ordinal + 1


def _tokens(text):
    line, line_start = 1, 0
    for m in _TOK.finditer(text):
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            nl = m.group().count("\n")
            if nl:
                line += nl
                line_start = m.start() + m.group().rindex("\n") + 1
            continue
        yield kind, m.group(), m.start(), m.end(), line, m.start() - line_start + 1


class _Scanner:
    def __init__(self, text):
        self.toks = list(_tokens(text))
        self.i = 0
        self.found = []
        self.duplicates = []   # a second value of a singular field (forks that made it repeated)
        self.bad_values = []   # enum fields whose value the schema's enum lacks (a fork's value)
        self.blocks = {}       # "layer" / "layers" -> top-level blocks of that name seen so far
        self.known = None      # a list: every known field's (descriptor, name, line, col, layer)
        self.spellings = None  # {(message, field)}: singular fields whose list / repeated form
        self.respelled = []    # is recorded (an NdSpelling per message block that so gives one)

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def skip_value(self):
        """Skip one value: a block, a list or a scalar (adjacent strings concatenate)."""
        tok = self.take()
        if tok is None:
            return
        if tok[1] in "{<":
            self.fields(None, "}" if tok[1] == "{" else ">", None)
        elif tok[1] == "[":
            while self.peek() and self.peek()[1] != "]":
                if self.peek()[1] == ",":
                    self.take()
                else:
                    self.skip_value()
            self.take()
        elif tok[0] == "str":
            while self.peek() and self.peek()[0] == "str":
                self.take()

    def fields(self, desc, close, layer, top=False):
        """Read fields until ``close``; ``desc`` None means inside an unknown field (not reported)."""
        seen = set()
        watched = {}          # field -> [(start, line, is_list)] in this block (self.spellings)
        while True:
            tok = self.peek()
            if tok is None or tok[1] == close:
                self.take()
                self._respell(desc, watched, layer)
                return
            kind, word, start, _, line, col = self.take()
            if kind != "word":
                continue                      # malformed: the protobuf parser will report it
            fd = desc.fields_by_name.get(word) if desc is not None else None
            unknown = desc is not None and fd is None and word.lower() not in [
                g.name.lower() for g in desc.fields if g.type == g.TYPE_GROUP]
            rec = Unknown(word, desc.name, line, col, start, layer) if unknown else None
            if fd is not None and self.known is not None:
                self.known.append((desc, word, line, col, layer))
            if fd is not None and field_label(fd) != "repeated":
                if word in seen:
                    rec = Repeated(word, desc.name, line, col, start, layer,
                                   fd.message_type is not None)
                    self.duplicates.append(rec)
                seen.add(word)
            if self.peek() and self.peek()[1] == ":":
                self.take()
            nxt = self.peek()
            if self.spellings and fd is not None and (desc.name, word) in self.spellings:
                watched.setdefault(word, []).append((start, line, bool(nxt and nxt[1] == "[")))
            if nxt and nxt[1] in "{<" and fd is not None and fd.message_type is not None:
                self.take()
                sub_layer = _LayerRef(word, self.blocks) if top and word in (
                    "layer", "layers") else layer
                self.fields(fd.message_type, "}" if nxt[1] == "{" else ">", sub_layer)
            elif nxt and nxt[1] == "[" and fd is not None and fd.message_type is not None:
                self.take()
                while self.peek() and self.peek()[1] != "]":
                    t = self.take()
                    if t[1] in "{<":
                        self.fields(fd.message_type, "}" if t[1] == "{" else ">", layer)
                self.take()
            else:
                value = self.peek()
                first = self.i
                self.skip_value()
                if fd is not None and fd.enum_type is not None:
                    self._check_enum(desc, fd, word, start, first, layer)
                if word == "name" and layer is not None and layer[0] is None and value \
                        and value[0] == "str" and desc is not None and desc.name in (
                            "LayerParameter", "V1LayerParameter", "V0LayerParameter"):
                    layer[0] = value[1][1:-1]
            if self.peek() and self.peek()[1] in ",;":
                self.take()
            if rec is not None:
                rec.end = self.toks[min(self.i, len(self.toks)) - 1][3]
                if unknown:
                    self.found.append(rec)


    def _respell(self, desc, watched, layer):
        """Record the watched singular fields this block gives as a list or more than once."""
        block = min((spots[0][0] for spots in watched.values()), default=None)
        for name, spots in watched.items():
            if len(spots) > 1 or any(is_list for _, _, is_list in spots):
                self.respelled.append(NdSpelling(desc.name, name, spots, layer, block))

    def _check_enum(self, desc, fd, word, start, first, layer):
        """Record ``fd``'s value tokens (from ``first`` on) that its enum does not have."""
        for tok in self.toks[first:self.i]:
            if tok[0] == "word" and not _enum_has(fd.enum_type, tok[1]):
                rec = UnknownValue(word, desc.name, tok[4], tok[5], start, layer, tok[1])
                rec.end = self.toks[self.i - 1][3]
                self.bad_values.append(rec)
                return


def _enum_has(enum, token):
    if token in enum.values_by_name:
        return True
    try:
        return int(token, 0) in enum.values_by_number
    except ValueError:
        return False


class UnknownValue(Unknown):
    """A known enum field holding a value its enum lacks (``value``: the token or number)."""
    __slots__ = ("value", "enum_name")

    def __init__(self, name, message, line, col, start, layer, value):
        Unknown.__init__(self, name, message, line, col, start, layer)
        self.value, self.enum_name = value, ""

    @property
    def harmless(self):
        """Ignoring it changes no math: the field is a memory / precision / engine hint."""
        return self.name in NO_MATH_NAMES or self.name in DECLARED_HINTS.get(self.message, ()) \
            or self.name in SAFE_ENUM_FIELDS

    def where(self):
        return "%s = %s" % (Unknown.where(self), self.value)

    def describe(self, filename, lenient):
        layer = " (layer '%s')" % self.layer[0] if self.layer and self.layer[0] else ""
        loc = "%s:%d:%d" % (filename, self.line, self.col) if self.line else filename
        why = ("; it may change the math, so it is an error even with --ignore-unknown-fields"
               if lenient else "; a fork's value caffepy does not know (the field changes no "
               "math: --ignore-unknown-fields ignores it)" if self.harmless else
               "; a fork's value caffepy does not know, which may change the math")
        what = ("numbered %d" % self.value if isinstance(self.value, int)
                else "named %s" % self.value)
        return "%s: no value %s in enum %s of field %s.%s%s%s" % (
            loc, what, self.enum_name, self.message, self.name, layer, why)


def find_unknown_values(text, descriptor):
    """Every enum field in ``text`` whose value its enum lacks (:class:`UnknownValue` records)."""
    scan = _Scanner(text)
    scan.fields(descriptor, None, None, top=True)
    for rec in scan.bad_values:
        rec.enum_name = _enum_of(descriptor, rec.message, rec.name)
    return scan.bad_values


def _enum_of(root, message, field):
    """The full name of the enum of ``message.field`` (searched from ``root``)."""
    seen, todo = set(), [root]
    while todo:
        d = todo.pop()
        if d.full_name in seen:
            continue
        seen.add(d.full_name)
        if d.name == message and field in d.fields_by_name:
            e = d.fields_by_name[field].enum_type
            return e.full_name.replace("caffe.", "") if e is not None else ""
        todo.extend(f.message_type for f in d.fields if f.message_type is not None)
    return ""


def binary_unknown_values(msg, _path=None):
    """UnknownValue records for enum numbers a binary message holds that the schema's enums lack
    (protobuf keeps them as unknown fields with the enum field's number)."""
    try:
        from google.protobuf import unknown_fields as pb_unknown
    except ImportError:          # protobuf < 4.24: cannot look; nothing reported
        return []
    out = []
    desc = msg.DESCRIPTOR
    name = getattr(msg, "name", None) if desc.name in (
        "LayerParameter", "V1LayerParameter", "V0LayerParameter") else None
    layer = _path if name is None else [name]
    by_number = {f.number: f for f in desc.fields}
    for uf in pb_unknown.UnknownFieldSet(msg):
        fd = by_number.get(uf.field_number)
        if fd is not None and fd.enum_type is not None and uf.wire_type == 0:
            rec = UnknownValue(fd.name, desc.name, 0, 0, 0, layer, uf.data)
            rec.enum_name = fd.enum_type.full_name.replace("caffe.", "")
            out.append(rec)
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            for sub in (value if field_label(fd) == "repeated" else [value]):
                out.extend(binary_unknown_values(sub, layer))
    return out


def find_unknown(text, descriptor):
    """Every field in ``text`` that message ``descriptor`` (or a nested message) lacks."""
    scan = _Scanner(text)
    scan.fields(descriptor, None, None, top=True)
    return scan.found


def known_fields(text, descriptor):
    """(message descriptor, field name, line, column, layer) of every field ``text`` sets that the
    schema knows, in text order; layer is a one-item list holding the enclosing layer's name (None
    outside layers or when the layer has no name)."""
    scan = _Scanner(text)
    scan.known = []
    scan.fields(descriptor, None, None, top=True)
    return [(d, name, line, col, layer[0] if layer else None)
            for d, name, line, col, layer in scan.known]


def find_repeated_singular(text, descriptor):
    """Every second (third ...) value of a singular field in ``text``."""
    scan = _Scanner(text)
    scan.fields(descriptor, None, None, top=True)
    return scan.duplicates


class NdSpelling:
    """A singular field that one message block gives as a list (``kernel_size: [4, 7, 7]``) or
    several times: ``spots`` holds (start offset of the name, line, is_list) of each; ``block``
    tells the block (the offset of its first watched field)."""
    __slots__ = ("message", "name", "spots", "layer", "block")

    def __init__(self, message, name, spots, layer, block):
        self.message, self.name, self.spots, self.block = message, name, spots, block
        self.layer = layer[0] if layer else None


def find_list_spellings(text, descriptor, spellings):
    """:class:`NdSpelling` records for each block of ``text`` that gives one of the singular fields
    ``spellings`` (a set of (message name, field name)) as a list or more than once."""
    scan = _Scanner(text)
    scan.spellings = set(spellings)
    scan.fields(descriptor, None, None, top=True)
    return scan.respelled


def rename(text, spots):
    """``text`` with the field name at each (start, old name, new name) replaced: line numbers are
    kept; later columns of a renamed line shift by the names' difference in length."""
    parts, pos = [], 0
    for start, old, new in sorted(spots):
        if text[start:start + len(old)] != old:
            raise ValueError("no field %r at offset %d" % (old, start))
        parts.append(text[pos:start])
        parts.append(new)
        pos = start + len(old)
    parts.append(text[pos:])
    return "".join(parts)


def blank(text, unknowns):
    """``text`` with each unknown field's span replaced by spaces (newlines kept)."""
    parts, pos = [], 0
    for u in sorted(unknowns, key=lambda u: u.start):
        parts.append(text[pos:u.start])
        parts.append(re.sub(r"[^\n]", " ", text[u.start:u.end]))
        pos = u.end
    parts.append(text[pos:])
    return "".join(parts)
