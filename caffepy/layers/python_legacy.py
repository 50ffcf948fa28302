"""Python layer modules written for the Python, numpy and PyYAML of pycaffe's years, run unchanged.

Three things such modules use that today's packages removed, each given back to the user's module
alone (its own global names; nothing global is changed) right after it imports, and only where the
installed package lacks it:

* numpy's type aliases ``np.int``, ``np.float``, ``np.bool``, ``np.object``, ``np.str``,
  ``np.long``, ``np.unicode``, ``np.complex`` (removed in numpy 1.24; they were Python's ``int``,
  ``float`` ...): every global name of the module bound to the numpy module is rebound to a view of
  numpy that has them (:class:`_NumpyWithAliases`: numpy's namespace plus the aliases; anything
  else is numpy's own object);
* PyYAML's one-argument ``yaml.load(stream)`` (PyYAML 6 requires ``Loader``; py-faster-rcnn's
  layers read ``param_str`` this way): names bound to the yaml module are rebound to a view whose
  ``load`` defaults to ``yaml.SafeLoader`` (plain values, dicts and lists: what a param_str holds)
  that also reads ``!!python/tuple [4, 8, 16]`` as a tuple, as PyYAML 5's default loader did
  (py-faster-rcnn's forks write anchor scales that way);
* Python 2's builtins ``xrange``, ``unicode``, ``basestring``, ``long``, ``raw_input``,
  ``file``, ``cmp`` are ``range``, ``str``, ``str``, ``int``, ``input``, ``open`` and a
  three-way comparison in the module's globals where it does not define them itself.

Each is given only where the module's code reads it (its functions' and classes' byte code:
``np.int`` read from a global bound to numpy, ``yaml.load``, a global ``xrange``). One WARNING
line per module names what it was given, with what its loader gave it before it ran
(``__caffepy_given__``: a translation from Python 2 syntax, scipy.misc's image functions; see
:mod:`caffepy.layers.legacy_import`).
"""
import logging
import sys
import types

import numpy as np

_log = logging.getLogger("caffepy")

NUMPY_ALIASES = {"int": int, "float": float, "bool": bool, "object": object, "str": str,
                 "long": int, "unicode": str, "complex": complex}
def _cmp(a, b):
    """Python 2's ``cmp``: -1, 0 or 1."""
    return (a > b) - (a < b)


PY2_BUILTINS = {"xrange": range, "unicode": str, "basestring": str, "long": int,
                "raw_input": input, "file": open, "cmp": _cmp}
_views = {}


class _NumpyWithAliases(types.ModuleType):
    """numpy's namespace plus the aliases it no longer has (module doc)."""

    def __getattr__(self, name):            # submodules numpy loads on first use
        return getattr(np, name)


def _numpy_view():
    missing = {k: v for k, v in NUMPY_ALIASES.items() if k not in np.__dict__}
    if not missing:
        return None, []
    if "numpy" not in _views:
        view = _NumpyWithAliases("numpy")
        view.__dict__.update(np.__dict__)
        view.__dict__.update(missing)
        _views["numpy"] = view
    return _views["numpy"], sorted(missing)


def _yaml_view():
    yaml = sys.modules.get("yaml")
    if yaml is None or not _load_needs_loader(yaml):
        return None
    if "yaml" not in _views:
        view = types.ModuleType("yaml")
        view.__dict__.update(yaml.__dict__)

        class SafeLoaderWithTuples(yaml.SafeLoader):
            pass
        SafeLoaderWithTuples.add_constructor(
            "tag:yaml.org,2002:python/tuple",
            lambda loader, node: tuple(loader.construct_sequence(node)))

        def load(stream, Loader=None, **kwargs):
            return yaml.load(stream, Loader=Loader or SafeLoaderWithTuples, **kwargs)
        load.__doc__ = "yaml.load with PyYAML 5's one-argument form (SafeLoader by default)."
        view.load = load
        _views["yaml"] = view
    return _views["yaml"]


def _load_needs_loader(yaml):
    import inspect
    try:
        p = inspect.signature(yaml.load).parameters.get("Loader")
    except (TypeError, ValueError):
        return False
    return p is not None and p.default is inspect.Parameter.empty


def adapt(module):
    """Give ``module`` (a user's Python layer module, just imported) what it needs from older
    numpy, PyYAML and Python 2 (module doc), where its code uses it, and log it with what its
    loader gave it; returns everything given, one short phrase each."""
    if not isinstance(module, types.ModuleType) or getattr(module, "__caffepy_legacy__", False):
        return []
    given = []
    g = module.__dict__
    codes = _codes(module)
    view, aliases = _numpy_view()
    if view is not None:
        names = [k for k, v in g.items() if v is np]
        used = sorted(_attributes_read(codes, names) & set(aliases))
        if used:
            for k in names:
                g[k] = view
            given.append("numpy's aliases np.%s" % ", np.".join(used))
    yaml_view, yaml = _yaml_view(), sys.modules.get("yaml")
    if yaml_view is not None:
        names = [k for k, v in g.items() if v is yaml]
        if "load" in _attributes_read(codes, names):
            for k in names:
                g[k] = yaml_view
            given.append("yaml.load(stream) with SafeLoader")
    read = set()
    for code in codes:
        read.update(code.co_names)
    py2 = [k for k in PY2_BUILTINS if k not in g and k in read]
    for k in py2:
        g[k] = PY2_BUILTINS[k]
    if py2:
        given.append("Python 2's %s" % ", ".join(py2))
    g["__caffepy_legacy__"] = True
    given = list(g.get("__caffepy_given__", ())) + given
    if given:
        _log.warning("Python layer module '%s' (%s) runs with %s", module.__name__,
                  getattr(module, "__file__", "?"), "; ".join(given))
    return given


def _attributes_read(codes, names):
    """The attribute names the code reads from the globals ``names`` (``np.int`` -> "int")."""
    import dis
    out, names = set(), set(names)
    for code in codes:
        previous = None
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous is not None \
                    and previous.opname in ("LOAD_GLOBAL", "LOAD_NAME") \
                    and previous.argval in names:
                out.add(ins.argval)
            previous = ins
    return out


def _codes(module):
    """The code objects of the module's functions and classes (nested ones included)."""
    seen, out = set(), []

    def walk(code):
        if id(code) in seen:
            return
        seen.add(id(code))
        out.append(code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    for value in list(module.__dict__.values()):
        fn = getattr(value, "__func__", value)
        if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
            walk(fn.__code__)
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for member in vars(value).values():
                member = getattr(member, "__func__", member)
                if isinstance(member, types.FunctionType):
                    walk(member.__code__)
    return out
