"""Import every layer family module so that each registers its types.

Modules are discovered, not listed: a new ``caffepy/layers/<family>.py`` registers itself by being
there. Modules whose names start with an underscore, and ``base``, are skipped.
"""
import importlib
import pkgutil

from . import __path__ as _path

for _info in sorted(pkgutil.iter_modules(_path), key=lambda m: m.name):
    if _info.name.startswith("_") or _info.name == "base":
        continue
    importlib.import_module("%s.%s" % (__package__, _info.name))
