"""The layer registry keyed by the prototxt ``type`` string: ``register_layer`` and
``register_variant`` (class decorators that fill ``_REGISTRY`` and ``_VARIANTS``), the look-ups
(``get_layer_class``, ``has_layer_type``, ``layer_type_list``) and ``create_layer``, which
builds a layer from its ``LayerParameter``. :mod:`caffepy.layers.base` re-exports every name here.

The registry imports none of the modules that fill it until a look-up needs them. A look-up of one
type (``get_layer_class``, ``has_layer_type``, ``create_layer``) imports only the modules that
register that type (and its variants), as ``caffepy/layers/_type_index.py`` lists them, so a
process that builds LeNet imports a handful of layer modules, not every fork family (about a
second of start-up per process). A type the index does not list, or one its modules did not
register after all (an index older than the code), falls back to ``load_all``, which imports every
layer family once. Variants keep the order ``load_all``'s imports give them, whatever order the
look-ups imported their modules in. Every look-up then calls the plug-in loaders added with
``add_loader``; a plug-in module to load imports every family first (an override replaces a
built-in, not the reverse). ``tools/gen_layer_index.py`` writes the index from where each type was
registered (``_ORIGINS``); ``tests/test_layer_index.py`` fails when it is not current.
"""
import difflib
import importlib
import sys

import numpy as np

from ..errors import NetError

_REGISTRY = {}
#: type name -> the modules whose import registered it or a variant of it, in registration order
_ORIGINS = {}


def _note_origin(type_name):
    """Record and return the module whose body (being imported) registers ``type_name``: the
    innermost ``<module>`` frame, so a helper that registers for its caller names the caller."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    module = frame.f_globals.get("__name__") if frame is not None else None
    origins = _ORIGINS.setdefault(type_name, [])
    if module and module not in origins:
        origins.append(module)
    return module


def register_layer(*type_names):
    """Class decorator: register a Layer subclass under one or more prototxt type strings."""
    def deco(cls):
        for name in type_names:
            if name in _REGISTRY:
                raise RuntimeError("layer type '%s' registered twice (%s and %s)"
                                   % (name, _REGISTRY[name].__name__, cls.__name__))
            _REGISTRY[name] = cls
            _note_origin(name)
        if "type" not in cls.__dict__:      # a subclass reports its own name, not its base's
            cls.type = type_names[0]
        return cls
    return deco


_VARIANTS = {}
_VARIANT_MODULES = {}


def register_variant(type_name, when):
    """Class decorator: a second fork's layer under a type name another fork already registered
    (SegNet's ``BN`` beside PSPNet's, its mask-driven ``Upsample`` beside YOLO's nearest one).
    ``create_layer`` builds the variant when ``when(layer_param)`` is true, else the registered
    class."""
    def deco(cls):
        variants = _VARIANTS.setdefault(type_name, [])
        variants.append((when, cls))
        _VARIANT_MODULES[cls] = _note_origin(type_name)
        # the order load_all's imports give, whatever order the look-ups imported the modules in
        order = _type_index().get(type_name, ())
        variants.sort(key=lambda v: order.index(_VARIANT_MODULES.get(v[1])) if
                      _VARIANT_MODULES.get(v[1]) in order else len(order))
        if "type" not in cls.__dict__:
            cls.type = type_name
        return cls
    return deco


def is_variant(type_name, cls):
    """Whether ``cls`` is registered with :func:`register_variant` under ``type_name``."""
    return any(c is cls for _, c in _VARIANTS.get(type_name, ()))


def layer_type_list():
    """Sorted list of every registered layer type string."""
    load_all()
    return sorted(_REGISTRY)


def has_layer_type(type_name):
    """Whether a layer (built in or plug-in) is registered under ``type_name``."""
    load_for(type_name)
    return type_name in _REGISTRY


def get_layer_class(type_name, layer_name="?"):
    load_for(type_name)
    try:
        return _REGISTRY[type_name]
    except KeyError:
        lower = {}
        for known in sorted(_REGISTRY):
            lower.setdefault(known.lower(), known)
        key = type_name.lower()
        closest = [lower[c] for c in difflib.get_close_matches(key, lower, n=5, cutoff=0.4)]
        best = [lower[c] for c in difflib.get_close_matches(key, lower, n=1, cutoff=0.5)]
        if key in lower:
            best = [lower[key]]
            closest = best + [c for c in closest if c != best[0]]
        hint = " (did you mean '%s'?)" % best[0] if best else ""
        near = ("closest known types: %s" % ", ".join(closest) if closest else
                "no known type is close (caffepy.layer_type_list() names them)")
        raise NetError("layer '%s': unknown layer type '%s'%s; %s; %s"
                       % (layer_name, type_name, hint, near, way_out(type_name)))


def create_layer(layer_param, phase=None, dtype=np.float32):
    """Instantiate the registered class for ``layer_param.type``."""
    cls = get_layer_class(layer_param.type, layer_param.name)
    for when, variant in _VARIANTS.get(layer_param.type, ()):
        if when(layer_param):
            cls = variant
            break
    return cls(layer_param, phase=phase, dtype=dtype)


_loaded = [False]
#: the index (type name -> modules), read on first use; {} when it cannot be read
_index = []


def _type_index():
    if not _index:
        try:
            from ._type_index import TYPES
        except ImportError:
            TYPES = {}
        _index.append(TYPES)
    return _index[0]


def load_for(type_name):
    """Make ``type_name`` look-up ready: import the modules the index names for it (all of them
    when the index does not know it, or they did not register it), then the plug-ins."""
    if not _loaded[0]:
        from . import plugins  # noqa: F401  (adds the plug-in loader, as load_all's import does)
        modules = _type_index().get(type_name, ())
        for module in modules:
            importlib.import_module(module)
        if type_name not in _REGISTRY:     # not in the index, or the index is older than the code
            load_all()
            return
    for loader in list(_LOADERS):
        loader()


def load_all():
    """Import every layer family (caffepy.layers and the fork families of caffepy.forks) once, so
    that each registers its types, then the plug-ins (caffepy.layers.plugins); called before any
    registry lookup."""
    if not _loaded[0]:
        _loaded[0] = True
        from . import _all  # noqa: F401  (imports every family module, which registers itself)
    for loader in list(_LOADERS):   # the plug-ins: CAFFEPY_LAYERS, the caffepy.layers entry points
        loader()


#: The variable naming plug-in layer modules (caffepy.layers.plugins reads it).
PLUGIN_ENV = "CAFFEPY_LAYERS"
#: Functions ``load_all`` calls after the families are imported; caffepy.layers.plugins adds its
#: own when imported (the registry does not import the modules that fill it).
_LOADERS = []


def add_loader(loader):
    """Have ``load_all`` call ``loader()`` on every registry lookup (it loads what it has not)."""
    if loader not in _LOADERS:
        _LOADERS.append(loader)


def way_out(type_name):
    """The end of an unknown-type message: how to give caffepy the type."""
    return ("write a plug-in layer (@caffepy.register_layer(\"%s\"), loaded with --layers MODULE "
            "or %s) or give the fork's schema with --proto" % (type_name, PLUGIN_ENV))
