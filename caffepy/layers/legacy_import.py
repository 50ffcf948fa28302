"""How a user's Python layer module (and the user's modules it imports) is loaded.

While caffepy imports a ``python_param.module`` or calls a Python layer (:func:`legacy_imports`,
re-entrant), a finder stands first on ``sys.meta_path``. For anything that is not the user's (a
file of the standard library, an installed package or caffepy) it does nothing. A module that is
the user's source file is loaded by :class:`UserSourceLoader`, which differs from Python's own only
where Python's would fail:

* **Python 2 source**: source that does not compile (``SyntaxError`` / ``TabError``), that
  reads a builtin only Python 2 has and never binds it (``xrange`` ...), that lies beside a file
  of Python 2 source, or, in a module of a package, that imports a module beside it by Python 2's
  implicit relative import, is translated
  in memory (:mod:`caffepy.layers.python2_source`) and the translation runs, with the two
  division helpers in the module's namespace. When the translation of source that does not
  compile does not compile either, the original ``SyntaxError`` is raised. The user's modules
  are compiled from their source at each import: no byte code file is read or written in the
  user's tree (one written by an earlier plain import would skip the translation).
* **scipy.misc's removed image functions** (``imresize``, ``imread``, ``imsave``, ``toimage``,
  ``bytescale``, ``fromimage``; gone from scipy 1.3): a module whose code reads one of them from
  ``scipy.misc`` (``from scipy.misc import imresize``, ``scipy.misc.imresize(...)``,
  ``misc.imread(...)``) and whose installed scipy lacks it gets its own ``__import__`` (in its own
  ``__builtins__``; the process's ``builtins`` are untouched) that answers ``scipy`` /
  ``scipy.misc`` with views of them that also hold caffepy's versions
  (:mod:`caffepy.layers.legacy_scipy_misc`). A view, not new attributes on ``scipy.misc``: other
  code keeps seeing the installed scipy, and a ``from`` import, which fails while the module is
  still importing, can only be answered at import time.
* **py-faster-rcnn's compiled helpers** never built (the repository ships ``bbox.pyx`` /
  ``cpu_nms.pyx`` / ``gpu_nms.pyx`` and a ``setup.py`` the user did not run): an import of
  ``utils.cython_bbox``, ``utils.cython_nms``, ``nms.cpu_nms`` or ``nms.gpu_nms`` whose package
  is the user's and where no importable extension module of that name exists gets a module
  holding caffepy's numpy versions, with the extension's results
  (:mod:`caffepy.forks.detection.frcnn.compiled`); an extension that is there and loads always
  wins.

After a user's module has run, :func:`caffepy.layers.python_legacy.adapt` gives it numpy's and
PyYAML's removed names, and logs one WARNING line naming everything the module was given, these
included. Each stand-in module for a compiled helper logs its own WARNING line.
"""
import builtins
import contextlib
import dis
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import sysconfig
import threading
import types

from ..math.kernels import env_on
from . import python2_source, python_legacy

_log = logging.getLogger("caffepy")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OWN_DIRS = tuple(os.path.join(_ROOT, d) + os.sep for d in ("caffepy", "caffe"))
LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                             if k in ("stdlib", "platstdlib", "purelib", "platlib")}))

COMPILED = {("utils", "cython_bbox"): ("bbox_overlaps",),
            ("utils", "cython_nms"): ("nms",),
            ("nms", "cpu_nms"): ("cpu_nms",),
            ("nms", "gpu_nms"): ("gpu_nms",)}
COMPILED_IMPL = "caffepy.forks.detection.frcnn.compiled"
SCIPY_MISC_REMOVED = ("imresize", "imread", "imsave", "toimage", "bytescale", "fromimage")


