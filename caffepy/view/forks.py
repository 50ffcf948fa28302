"""Where a layer's type and fields come from, when a Caffe fork rather than BVLC defines them.

:func:`of_layer` returns short lines for the page's side panel: the fork family implementing the
layer's type (the first line of its ``caffepy.forks.<family>`` package's doc), a type no layer
registers, and each field the layer sets that caffe.proto declares only for public forks (the
harvest table of :mod:`caffepy.proto.harvest_policy`, with the forks that define it).
"""
import importlib

from ..proto import field_label
from ..proto.harvest_policy import COMPUTED, table

_MODULE_DOC = {}
LONGEST = 240


def _module_line(module):
    """The first paragraph of a ``caffepy.forks`` module's doc (shortened), else None."""
    if not module.startswith("caffepy.forks."):
        return None
    if module not in _MODULE_DOC:
        doc = (importlib.import_module(module).__doc__ or "").strip().split("\n\n")[0]
        text = " ".join(doc.split()).replace("``", "") or module.split(".")[2]
        _MODULE_DOC[module] = text if len(text) <= LONGEST else text[:LONGEST - 3] + "..."
    return _MODULE_DOC[module]


def type_origin(layer_type):
    """A line saying which fork a layer type comes from; None for BVLC's own layers."""
    from ..layers.base import _REGISTRY, has_layer_type
    if not has_layer_type(layer_type):
        return "type '%s': no caffepy layer (a fork's; a plug-in: --layers MODULE)" % layer_type
    line = _module_line(getattr(_REGISTRY[layer_type], "__module__", ""))
    return "type %s: %s" % (layer_type, line) if line else None


def _fields(msg, out):
    harvest = table()
    name = msg.DESCRIPTOR.full_name.split(".", 1)[-1]
    for fd, value in msg.ListFields():
        key = "%s.%s" % (name, fd.name)
        entry = harvest.get(key)
        if entry is not None and key not in COMPUTED:
            forks = list(entry.get("forks", ()))[:3]
            more = entry.get("count", len(forks)) - len(forks)
            out.append("field %s: declared by forks (%s%s)" % (key, ", ".join(forks),
                                                              ", +%d" % more if more > 0 else ""))
        if fd.message_type is not None:
            for sub in (value if field_label(fd) == "repeated" else [value]):
                _fields(sub, out)


def of_layer(lp):
    """Lines for a LayerParameter: its type's fork and its fork-only fields (may be empty)."""
    out = []
    line = type_origin(lp.type)
    if line:
        out.append(line)
    _fields(lp, out)
    return out
