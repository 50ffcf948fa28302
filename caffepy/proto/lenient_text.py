"""Lenient readings of protobuf text that Caffe's parser refuses, tried by
:func:`caffepy.proto.io.parse_text` after the strict parse failed.

Rules (each applies only when not strict: ``strict=False``, or ``strict=None`` under
:func:`caffepy.proto.unknown_fields.lenient`; strict reading keeps the parser's error; under
:func:`text_repairs` they apply to strict readers too, whose unknown fields stay errors):

* a singular field given more than once takes its last value, as protobuf's text ``Merge`` does
  (:func:`take_last_scalars`), with one WARNING naming each repeat; not when a repeated one holds
  a message (a brace left out, most likely): that stays the parser's error;
* V1 ``layers`` blocks whose ``type`` is a current name in quotes (:func:`has_quoted_v1_types`)
  are read with those names as their V1 values, else with the ``layers`` blocks as ``layer``
  blocks (:func:`caffepy.proto.fork_text.respell_quoted_v1_types`), the first reading that parses,
  with one WARNING; when none parses, the last reading's error is raised (the parser's when there
  is no reading to try).

* values Caffe's parser cannot read in place of a scalar (:func:`read_repaired`): a template
  placeholder (``${NAME}``, ``$NAME``, ``{{name}}``, ``{name}``: a file written for a script to
  fill in, :mod:`caffepy.proto.templates`) leaves its field unset (``num_output`` takes the class
  count, or a stand-in), ``true`` / ``false`` given to an integer field (a fork
  declares it bool, another int) is read as 1 / 0, a bare word given to a string field is read
  as that string, ``//`` comments are read as comments, a git merge conflict left in the file
  is read as its first side (the ``<<<<<<<`` one) and a bracketed list of numbers without commas
  (``input_dim: [1 3 224 224]``) as the list; one WARNING lists them.

Text too malformed or too deeply nested for the scans is left to the parser's error. The WARNING
lines are the readers' (logger ``caffepy.proto.io``).
"""
import contextlib
import contextvars
import logging
import re

from ..errors import ProtoError
from . import unknown_fields as _unknown

_log = logging.getLogger("caffepy.proto.io")

_TAKE_LAST = contextvars.ContextVar("caffepy_take_last_scalar", default=False)
_QUOTED_V1_TYPE = re.compile(r'(^|[\s}])layers\s*\{[^{}]*?\btype\s*:\s*["\']')
_REPAIRING = contextvars.ContextVar("caffepy_repairing_values", default=False)
_PLACEHOLDER = re.compile(r'(?<![\w"\'$])([A-Za-z_]\w*)\s*:\s*(\$\{[^}\n]*\}|\$[A-Za-z_]\w*|'
                          r'\{\{[^}\n]*\}\}|\{[A-Za-z_]\w*\})')
_TEXT_REPAIRS = contextvars.ContextVar("caffepy_text_repairs", default=False)
_AT = re.compile(r":(\d+):(\d+): (.*)$")
MAX_REPAIRS = 200
#: chuanqi305/MobileNet-SSD's templates (template/*.prototxt): gen_model.sh CLASSNUM writes the
#: class count for ``cls1x`` and 3 and 6 times it for ``cls3x`` and ``cls6x`` (sed).
_CLASS_MULTIPLE = re.compile(r"cls(\d+)x\Z")
_CONFLICT = re.compile(r"(<{7}|\|{7}|={7}|>{7})(\s|$)")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _strict(strict):
    if _TEXT_REPAIRS.get():
        return False
    return _unknown.strict_default() if strict is None else strict


@contextlib.contextmanager
def text_repairs():
    """Within the block, the readings of this module apply whatever the reader's ``strict`` (the
    text read as ``caffepy summary`` reads it, each with its WARNING); fields the schema lacks are
    still what ``strict`` says. For runs that build what summary builds (caffepy.zoo.read_for_run);
    Net, caffe.Net and the train / test / time commands read as Caffe's parser does."""
    token = _TEXT_REPAIRS.set(True)
    try:
        yield
    finally:
        _TEXT_REPAIRS.reset(token)


def takes_last():
    """Whether the text being read takes the last value of a singular field given twice."""
    return _TAKE_LAST.get()


@contextlib.contextmanager
def taking_last():
    """Within the block, :func:`takes_last` is true."""
    token = _TAKE_LAST.set(True)
    try:
        yield
    finally:
        _TAKE_LAST.reset(token)