def use_caffepy_caffe():
    """Put caffepy's ``caffe`` package (pycaffe's import name) in ``sys.modules`` before a user's
    Python layer module runs, loaded from caffepy's own directory, unless a ``caffe`` is imported
    already or ``CAFFEPY_CAFFE_ALIAS=0``. A layer run by caffepy subclasses caffepy's
    ``caffe.Layer``; and a fork's checkout holds pycaffe's sources (``python/caffe``) without their
    compiled ``_caffe``, which a layer module often puts first on ``sys.path``
    (``sys.path.insert(0, caffe_root + 'python')``, py-faster-rcnn's ``_init_paths``) before
    ``import caffe``: those sources then must not be what ``caffe`` names (they fail to import,
    or patch caffepy's classes)."""
    if "caffe" in sys.modules or not env_on("CAFFEPY_CAFFE_ALIAS"):
        return
    init = os.path.join(_ROOT, "caffe", "__init__.py")
    if not os.path.isfile(init):
        return
    spec = importlib.util.spec_from_file_location(
        "caffe", init, submodule_search_locations=[os.path.dirname(init)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["caffe"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("caffe", None)
        raise


def is_user_file(path):
    """Whether ``path`` is the user's: not caffepy's, the standard library's or a package's."""
    return bool(path) and not os.path.abspath(path).startswith(OWN_DIRS + LIBRARY_DIRS)


class UserSourceLoader(importlib.machinery.SourceFileLoader):
    """Python's source loader, plus what the module doc lists."""

    translated = None

    def source_to_code(self, data, path, **kwargs):
        try:
            code = super().source_to_code(data, path, **kwargs)
        except SyntaxError as error:
            try:
                code, self.translated = self._as_python2(importlib.util.decode_source(data), path)
            except ImportError as missing:
                error.msg += " (read as Python 2 source it needs fissix: %s)" % missing
                raise error
            except Exception:       # noqa: BLE001 -- not Python 2 either: the user's error
                raise error from None
            return code
        source = importlib.util.decode_source(data)
        names = python2_source.python2_builtins(source)
        why = "Python 2 builtins read (%s)" % ", ".join(names)
        if not names and ("." in self.name or self.is_package(self.name)):
            names = python2_source.implicit_relative_imports(source, path)
            why = "Python 2's implicit relative imports (%s)" % ", ".join(names)
        if not names:
            beside = python2_source.python2_beside(path)
            if beside:
                names, why = [beside], "Python 2 source beside it (%s)" % beside
        if not names:
            return code
        try:
            py2, done = self._as_python2(source, path)
        except Exception:           # noqa: BLE001 -- fissix missing or the translation fails
            return code
        self.translated = [why] + done
        return py2

    def _as_python2(self, source, path):
        """(code, what was done) of the text ``source`` read as Python 2
        (:func:`caffepy.layers.python2_source.compile_python2`)."""
        in_package = "." in self.name or self.is_package(self.name)
        return python2_source.compile_python2(source, path, in_package)

    def get_code(self, fullname):
        # a module that compiles is cached as byte code by Python; one read as Python 2 must be
        # translated each time, not run from a byte code file of an earlier plain import
        path = self.get_filename(fullname)
        with open(path, "rb") as f:
            return self.source_to_code(f.read(), path)

    def exec_module(self, module):
        code = self.get_code(module.__name__)
        given = list(self.translated or [])
        if self.translated:
            module.__dict__.update(python2_source.HELPERS)
        misc = _scipy_misc_read(code)
        if misc:
            module.__dict__["__builtins__"] = dict(builtins.__dict__, __import__=_import)
            given.append("scipy.misc.%s (Pillow)" % ", scipy.misc.".join(misc))
        module.__caffepy_given__ = given
        exec(code, module.__dict__)
        python_legacy.adapt(module)


class _StandInLoader(importlib.abc.Loader):
    """A module of caffepy's functions named as a py-faster-rcnn extension that is not built."""

    def __init__(self, names, why):
        self.names, self.why = names, why

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        impl = importlib.import_module(COMPILED_IMPL)
        for name in self.names:
            setattr(module, name, getattr(impl, name))
        _log.warning("module '%s' (%s): caffepy's numpy %s stands in, with the extension's "
                     "results", module.__name__, self.why, ", ".join(self.names))


class _ExtensionOrStandIn(importlib.machinery.ExtensionFileLoader):
    """The extension that is there, or the stand-in when it does not load (another Python's)."""

    def __init__(self, name, path, names):
        super().__init__(name, path)
        self.names = names

    def create_module(self, spec):
        try:
            return super().create_module(spec)
        except ImportError as e:
            self.fallback = _StandInLoader(self.names, "its extension %s does not load: %s"
                                           % (os.path.basename(self.path), e))
            return None

    def exec_module(self, module):
        fallback = getattr(self, "fallback", None)
        if fallback is None:
            return super().exec_module(module)
        fallback.exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        key = tuple(fullname.split(".")[-2:])
        compiled = COMPILED.get(key) if path and all(map(is_user_file, path)) else None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            if compiled:
                return importlib.util.spec_from_loader(fullname, _StandInLoader(
                    compiled, "py-faster-rcnn's compiled extension, not built here"))
            return None
        loader, origin = spec.loader, spec.origin
        if type(loader) is importlib.machinery.SourceFileLoader and is_user_file(origin):
            spec.loader = UserSourceLoader(fullname, origin)
        elif compiled and type(loader) is importlib.machinery.ExtensionFileLoader:
            spec.loader = _ExtensionOrStandIn(fullname, origin, compiled)
        else:
            return None
        return spec


_FINDER = _Finder()
_lock = threading.RLock()
_depth = [0]


@contextlib.contextmanager
def legacy_imports():
    """The finder (module doc) stands first on ``sys.meta_path`` while this runs."""
    with _lock:
        if _depth[0] == 0 and _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
        _depth[0] += 1
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0 and _FINDER in sys.meta_path:
                sys.meta_path.remove(_FINDER)


# ---------------------------------------------------------------- scipy.misc's image functions

def _scipy_misc_read(code):
    """The removed scipy.misc names (module doc) the code reads while it imports scipy.misc,
    where the installed scipy lacks them."""
    imports, read, stack = set(), set(), [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname == "IMPORT_NAME":
                imports.add(ins.argval)
            elif ins.opname in ("IMPORT_FROM", "LOAD_ATTR", "LOAD_METHOD"):
                read.add(ins.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    if not ("scipy.misc" in imports or ("scipy" in imports and "misc" in read)):
        return []
    wanted = [n for n in SCIPY_MISC_REMOVED if n in read]
    if not wanted:
        return []
    misc = _real_scipy_misc()
    return [n for n in wanted if not hasattr(misc, n)]


def _real_scipy_misc():
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module("scipy.misc")
    except ModuleNotFoundError as e:
        if e.name not in ("scipy", "scipy.misc"):
            raise
        return None


class _ModuleView(types.ModuleType):
    """A module's namespace plus some names; anything else is the module's own."""

    def __getattr__(self, name):
        base = self.__dict__.get("__caffepy_base__")
        if base is None:
            raise AttributeError("module '%s' has no attribute '%s'" % (self.__name__, name))
        return getattr(base, name)


_views = {}


def _view(name, base, extra):
    view = _ModuleView(name)
    if base is not None:
        view.__dict__.update(base.__dict__)
    view.__dict__.update(extra)
    view.__caffepy_base__ = base
    return view


def _misc_view():
    if "scipy.misc" not in _views:
        from . import legacy_scipy_misc
        misc = _real_scipy_misc()
        _views["scipy.misc"] = _view("scipy.misc", misc, {
            n: getattr(legacy_scipy_misc, n) for n in SCIPY_MISC_REMOVED if not hasattr(misc, n)})
    return _views["scipy.misc"]


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    """``__import__`` of a module that reads scipy.misc's removed names (module doc): ``scipy``
    and ``scipy.misc`` answered by their views, even where scipy no longer has ``scipy.misc``."""
    if level or not (name == "scipy" or name.startswith("scipy.")):
        return builtins.__import__(name, globals, locals, fromlist, level)
    try:
        module = builtins.__import__(name, globals, locals, fromlist, level)
    except ModuleNotFoundError as e:
        if e.name != "scipy.misc":
            raise
        module = None
    misc = _misc_view()
    if fromlist and name != "scipy":
        return misc if name == "scipy.misc" else module
    if "scipy" not in _views:
        import scipy
        _views["scipy"] = _view("scipy", scipy, {"misc": misc})
    return _views["scipy"]
