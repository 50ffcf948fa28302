"""Python data layers in ``caffepy summary``: kept, or replaced like any reader without its data.

A Python layer without bottoms reads its tops from outside the net. :func:`python_data_layers`
keeps one whose module imports (or that caffepy's built-in stand-in implements) and whose own
``setup``, run on its own (it has no bottoms), works: its tops have the shapes it gives them.
Any other is replaced, as every data layer whose source is absent, by an Input layer whose sizes
the input-size search guesses (:mod:`caffepy.zoo.input_search`): the first top an image
N x C x H x W, the others labels by their names, all open to the search and to the rules of
:mod:`caffepy.zoo.label_shapes`; in lenient and strict mode alike. The reasons: its module does
not import (absent, or failing as it imports), its class is missing, caffepy's stand-in does not
take this file's form of the layer, or its setup fails (typically an IOError or KeyError
reading a list file or data set the repository does not ship). :func:`replaced_notes` makes
one note line per replaced layer of the net shown: why, the shapes it was given and the
``--input`` flags that set them. A layer all of whose tops are given with ``--input`` is
replaced by those shapes and not set up.
"""
import importlib

from ..proto import caffe_pb2
from . import is_data_layer


def importable(lp):
    """Whether ``lp.python_param.module`` imports."""
    try:
        importlib.import_module(lp.python_param.module)
        return True
    except Exception:
        return False


def _one_line(text, limit=240):
    return " ".join(str(text).split())[:limit]


def _why_not(lp, phase):
    """None when the Python data layer ``lp`` can be set up here on its own, else why not (one
    line)."""
    from ..errors import CaffeError
    from ..layers.base import create_layer, new_top_blob, shapes_only
    from ..layers.python_layer import PythonLayerError, builtin_layer_class, exception_text
    from ..layers.python_layer import user_code_location
    pp = lp.python_param
    stand_in = builtin_layer_class(pp.module, pp.layer) is not None
    if not stand_in:
        try:
            importlib.import_module(pp.module)
        except Exception as e:
            return "python_param.module '%s' is not importable (%s)" % (pp.module, _one_line(
                e if isinstance(e, ImportError) else "%s: %s" % (type(e).__name__, e)))
    param = caffe_pb2.LayerParameter()
    param.CopyFrom(lp)
    if not param.HasField("phase"):
        param.phase = phase
    prefix = "layer '%s' (%s): " % (lp.name, lp.type)
    try:
        with shapes_only():
            layer = create_layer(param, phase=phase)
            layer.setup([], [new_top_blob(layer.dtype) for _ in lp.top])
    except PythonLayerError as e:
        where = user_code_location(e.original)
        return "its %s failed (%s: %s%s)" % (e.phase, type(e.original).__name__,
                                             exception_text(e.original),
                                             ", %s" % where if where else "")
    except CaffeError as e:
        text = _one_line(e)
        text = text[len(prefix):] if text.startswith(prefix) else text
        if stand_in and not importable(lp):
            return ("python_param.module '%s' is not importable and caffepy's stand-in for it "
                    "does not take this file's form of the layer (%s)" % (pp.module, text))
        return "it cannot be set up here (%s)" % text
    except Exception as e:
        return "its setup failed (%s: %s)" % (type(e).__name__, _one_line(e))
    return None


def python_data_layers(param, inputs, phase, cache=None):
    """(indices of the Python data layers (no bottoms) of ``param`` to keep as they are,
    {index: why} of those to replace) (module doc). A layer all of whose tops ``inputs`` gives
    is in neither. ``cache``: a dict kept across calls, so a layer is set up once."""
    cache = {} if cache is None else cache
    keep, replace = [], {}
    for i, lp in enumerate(param.layer):
        if lp.type != "Python" or not is_data_layer(lp):
            continue
        if all(t in inputs for t in lp.top):
            continue
        key = (lp.SerializeToString(), phase)
        if key not in cache:
            cache[key] = _why_not(lp, phase)
        if cache[key] is None:
            keep.append(i)
        else:
            replace[i] = cache[key]
    return keep, replace


def replaced_notes(param, replace, net, inputs):
    """One line per layer of ``replace`` ({index in ``param``: why}) that ``net`` shows: why it
    was replaced, the shapes its tops were given, and the --input flags that set them."""
    from ..net.passes import layer_included, make_state
    state, lines = make_state(param, net.phase), []
    for i, why in sorted(replace.items()):
        lp = param.layer[i]
        if not layer_included(lp, state) or lp.name not in net.layer_dict:
            continue
        given = [t for t in lp.top if t in net.blobs and t not in inputs]
        shapes = ", ".join("%s %s" % (t, " x ".join(str(d) for d in net.blobs[t].shape))
                           for t in given)
        flags = " ".join("--input %s=N,C,H,W" % t if j == 0 else "--input %s=N,..." % t
                         for j, t in enumerate(lp.top) if t in given)
        lines.append("layer '%s' (Python): %s; replaced by an Input layer of guessed sizes "
                     "(%s): give them with %s" % (lp.name, why, shapes, flags))
    return lines
