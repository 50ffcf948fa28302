"""Plug-in layers: a user's own layer class for a prototxt ``type`` caffepy lacks.

A plug-in is a :class:`caffepy.layers.base.Layer` subclass (``caffepy.LayerBase``) registered with
``@caffepy.register_layer("MyType")``; it keeps the built-ins' contract (``layer_setup``,
``reshape``, ``forward_cpu``, ``backward_cpu``, the arity attributes, ``self.error``). A class
with ``reshape`` only is enough for ``caffepy summary`` and ``caffepy draw``; a forward pass then
fails with one line saying it has no ``forward_cpu``.

Registering a type that is already registered (a built-in's, another plug-in's) is an error
naming both classes, unless ``override=True`` (then one INFO line names both).

Plug-in modules are loaded from three places, each after caffepy's own layers are registered:

* ``--layers MODULE`` on any ``caffepy`` command (repeatable): a dotted module name importable
  from ``sys.path``, or the path of a ``.py`` file;
* ``CAFFEPY_LAYERS`` in the environment: such modules separated by ``os.pathsep`` or commas;
* the ``caffepy.layers`` entry-point group of installed packages (``name = package.module``).

The environment and the entry points are read the first time the registry is consulted
(:func:`caffepy.layers.base.load_all`). A module named by ``--layers`` or ``CAFFEPY_LAYERS`` that
fails to import is a one-line :class:`PluginError` naming it, where it was named and the error; an
entry point that fails gives one WARNING line of that form and is skipped (an installed package
must not stop every command).
"""
import importlib
import importlib.util
import logging
import os
import re
import sys

from ..errors import CaffeError
from . import base

_log = logging.getLogger("caffepy")

ENV = base.PLUGIN_ENV
ENTRY_POINT_GROUP = "caffepy.layers"

#: type name -> (class registered before the plug-in or None, variants of the type or None)
_REPLACED = {}
#: real path of a .py plug-in -> its module
_PATH_MODULES = {}
_installed = [False]


class PluginError(CaffeError):
    """A plug-in layer that cannot be registered or loaded (one line)."""


def _qualname(cls):
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def register_layer(*type_names, override=False):
    """Class decorator: register a plug-in layer class under one or more prototxt type strings.

    ``override=True`` replaces a type already registered (a built-in's); without it that is a
    :class:`PluginError` naming both classes. Registering the same class again is a no-op."""
    if not type_names or not all(isinstance(n, str) and n for n in type_names):
        raise PluginError("register_layer needs one or more non-empty type names, got %r"
                          % (type_names,))

    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, base.Layer)):
            raise PluginError("@register_layer(%s): %r is not a subclass of caffepy.LayerBase "
                              "(caffepy.Layer is the base of type: \"Python\" layers)"
                              % (", ".join(repr(n) for n in type_names), cls))
        base.load_all()     # the built-ins first: an override replaces them, not the reverse
        for name in type_names:
            prev = base._REGISTRY.get(name)
            if prev is not None and prev is not cls and not override:
                raise PluginError("layer type '%s' is already registered by %s; %s cannot register "
                                  "it too (pass override=True to replace it)"
                                  % (name, _qualname(prev), _qualname(cls)))
        for name in type_names:
            prev = base._REGISTRY.get(name)
            if prev is cls:
                continue
            if name not in _REPLACED:
                _REPLACED[name] = (prev, base._VARIANTS.get(name))
            if prev is not None:
                base._VARIANTS.pop(name, None)      # the plug-in answers for every variant too
                _log.info("layer type '%s': plug-in %s overrides %s"
                          % (name, _qualname(cls), _qualname(prev)))
            base._REGISTRY[name] = cls
        if "type" not in cls.__dict__:
            cls.type = type_names[0]
        return cls
    return deco


