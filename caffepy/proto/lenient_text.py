"""Lenient readings of protobuf text that Caffe's parser refuses, tried by
:func:`caffepy.proto.io.parse_text` after the strict parse failed.

Rules (each applies only when not strict: ``strict=False``, or ``strict=None`` under
:func:`caffepy.proto.unknown_fields.lenient`; strict reading keeps the parser's error):

* a singular field given more than once takes its last value, as protobuf's text ``Merge`` does
  (:func:`take_last_scalars`), with one WARNING naming each repeat; not when a repeated one holds
  a message (a brace left out, most likely): that stays the parser's error;
* V1 ``layers`` blocks whose ``type`` is a current name in quotes (:func:`has_quoted_v1_types`)
  are read with those names as their V1 values, else with the ``layers`` blocks as ``layer``
  blocks (:func:`caffepy.proto.upgrade.respell_quoted_v1_types`), the first reading that parses,
  with one WARNING; when none parses, the last reading's error is raised (the parser's when there
  is no reading to try).

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


def _strict(strict):
    return _unknown.strict_default() if strict is None else strict


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
    from .upgrade import quoted_v1_types_note, respell_quoted_v1_types
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
