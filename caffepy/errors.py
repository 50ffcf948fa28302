"""caffepy's error types.

Every error a user can cause (a bad prototxt, a missing blob, a shape mismatch, a bad flag) is a
:class:`CaffeError` whose message is one line naming the file, line, layer and what is wrong. The
``caffepy`` command prints that line and exits 1, never a traceback.
"""
import os
import re


class CaffeError(Exception):
    """A user-facing error: the message is one line, complete on its own."""


class ProtoError(CaffeError):
    """A .prototxt / .caffemodel / .solverstate that cannot be read (file:line:column in the message)."""


class NetError(CaffeError):
    """A net that cannot be built: unknown layer type, missing bottom, bad wiring."""


class ShapeError(NetError):
    """A blob of the wrong shape reaching a layer (layer name, type, expected and received)."""


class SolverError(CaffeError):
    """A solver file with an invalid setting (unknown lr_policy or solver type, ...)."""


class WriteError(CaffeError, OSError):
    """A file that could not be written (disk full, read-only, ...): one line naming the file; the
    file it would have replaced is unchanged. Also an OSError, with ``errno`` set."""

    def __init__(self, message, errno=None):
        super(WriteError, self).__init__(message)
        self.errno = errno

    def __str__(self):
        return self.args[0]


def layer_error(layer_param, message, cls=NetError):
    """Build an error naming the layer: ``layer 'conv1' (Convolution): <message>``."""
    return cls("layer '%s' (%s): %s" % (layer_param.name, layer_param.type, message))


_LAYER_IN_MESSAGE = re.compile(r"layer '([^']*)'")


def locate_layer_error(error, source, occurrence=0):
    """The same error, prefixed with ``file:line`` of the layer it names (when built from a file):
    the ``occurrence``-th layer of that name in the file (0: the first; a net's TRAIN and TEST
    layers often share names), the first when the file has fewer."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isfile(source):
        return error
    where = os.fspath(source)
    m = _LAYER_IN_MESSAGE.search(str(error))
    if m:
        pattern = re.compile(r'\bname\s*:\s*["\']%s["\']' % re.escape(m.group(1)))
        try:
            with open(where, errors="replace") as f:
                lines = [k for k, line in enumerate(f, 1) if pattern.search(line)]
            if lines:
                where = "%s:%d" % (where, lines[occurrence] if occurrence < len(lines)
                                   else lines[0])
        except OSError:
            pass
    hint = error.__dict__.pop("hint_near", None)  # where a missing Python module sits
    located = type(error)("%s: %s%s" % (where, error, hint(source) if hint else ""))
    located.__cause__ = error
    located.__dict__.update(error.__dict__)       # layer_name, a ShapeError's fits, ...
    return located


class _FileErrors(object):
    """``with file_errors(path, what, cls):`` turns the exceptions a damaged file makes a parsing
    library raise (h5py: OSError, KeyError, RuntimeError, ValueError) into one line naming it."""

    def __init__(self, path, what, cls, types):
        self.path, self.what, self.cls, self.types = path, what, cls, types

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if etype is None or issubclass(etype, CaffeError) or not issubclass(etype, self.types):
            return False
        raise self.cls("%s: %s (%s)" % (self.path, self.what, " ".join(str(value).split())[:300])) \
            from None


def file_errors(path, what, cls=CaffeError, types=(OSError, KeyError, RuntimeError, ValueError)):
    return _FileErrors(path, what, cls, types)
