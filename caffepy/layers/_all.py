"""Import every layer family module so that each registers its types.

Modules are discovered, not listed: a new ``caffepy/layers/<family>.py`` or
``caffepy/forks/<family>/<module>.py`` registers itself by being there. Modules whose names start
with an underscore, and ``base``, are skipped. The fork families are found by walking the
``caffepy.forks`` package by name: the core never imports a fork family, the families import the
core (and register their types, and their Python-layer stand-ins, when imported here).
"""
import importlib
import pkgutil

from . import __path__ as _path


def _import_tree(package, path):
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module("%s.%s" % (package, info.name))
        if info.ispkg:
            _import_tree(module.__name__, module.__path__)


_import_tree(__package__, _path)
_forks = importlib.import_module(__package__.rsplit(".", 1)[0] + ".forks")
_import_tree(_forks.__name__, _forks.__path__)
