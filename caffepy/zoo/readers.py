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
replaced by those shapes and not set up. A layer whose setup failed only after it had given
every top a shape (a loader that reshapes its tops, then opens its list file) declared those
shapes itself: ``declared`` receives them, and the summary is built with them first
(:func:`with_declared`), falling back to the search when the net refuses them. So do the shapes
a layer's ``setup`` writes as literals in its source (:mod:`caffepy.zoo.setup_source`), read
when the module does not import here or its setup fails before it shapes every top.
"""
from ..proto import caffe_pb2
from . import is_data_layer


def importable(lp):
    """Whether ``lp.python_param.module`` imports (as the Python layer imports it)."""
    from ..layers.python_layer import import_user_module
    try:
        import_user_module(lp.python_param.module)
        return True
    except Exception:
        return False


def _one_line(text, limit=240):
    return " ".join(str(text).split())[:limit]


PLACEHOLDER = "its image size changes with every minibatch"


class _Tops(list):
    """The top blobs a setup was given, and whether its stand-in called their shapes
    placeholders."""
    placeholder = False


def _why_not(lp, phase):
    """(None, None, None) when the Python data layer ``lp`` can be set up here on its own, else
    (why not, in one line; the top shapes its setup gave before it failed, else those its
    setup's source writes as literals (:mod:`caffepy.zoo.setup_source`), else None; whether
    they were read from the source). A built-in stand-in whose setup shapes are placeholders
    (``placeholder_shapes``: py-faster-rcnn's RoIDataLayer, sized by each minibatch's images) is
    replaced too, its setup's shapes declared: the net is built with them first, then searched."""
    from .setup_source import setup_shapes
    tops = _Tops()
    why = _why_not_setup(lp, phase, tops)
    shapes = [tuple(t.shape) for t in tops]
    if why is None and getattr(tops, "placeholder", False):
        why = "%s (its setup gives %s)" % (PLACEHOLDER, " x ".join(str(d) for d in shapes[0]))
    given = why is not None and len(shapes) == len(lp.top) and shapes and \
        all(len(sh) and all(d > 0 for d in sh) for sh in shapes)
    if why is None or given:
        return why, (shapes if given else None), False
    read = setup_shapes(lp.python_param.module, lp.python_param.layer, len(lp.top))
    return why, read, read is not None


def _why_not_setup(lp, phase, tops):
    """:func:`_why_not`'s reason; ``tops`` receives the top blobs the setup was given."""
    from ..errors import CaffeError
    from ..layers.base import create_layer, new_top_blob, shapes_only
    from ..layers.python_layer import PythonLayerError, builtin_layer_class, exception_text
    from ..layers.python_layer import import_user_module, user_code_location
    pp = lp.python_param
    stand_in = builtin_layer_class(pp.module, pp.layer) is not None
    if not stand_in:
        try:
            import_user_module(pp.module)
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
            tops.extend(new_top_blob(layer.dtype) for _ in lp.top)
            layer.setup([], tops)
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
    if getattr(getattr(layer, "py_layer", None), "placeholder_shapes", False):
        tops.placeholder = True
    return None


def python_data_layers(param, inputs, phase, cache=None, declared=None, sourced=None):
    """(indices of the Python data layers (no bottoms) of ``param`` to keep as they are,
    {index: why} of those to replace) (module doc). A layer all of whose tops ``inputs`` gives
    is in neither. ``cache``: a dict kept across calls, so a layer is set up once.
    ``declared``: a dict that receives {top: shape} of the replaced layers whose setup shaped
    every top before it failed, or whose setup's source writes every top's shape; ``sourced``:
    a set that receives the names of the layers whose shapes were read from the source."""
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
        why, shapes, read = cache[key]
        if why is None:
            keep.append(i)
        else:
            replace[i] = why
            if declared is not None and shapes:
                declared.update((t, sh) for t, sh in zip(lp.top, shapes) if t not in inputs)
                if read and sourced is not None:
                    sourced.add(lp.name)
    return keep, replace


def with_declared(summarize, original, inputs, declared, replace, options, sourced=()):
    """``summarize(original, inputs + declared, **options)`` with a note for each layer of
    ``replace`` ({index: why}) whose tops ``declared`` shapes (``sourced``: the names of those
    whose shapes were read from their setup's source); None when the net refuses those shapes
    (a CaffeError), so that the caller searches instead. The option lists (notes, inferred,
    nets) receive nothing then."""
    from ..errors import CaffeError
    from ..net.passes import layer_included, make_state
    lists = {k: [] for k in ("notes", "inferred", "nets") if options.get(k) is not None}
    built = lists.setdefault("nets", [])
    try:
        out = summarize(original, dict(declared, **inputs), **dict(options, declared=False,
                                                                     **lists))
    except CaffeError:
        return None
    state = make_state(original, built[-1].phase)
    for i, why in sorted(replace.items()) if "notes" in lists else ():
        lp = original.layer[i]
        if all(t in declared for t in lp.top) and layer_included(lp, state):
            how = ("; its setup's source writes its tops' shapes" if lp.name in sourced
                   else "" if why.startswith(PLACEHOLDER) else ", after shaping its tops")
            lists["notes"].append(
                "layer '%s' (Python): %s%s; replaced by an Input "
                "layer of those shapes (%s)" % (lp.name, why, how, ", ".join(
                    "%s %s" % (t, " x ".join(map(str, declared[t]))) for t in lp.top)))
    for k, v in lists.items():
        if options.get(k) is not None:
            options[k].extend(v)
    return out


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
