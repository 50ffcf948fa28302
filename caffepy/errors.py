"""caffepy's error types.

Every error a user can cause (a bad prototxt, a missing blob, a shape mismatch, a bad flag) is a
:class:`CaffeError` whose message is one line naming the file, line, layer and what is wrong. The
``caffepy`` command prints that line and exits 1, never a traceback.
"""


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


def layer_error(layer_param, message, cls=NetError):
    """Build an error naming the layer: ``layer 'conv1' (Convolution): <message>``."""
    return cls("layer '%s' (%s): %s" % (layer_param.name, layer_param.type, message))
