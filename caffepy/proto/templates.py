"""Template placeholders in net text: values a script writes into a file before Caffe reads it.

Some repositories keep their nets as templates: DeepLab's ``num_output: ${NUM_LABELS}`` and
``fc8_${EXP}`` (its run scripts substitute shell variables), FlowNet's ``$TARGET_WIDTH`` /
``$ADAPTED_HEIGHT`` (``run-flownet.py`` fills them from the images), Jinja's
``{{ conv1_num_output }}``. Caffe's parser refuses such a file until the values are in.

``--define NAME=VALUE`` (repeatable; train / test / time / summary / draw,
:func:`defined` around code) writes VALUE wherever the text names the placeholder NAME, in any of
the forms ``${NAME}``, ``$NAME``, ``{{ NAME }}``, and ``{NAME}`` given as a field's value, inside
quoted strings too (as the scripts' substitution does), before any reading, strict or not: the
text is then the net the script would have written. A placeholder left undefined stays Caffe's
parse error for the strict readers; the lenient readings of :mod:`caffepy.proto.lenient_text`
(``summary`` / ``draw`` without ``--strict``) leave its field unset, except ``num_output``, which
takes the class count (``--num-classes N``, else a stand-in of
:data:`caffepy.proto.digits.STAND_IN`), and MobileNet-SSD's bare ``cls1x`` / ``cls3x`` / ``cls6x``
(its ``gen_model.sh`` writes 1, 3 and 6 times the class count), all named in one WARNING.
"""
import contextlib
import contextvars
import re

from ..errors import CaffeError

_DEFINES = contextvars.ContextVar("caffepy_template_defines", default=())
_NAME = re.compile(r"[A-Za-z_]\w*\Z")


def parse_define(text):
    """``NAME=VALUE`` (the flag's argument) as (NAME, VALUE); a CaffeError when malformed."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise CaffeError("--define expects NAME=VALUE with NAME a placeholder's name (letters, "
                         "digits, '_'), got '%s'" % text)
    return name, value


@contextlib.contextmanager
def defined(pairs):
    """Within the block, net text is read with the placeholders ``pairs`` ((NAME, VALUE) or
    "NAME=VALUE" items; None: none) written in."""
    items = tuple(parse_define(p) if isinstance(p, str) else tuple(p) for p in (pairs or ()))
    token = _DEFINES.set(items)
    try:
        yield
    finally:
        _DEFINES.reset(token)


def _pattern(name):
    n = re.escape(name)
    return re.compile(r"\$\{\s*%s\s*\}|\$%s(?!\w)|\{\{\s*%s\s*\}\}|(?<=:)(\s*)\{%s\}" % (n, n, n, n))


def substitute(text):
    """``text`` with every defined placeholder (:func:`defined`) written in."""
    for name, value in _DEFINES.get():
        text = _pattern(name).sub(lambda m: (m.group(1) or "") + value, text)
    return text
