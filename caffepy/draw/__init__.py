"""Drawing nets (pycaffe's ``caffe.draw``) and the net-structure JSON dump.

``draw_net(net_param, rankdir, ext='png', phase=None, display_lrm=False)`` returns image bytes and
``draw_net_to_file(net_param, filename, rankdir='LR', phase=None, display_lrm=False)`` writes a file
whose extension picks the format (.png, .svg, .pdf; .dot / .gv / .raw give the Graphviz source).
``write_net_json(net_or_param, path)`` writes ``net.json`` (docs/netjson.md). Graphviz is imported
only when an image is rendered.
"""
import os

from .netjson import (annotate_partition, dumps, net_json, read_net_json, select_phase,  # noqa: F401
                      write_net_json, SCHEMA, VERSION)
from .render import FORMATS, RANKDIRS, find_engine, graph_depth, to_dot  # noqa: F401
from .render import render as render_dot  # noqa: F401  (caffepy.draw.render stays the module)


def get_dot(net_param, rankdir="LR", phase=None, display_lrm=False, label_edges=True):
    """The Graphviz DOT source (str) for a NetParameter, prototxt path or built Net."""
    return to_dot(net_json(net_param, phase=phase), rankdir=rankdir, display_lrm=display_lrm,
                  label_edges=label_edges)


def draw_net(caffe_net, rankdir, ext="png", phase=None, display_lrm=False):
    """Draw a net; returns the image encoded as ``ext`` (bytes). ``phase``: TRAIN, TEST or None (all)."""
    return render_dot(get_dot(caffe_net, rankdir, phase, display_lrm), ext)


def draw_net_to_file(caffe_net, filename, rankdir="LR", phase=None, display_lrm=False):
    """Draw a net to ``filename``; the extension picks the format."""
    from ..proto.io import atomic_write
    ext = os.path.splitext(os.fspath(filename))[1].lstrip(".") or "png"
    atomic_write(filename, draw_net(caffe_net, rankdir, ext, phase=phase, display_lrm=display_lrm))
