"""The schema a net file's own repository holds.

A Caffe fork keeps its ``caffe.proto`` in its tree (``src/caffe/proto/caffe.proto``) and its nets
beside it (``models/``, ``examples/``). When a file sets a field caffepy's schema lacks, the
error line says which of those schema files declares it, so the user knows what to give
``--proto`` (:mod:`caffepy.proto.user_schema`): :func:`declaring_schema` looks in the file's
directory and up to :data:`MAX_LEVELS` directories above it, at the places forks keep the file
(:data:`PLACES`), and reads at most :data:`MAX_BYTES` of each. A text scan: ``message M { ...
type name = N ... }``, braces matched, comments removed; nothing is compiled.
"""
import os
import re

MAX_LEVELS = 8
MAX_BYTES = 4 << 20
PLACES = (("src", "caffe", "proto", "caffe.proto"), ("caffe", "proto", "caffe.proto"),
          ("proto", "caffe.proto"), ("caffe.proto",))
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def declaring_schema(net_path, field, message=None):
    """The path of the first schema file found (module doc) that declares a field ``field`` in
    message ``message`` (anywhere when ``message`` is None), else None."""
    if not isinstance(net_path, str) or not net_path or net_path.startswith("<"):
        return None
    folder = os.path.dirname(os.path.abspath(net_path))
    for _ in range(MAX_LEVELS + 1):
        for place in PLACES:
            path = os.path.join(folder, *place)
            if os.path.isfile(path) and declares(_read(path), field, message):
                return path
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def declares(text, field, message=None):
    """Whether schema ``text`` declares a field named ``field`` (in message ``message``, at any
    depth of nesting, when given)."""
    text = _COMMENT.sub(" ", text)
    decl = re.compile(r"[\s;{}]%s\s*=\s*\d+" % re.escape(field))
    if message is None:
        return bool(decl.search(text))
    for m in re.finditer(r"\bmessage\s+%s\s*\{" % re.escape(message), text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if decl.search(_top_level(text[m.end():i - 1])):
            return True
    return False


def _top_level(body):
    """``body`` without its nested message and enum blocks (a nested message's field is not the
    outer message's; a ``oneof``'s fields are)."""
    out, stack, last = [], [], 0
    for m in re.finditer(r"\b(message|enum|oneof)\s+\w+\s*\{|\{|\}", body):
        if not any(k in ("message", "enum") for k in stack):
            out.append(body[last:m.start()])
        if m.group(1):
            stack.append(m.group(1))
        elif m.group(0) == "{":
            stack.append("{")
        elif stack:
            stack.pop()
        last = m.end()
    if not any(k in ("message", "enum") for k in stack):
        out.append(body[last:])
    return " ".join(out)


def hint(net_path, field, message=None):
    """``"; PATH declares it: --proto PATH"`` for the error line, or ``""``."""
    path = declaring_schema(net_path, field, message)
    if path is None:
        return ""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    shown = rel if len(rel) < len(path) else path
    return "; the repository's own schema %s declares it: --proto %s" % (shown, shown)