def take_last_scalars(text, msg, filename, strict):
    """Whether ``text``, whose singular fields repeat, is read with the last value of each (as
    protobuf's text Merge does): not when strict (Caffe's parser refuses it) nor when a repeated
    one holds a message (a brace left out, most likely); one WARNING names them when it is."""
    if takes_last() or _strict(strict):
        return False
    try:
        dups = _unknown.find_repeated_singular(text, msg.DESCRIPTOR)
    except (IndexError, ValueError, RecursionError):   # too malformed / deep to scan
        return False
    if not dups or any(d.block for d in dups):
        return False
    _log.warning("%s: %d singular field(s) given more than once, the last value taken (Caffe "
                 "refuses this, --strict too): %s", filename, len(dups),
                 "; ".join(d.where() for d in dups))
    return True


def has_quoted_v1_types(text):
    """Whether ``text`` has a V1 ``layers`` block whose ``type`` is given in quotes."""
    return _QUOTED_V1_TYPE.search(text) is not None


def read_quoted_v1_types(text, msg, filename, strict, error, parse):
    """A V1 ``layers`` block whose type is a current name in quotes: when not strict, ``msg`` read
    by ``parse(respelled text)`` with those names as their V1 values, else with the ``layers``
    blocks as ``layer`` blocks, with one WARNING; otherwise ``error``."""
    from .fork_text import quoted_v1_types_note, respell_quoted_v1_types
    if _strict(strict):
        raise error
    try:
        readings = respell_quoted_v1_types(text, filename)
    except (IndexError, ValueError, RecursionError):   # too malformed / deep to scan
        readings = []
    for respelled, how in readings:
        msg.Clear()
        try:
            parse(respelled)
        except ProtoError as e:
            error = e
            continue
        quoted_v1_types_note(text, filename, how)
        return msg
    raise error


def _placeholder(field, value, line, spot, notes):
    """The text put in place of ``spot`` ("field: placeholder" on ``line``), noted in ``notes``:
    blanks (the field left unset), except ``num_output``, which takes the class count, and
    MobileNet-SSD's ``clsNx`` (:data:`_CLASS_MULTIPLE`), which takes N times it in any field."""
    from .digits import STAND_IN, _COUNT
    count = _COUNT.get()
    multiple = _CLASS_MULTIPLE.match(value)
    if multiple:
        n = int(multiple.group(1))
        notes.append("line %d %s: %s (MobileNet-SSD's template: %d x the class count, %s)" % (
            line, field, value, n, "%d" % count if count else
            "a stand-in of %d; --num-classes N gives it" % STAND_IN))
        return "%s: %d" % (field, n * (count or STAND_IN))
    if field == "num_output":
        notes.append("line %d num_output: %s (template placeholder: %s)" % (
            line, value, "the class count %d" % count if count else
            "a stand-in class count of %d; --num-classes N or --define NAME=N gives it"
            % STAND_IN))
        return "num_output: %d" % (count or STAND_IN)
    notes.append("line %d %s: %s (template placeholder: left unset; --define NAME=VALUE gives "
                 "it)" % (line, field, value))
    return " " * len(spot)


def _blank_placeholders(text, notes):
    """Placeholders (caffepy.proto.templates) put right by :func:`_placeholder`."""
    return _PLACEHOLDER.sub(lambda m: _placeholder(
        m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1, m.group(0), notes), text)


def _blank_slash_comments(text, notes):
    """``text`` with every ``//`` comment (outside quotes) blanked to the end of its line."""
    out, count = [], 0
    for row in text.split("\n"):
        quote, k = None, 0
        while k < len(row):
            c = row[k]
            if quote:
                k += 2 if c == "\\" else 1
                quote = None if c == quote else quote
                continue
            if c in "\"'":
                quote = c
            elif c == "#":
                break
            elif row.startswith("//", k):
                row, count = row[:k] + " " * (len(row) - k), count + 1
                break
            k += 1
        out.append(row)
    notes.append("%d '//' comment(s) read as comments" % count)
    return "\n".join(out)


def _first_sides(lines, notes):
    """The text with each git merge conflict (``<<<<<<<`` ours, optionally ``|||||||`` base,
    ``=======`` theirs, ``>>>>>>>``) replaced by its first side, as blank lines (the other lines
    keep their numbers); None when a conflict is not closed."""
    out, side, count = [], None, 0
    for row in lines:
        mark = _CONFLICT.match(row)
        kind = mark.group(1)[0] if mark else None
        if kind == "<" and side is None:
            side, count = "ours", count + 1
        elif kind in ("|", "=") and side is not None:
            side = "other"
        elif kind == ">" and side is not None:
            side = None
        elif side != "other":
            out.append(row)
            continue
        out.append("")
    if side is not None or not count:
        return None
    notes.append("%d git merge conflict(s) read as their first side (<<<<<<<)" % count)
    return "\n".join(out)


