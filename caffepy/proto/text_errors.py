"""Parse errors of protobuf text as one line: ``file:line:column: what (layer 'name')``.

Rules:

* protobuf's ``line:column : message`` becomes ``file:line:column: what``; an error protobuf
  gives without a place is ``file: what``;
* the schema's package (``caffe.``) is dropped from message and enum names, white space is
  collapsed and a final period removed; an unknown field reads ``no field named "f" in Message``
  and an unknown enum value ``no value named V in enum Enum``;
* in a NetParameter, the name of the top-level ``layer`` / ``layers`` block that holds the line
  is appended (``(layer 'conv1')``) when the block has a name, found by a token scan of the text
  that skips strings and comments;
* :func:`parse_located` parses with protobuf's ``Parse``, or with ``Merge`` (a singular field given
  more than once takes its last value) when asked; either way an unknown extension is an error.
"""
import re

from google.protobuf import text_format

from ..errors import ProtoError

_LOC = re.compile(r"^(\d+):(\d+)\s*:\s*(.*)$", re.S)
_NO_FIELD = re.compile(r'Message type "caffe\.([\w.]+)" has no field named "(\w+)"')
_NO_ENUM = re.compile(r'Enum type "caffe\.([\w.]+)" has no value named (\w+)')
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[{}:]|[A-Za-z_]\w*|\n')
_NAME_PATHS = (("layer",), ("layers",), ("layers", "layer"))


def layer_at(text, line_no):
    """Name of the top-level ``layer``/``layers`` block that holds line ``line_no`` (1-based)."""
    line, stack, prev = 1, [], []
    block = None          # [first line, name] of the top-level block being read
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "\n":
            line += 1
            continue
        if tok[0] == "#":
            continue
        if tok == "{":
            key = prev[-1] if prev and prev[-1] != ":" else (prev[-2] if len(prev) > 1 else "")
            stack.append(key)
            if len(stack) == 1:
                block = [line, None] if key in ("layer", "layers") else None
        elif tok == "}":
            if stack:
                stack.pop()
            if not stack:
                if block and block[0] <= line_no <= line:
                    return block[1]
                block = None
        elif tok[0] in "\"'" and block and block[1] is None and tuple(stack) in _NAME_PATHS \
                and prev[-2:] == ["name", ":"]:
            block[1] = tok[1:-1]
        if line > line_no and not stack:
            break
        prev = (prev + [tok])[-2:]
    if block and block[0] <= line_no:
        return block[1]
    return None


def explain(what):
    """protobuf's text of a parse error, said in the schema's own names (see the module doc)."""
    m = _NO_FIELD.search(what)
    if m:
        return 'no field named "%s" in %s' % (m.group(2), m.group(1))
    m = _NO_ENUM.search(what)
    if m:
        return "no value named %s in enum %s" % (m.group(2), m.group(1))
    return " ".join(what.replace("caffe.", "").split()).rstrip(".")


def parse_located(text, msg, filename, merge=False):
    """Parse ``text`` into ``msg`` (protobuf's ``Merge`` when ``merge``, else ``Parse``); a parse
    error is a one-line ProtoError ``file:line:column: what (layer 'x')``."""
    parse = text_format.Merge if merge else text_format.Parse
    try:
        parse(text, msg, allow_unknown_extension=False)
    except text_format.ParseError as e:
        m = _LOC.match(str(e))
        if not m:
            raise ProtoError("%s: %s" % (filename, explain(str(e))))
        line, col, what = m.groups()
        layer = layer_at(text, int(line)) if msg.DESCRIPTOR.name == "NetParameter" else None
        where = " (layer '%s')" % layer if layer else ""
        raise ProtoError("%s:%s:%s: %s%s" % (filename, line, col, explain(what), where))
    return msg