def unregister_layer(type_name):
    """Undo the plug-in registrations of ``type_name``: the class registered before the first
    plug-in (and its variants) is back, or the type is unknown again. No-op for a type no plug-in
    registered."""
    if type_name not in _REPLACED:
        return
    prev, variants = _REPLACED.pop(type_name)
    if prev is None:
        base._REGISTRY.pop(type_name, None)
    else:
        base._REGISTRY[type_name] = prev
    if variants is not None:
        base._VARIANTS[type_name] = variants


def plugin_types():
    """The type names registered by plug-ins, sorted."""
    return sorted(_REPLACED)


def _one_line(error):
    text = " ".join(str(error).split())
    return "%s: %s" % (type(error).__name__, text) if text else type(error).__name__


def _is_path(spec):
    return (spec.endswith(".py") or os.sep in spec
            or bool(os.altsep and os.altsep in spec))


def _import_path(path):
    real = os.path.realpath(path)
    if real in _PATH_MODULES:
        return _PATH_MODULES[real]
    if not os.path.isfile(real):
        raise FileNotFoundError("no such file: %s" % path)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(real))[0])
    name, n = "caffepy_plugin_%s" % stem, 1
    while name in sys.modules:
        n += 1
        name = "caffepy_plugin_%s_%d" % (stem, n)
    spec = importlib.util.spec_from_file_location(name, real)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _PATH_MODULES[real] = module
    return module


def load_module(spec, source):
    """Import the plug-in module ``spec`` (a dotted name on sys.path, or a .py path) named by
    ``source`` (``--layers``, ``CAFFEPY_LAYERS`` ...); a one-line PluginError when it fails."""
    spec = spec.strip()
    base.load_all()
    try:
        if _is_path(spec):
            return _import_path(spec)
        return importlib.import_module(spec)
    except PluginError as e:
        raise PluginError("layer plug-in '%s' (from %s): %s" % (spec, source, e))
    except Exception as e:      # whatever the module raised while importing
        raise PluginError("cannot load layer plug-in '%s' (from %s): %s"
                          % (spec, source, _one_line(e)))


def load_modules(specs, source="--layers"):
    """Import each plug-in module of ``specs`` (see :func:`load_module`), after caffepy's own
    layers and the ``CAFFEPY_LAYERS`` / entry-point plug-ins (all of caffepy's layers are
    imported first when there is one to load, so that an override replaces a built-in)."""
    specs = [s for s in specs if s.strip()]
    if specs:
        base.load_all()
    return [load_module(s, source) for s in specs]


def env_specs(environ=None):
    """The modules named by ``CAFFEPY_LAYERS`` (separated by os.pathsep or commas)."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return [s.strip() for s in re.split("[,%s]" % re.escape(os.pathsep), value) if s.strip()]


def _entry_points():
    from importlib import metadata
    eps = metadata.entry_points()
    if hasattr(eps, "select"):
        return list(eps.select(group=ENTRY_POINT_GROUP))
    return list(eps.get(ENTRY_POINT_GROUP, ()))       # Python 3.9


def load_installed():
    """Load the ``CAFFEPY_LAYERS`` modules and the ``caffepy.layers`` entry points, once (until
    :func:`reset`); called by ``load_all`` whenever the registry is consulted."""
    if _installed[0]:
        return
    _installed[0] = True
    load_modules(env_specs(), ENV)
    for ep in _entry_points():
        dist = getattr(getattr(ep, "dist", None), "name", None)
        where = "entry point '%s'%s of group %s" % (ep.name, " of %s" % dist if dist else "",
                                                   ENTRY_POINT_GROUP)
        try:
            ep.load()
        except Exception as e:
            _log.warning("cannot load layer plug-in '%s' (from %s): %s"
                         % (ep.value, where, _one_line(e)))


def reset():
    """Read ``CAFFEPY_LAYERS`` and the entry points again at the next registry lookup (modules
    already imported stay imported)."""
    _installed[0] = False


way_out = base.way_out


base.add_loader(load_installed)