def _repair_list(row, col, line, notes):
    """``row`` with the bracketed list at or after column ``col`` given commas where its values
    are separated by blanks only (``input_dim: [1 3 224 224]``), or None."""
    start = row.rfind("[", 0, col)
    end = row.find("]", start + 1)
    if start < 0 or end < 0:
        return None
    values = row[start + 1:end].split()
    if len(values) < 2 or not all(_NUMBER.match(v) for v in values):
        return None
    notes.append("line %d: [%s] read as a list of %d values" % (line, " ".join(values),
                                                               len(values)))
    return row[:start + 1] + ", ".join(values) + row[end:]


def _repair_once(text, error, notes, first):
    """``text`` with the values :func:`read_repaired` reads put right, or None."""
    if first and _PLACEHOLDER.search(text):
        return _blank_placeholders(text, notes)
    m = _AT.search(str(error))
    if m is None:
        return None
    line, col, what = int(m.group(1)), int(m.group(2)), m.group(3)
    lines = text.split("\n")
    if not 0 < line <= len(lines):
        return None
    row = lines[line - 1]
    if row[col - 1:].startswith("//") and not any("comment(s)" in n for n in notes):
        return _blank_slash_comments(text, notes)
    if _CONFLICT.match(row):
        return _first_sides(lines, notes)
    if what.rstrip().endswith('Expected ","'):
        listed = _repair_list(row, col, line, notes)
        if listed is not None:
            lines[line - 1] = listed
            return "\n".join(lines)
    named = re.search(r"Couldn't parse (?:integer|float|double|number)[^:]*: ([A-Za-z_]\w*)", what)
    if named and named.group(1) not in ("true", "false"):      # a bare word as a placeholder
        field = re.search(r"([A-Za-z_]\w*)\s*:\s*%s\b" % re.escape(named.group(1)), row)
        if field is None:
            return None
        lines[line - 1] = row[:field.start()] + _placeholder(
            field.group(1), named.group(1), line, field.group(0), notes) + row[field.end():]
        return "\n".join(lines)
    bool_int = re.search(r"Couldn't parse integer: (true|false)\b", what)
    bare = re.search(r"Expected string but found: '([A-Za-z_][\w.\-]*)'", what)
    word = (bool_int or bare).group(1) if bool_int or bare else None
    if word is None:
        return None
    at = col - 1 if row[col - 1:col - 1 + len(word)] == word else row.find(word)
    if at < 0:
        return None
    if bool_int:
        value = ("1" if word == "true" else "0").ljust(len(word))
        notes.append("line %d: %s read as %d (an integer field)" % (line, word, word == "true"))
    else:
        value = '"%s"' % word
        notes.append("line %d: %s read as the string \"%s\"" % (line, word, word))
    lines[line - 1] = row[:at] + value + row[at + len(word):]
    return "\n".join(lines)


def _template_hint(error):
    """``error``, naming the way out when the text it quotes is a template placeholder."""
    m = _PLACEHOLDER.search(str(error))
    if m is None or _REPAIRING.get():
        return error
    name = re.sub(r"[^\w]", "", m.group(2)) or "NAME"
    return ProtoError("%s; a template placeholder: --define %s=VALUE gives its value"
                      % (str(error).rstrip(), name))


def read_repaired(text, msg, filename, strict, error, parse):
    """When not strict: ``msg`` read by ``parse`` from ``text`` with its template placeholders
    blanked and its ``true`` / ``false`` integers read as 1 / 0 (module doc), one WARNING naming
    each; otherwise, or when nothing could be put right, ``error``."""
    if _strict(strict) or _REPAIRING.get():
        raise _template_hint(error)
    notes, token = [], _REPAIRING.set(True)
    try:
        for attempt in range(MAX_REPAIRS):
            repaired = _repair_once(text, error, notes, attempt == 0)
            if repaired is None:
                raise error
            text = repaired
            msg.Clear()
            try:
                parse(text)
            except ProtoError as e:
                error = e
                continue
            _log.warning("%s: text Caffe's parser refuses was read leniently in %d place(s) "
                         "(--strict refuses them): %s", filename, len(notes), "; ".join(notes))
            return msg
        raise error
    finally:
        _REPAIRING.reset(token)
