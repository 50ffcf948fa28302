"""The ``Python`` layer: a layer written in Python by the user, as pycaffe's PythonLayer.

    layer { name: "rpn" type: "Python" bottom: "x" top: "y"
            python_param { module: "my_layers" layer: "MyLayer" param_str: "{'k': 3}" } }

``module`` is imported from ``sys.path`` and ``layer`` is a class in it, subclass of
:class:`Layer` (exported as ``caffepy.Layer``; pycaffe's ``caffe.Layer``). The class is
instantiated with the LayerParameter; the instance gets ``param_str``, ``phase`` (equal to
``caffepy.TRAIN`` / ``caffepy.TEST``, an int as BVLC's PythonLayer sets it, whose ``str()`` is
``'TRAIN'`` / ``'TEST'`` as in py-faster-rcnn's Caffe, where it is the Phase enum and its layers
read ``cfg[str(self.phase)]``) and ``blobs`` (its parameter blobs, a list with ``add_blob(*shape)``), then Caffe's
calls: ``setup(bottom, top)`` once, ``reshape(bottom, top)`` before every forward,
``forward(bottom, top)``, ``backward(top, propagate_down, bottom)``. ``bottom``/``top`` are lists
of blobs with ``.data`` / ``.diff`` numpy arrays, ``.shape``, ``.count``, ``.num`` ...
and ``.reshape(*shape)``. ``loss_weight`` works as for any layer. ``param_str_`` (older pycaffe's
name) is set too.

Well-known third-party layers: when ``module`` is not on ``sys.path`` (neither it nor its
package is found; a module that is found but fails while importing is the user's, and its error
is reported) and (module, layer) is one that a fork family builds in (py-faster-rcnn's RPN and
data layers, and the forks' layers of the same names, CTPN, ENet, DetectNet, Caffe's example
``pyloss`` ...: each family's ``__init__`` lists its own), caffepy's implementation
(``caffepy.forks``) stands in and one WARNING line (on the ``caffepy`` logger, so also from the
Python API and ``caffepy summary``) names it and why the module did not import; a module of that
name on ``sys.path`` always wins. Where forks share a (module, layer) name, the stand-in whose form
(bottom / top counts, param_str keys, bottom shapes) fits the layer is chosen, and a layer that
fits none is an error naming the forms known (``caffepy.layers.stand_ins``). User modules may
``import caffe`` (the ``caffe`` package is caffepy, in ``sys.modules`` before the module runs, so a
fork's pycaffe sources the module puts on ``sys.path`` do not replace it).
As in pycaffe, ``net.layers[i]`` of a Python layer answers for the user's object: attributes the
layer itself lacks (``set_roidb``, ...) are the user object's.

An exception the user's code raises (importing the module, in ``__init__``, ``setup``,
``reshape``, ``forward`` or ``backward``) becomes a one-line :class:`PythonLayerError` (a
``NetError``) naming the layer, the module and class, the call, the exception and the innermost
file:line of the user's code, e.g. ``layer 'data' (Python): python_param.module 'reader' (class
DataLayer) raised NameError in setup: name 'xrange' is not defined (reader.py:42)``; the
exception itself is its ``original`` and ``__cause__``. A ``CaffeError`` passes unchanged.
Modules written for Python 2, numpy < 1.24, PyYAML < 6 or scipy < 1.3 run: Python 2 syntax is
translated in memory, py-faster-rcnn's compiled helpers that were never built get numpy
stand-ins, and a module gets in its own namespace what those versions had (xrange, np.int ...,
one-argument yaml.load, scipy.misc.imresize ...), with one WARNING line per module naming it:
:mod:`caffepy.layers.legacy_import`, :mod:`caffepy.layers.python2_source`,
:mod:`caffepy.layers.python_legacy`.
"""
import contextlib
import importlib
import logging
import os
import sys
import traceback

from ..blob import Blob
from ..errors import CaffeError, NetError
from . import python_legacy
from .legacy_import import LIBRARY_DIRS as _LIBRARY_DIRS, OWN_DIRS as _OWN_DIRS, legacy_imports
from .legacy_import import use_caffepy_caffe
from .base import Layer as _CaffepyLayer, register_layer
from .stand_ins import NoStandInFits, builtin_layer_class, fitting_stand_ins, form_of
from .stand_ins import register_stand_in  # noqa: F401  (the fork families register through here)

_log = logging.getLogger("caffepy")


class BlobVec(list):
    """A layer's parameter blobs (pycaffe's BlobVec): a list with ``add_blob(*shape)``."""

    def __init__(self, items=(), dtype="float32"):
        super(BlobVec, self).__init__(items)
        self.dtype = dtype

    def add_blob(self, *shape):
        self.append(Blob(shape, dtype=self.dtype))
        return self[-1]


class Layer(object):
    """Base class of user Python layers (pycaffe's ``caffe.Layer``): override the four methods."""

    type = "Python"

    def __init__(self, layer_param=None):
        self.layer_param = layer_param
        self.param_str = layer_param.python_param.param_str if layer_param is not None else ""
        self.phase = layer_param.phase if layer_param is not None else 0
        self.blobs = BlobVec()

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        pass

    def backward(self, top, propagate_down, bottom):
        pass


class Phase(int):
    """A Python layer's ``phase`` (module doc): the int, named by ``str()``."""

    def __str__(self):
        return "TRAIN" if self == 0 else "TEST"


class PythonLayerError(NetError):
    """The user's code of a Python layer raised ``original`` during ``phase`` (import, __init__,
    setup, reshape, forward, backward)."""

    def __init__(self, message, phase=None, original=None):
        super(PythonLayerError, self).__init__(message)
        self.phase, self.original = phase, original


def user_code_location(error):
    """``file.py:line`` of the innermost frame of ``error``'s traceback in the user's code (not
    caffepy's, the standard library's or an installed package's; failing that, the innermost not
    caffepy's), or None. A SyntaxError gives its own file and line."""
    if isinstance(error, SyntaxError) and error.filename:
        return "%s:%s" % (os.path.basename(error.filename), error.lineno)
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.filename and not f.filename.startswith("<")
              and not os.path.abspath(f.filename).startswith(_OWN_DIRS)]
    users = [f for f in frames if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    for f in reversed(users or frames):
        return "%s:%d" % (os.path.basename(f.filename), f.lineno)
    return None


def exception_text(error, limit=200):
    """The exception's message on one line: its first line when that says enough (numpy's
    paragraphs of advice after a removed alias, ...), at most ``limit`` characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines and len(lines[0]) >= 20 else " ".join(lines)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe_user_error(module_name, class_name, phase, error):
    """``python_param.module 'm' (class C) raised T in phase: message (file.py:line)``."""
    where = user_code_location(error)
    message = exception_text(error)
    return "python_param.module '%s' (class %s) raised %s in %s%s%s" % (
        module_name, class_name, type(error).__name__, phase, ": " + message if message else "",
        " (%s)" % where if where else "")


class ModuleMissing(ImportError):
    """``python_param.module`` (or a package above it) is not on sys.path at all."""


class ClassMissing(AttributeError):
    """The module imported but has no attribute ``python_param.layer``."""


def _names_module(error, module_name):
    """Whether ImportError ``error`` says ``module_name`` itself (or its package) is missing, as
    opposed to the module being there and failing while it imports."""
    missing = getattr(error, "name", None)
    return (isinstance(error, ModuleNotFoundError) and bool(missing)
            and (module_name == missing or module_name.startswith(missing + ".")))


def _adapt_user_modules(names):
    """The user's modules among ``names`` (not caffepy's, the standard library's or an installed
    package's) get what they need from older numpy, PyYAML and Python 2 (python_legacy)."""
    for name in names:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path and not os.path.abspath(path).startswith(_OWN_DIRS + _LIBRARY_DIRS):
            python_legacy.adapt(module)


def import_user_module(module_name):
    """Import a Python layer's module as the layer runs it: caffepy's ``caffe`` named first
    (:func:`caffepy.layers.legacy_import.use_caffepy_caffe`), the module and what it imports read
    with the legacy imports (Python 2 source, py-faster-rcnn's unbuilt helpers, old scipy) and
    given what older numpy / PyYAML / Python 2 had. Raises what the import raises."""
    use_caffepy_caffe()
    before = set(sys.modules)
    with legacy_imports():
        module = importlib.import_module(module_name)
    _adapt_user_modules([module_name] + sorted(set(sys.modules) - before))
    return module


def load_python_layer_class(module_name, class_name):
    """Import ``module_name`` from sys.path and return its attribute ``class_name``.

    Raises ImportError / AttributeError with a one-line message naming module and class.
    """
    if not module_name:
        raise ImportError("python_param.module is empty")
    try:
        module = import_user_module(module_name)
    except ImportError as e:
        cls = ModuleMissing if _names_module(e, module_name) else ImportError
        where = None if cls is ModuleMissing else user_code_location(e)
        raise cls("cannot import python_param.module '%s' (for layer class '%s'): %s%s"
                  % (module_name, class_name, " ".join(str(e).split()),
                     " (%s)" % where if where else ""))
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ClassMissing("module '%s' (%s) has no class '%s'"
                             % (module_name, getattr(module, "__file__", "?"), class_name))


def module_hint(module_name, source, levels=2, depth=3, budget=4000):
    """Where a module that is not on sys.path sits near the net file ``source``: its
    ``a/b.py`` (or ``a/b/__init__.py``) in the file's directory, one of its ``levels`` parents, or
    up to ``depth`` directories below them (hidden ones skipped; at most ``budget`` directories
    looked at). The end of the one-line error, or "" when not found. Nothing is imported: a file
    found beside an untrusted net is named, never run."""
    rel = module_name.replace(".", os.sep)
    root = os.path.dirname(os.path.abspath(os.fspath(source)))
    roots = [root]
    for _ in range(levels):
        root = os.path.dirname(root)
        if root not in roots:
            roots.append(root)
    seen = 0
    for top in roots:
        for path, dirs, _ in os.walk(top):
            seen += 1
            if seen > budget:
                return ""
            dirs[:] = [] if path[len(top):].count(os.sep) >= depth else \
                sorted(d for d in dirs if not d.startswith("."))
            if os.path.isfile(os.path.join(path, rel + ".py")) or \
                    os.path.isfile(os.path.join(path, rel, "__init__.py")):
                return " (the module is in %s: put that directory on PYTHONPATH)" % path
    return ""


@register_layer("Python")
class PythonLayer(_CaffepyLayer):
    """Runs a user's Python layer (see module doc for the protocol).

    prototxt: ``python_param { module (required), layer (required), param_str: "",
    share_in_parallel: false }``. Any number of bottoms and tops, as the user class decides.
    """

    def __init__(self, layer_param, phase=None, dtype="float32"):
        super(PythonLayer, self).__init__(layer_param, phase=phase, dtype=dtype)
        pp = layer_param.python_param
        self.py_layer, self._missing = None, None
        try:
            cls = load_python_layer_class(pp.module, pp.layer)
        except ModuleMissing as e:
            if builtin_layer_class(pp.module, pp.layer) is None:
                error = self.error(str(e))
                error.hint_near = lambda source, name=pp.module: module_hint(name, source)
                raise error
            self._missing = " ".join(str(e).split())
            cls = None          # a stand-in, chosen in setup by the blobs (see stand_ins)
        except ImportError as e:  # the user's module is there but failed: it is not replaced
            hint = ""
            if builtin_layer_class(pp.module, pp.layer) is not None:
                hint = (" (caffepy's built-in stand-in for %s.%s is used only when that module "
                        "is not on sys.path)" % (pp.module, pp.layer))
            raise self.error(str(e) + hint)
        except ClassMissing as e:
            raise self.error(str(e))
        except CaffeError:
            raise
        except Exception as e:  # an error raised while importing the user's module
            raise self._user_error("import", e) from e
        if cls is not None:
            self._instantiate(cls)

    def _user_error(self, phase, error):
        pp = self.layer_param.python_param
        return self.error(describe_user_error(pp.module, pp.layer, phase, error),
                          lambda message: PythonLayerError(message, phase, error))

    @contextlib.contextmanager
    def _calling(self, phase):
        """Run the user's ``phase`` method: its exceptions become one-line PythonLayerErrors. A
        caffepy error its code met (a ``caffe.Net`` it builds from a file that is not there, a
        blob it reshapes wrongly, an error of a net it builds) is named with this layer too,
        unless it already names this layer (caffepy's stand-in layers name it themselves)."""
        try:
            with legacy_imports():
                yield
        except CaffeError as e:
            if isinstance(e, PythonLayerError) or "layer '%s'" % self.layer_param.name in str(e):
                raise
            raise self._user_error(phase, e) from e
        except Exception as e:
            raise self._user_error(phase, e) from e

    def _instantiate(self, cls):
        pp = self.layer_param.python_param
        if self._missing:
            form = form_of(cls)
            _log.warning("Python layer '%s': %s; caffepy's built-in %s.%s stands in for %s.%s%s",
                         self.layer_param.name, self._missing, cls.__module__, cls.__name__,
                         pp.module, pp.layer, " (as %s's layer)" % form.fork if form else "")
        with self._calling("__init__"):
            self.py_layer = cls(self.layer_param)
        self.py_layer.param_str = pp.param_str
        self.py_layer.param_str_ = pp.param_str
        self.py_layer.phase = Phase(self.phase)
        self.py_layer.blobs = BlobVec(self.blobs, dtype=self.dtype)
        self.blobs = self.py_layer.blobs

    def __getattr__(self, name):
        py_layer = self.__dict__.get("py_layer")
        if py_layer is None or name.startswith("__"):
            raise AttributeError("%s has no attribute '%s'" % (type(self).__name__, name))
        return getattr(py_layer, name)

    def layer_setup(self, bottom, top):
        if self.py_layer is None:
            try:
                cls = fitting_stand_ins(self.layer_param.python_param, [b.shape for b in bottom],
                                        len(top))[0]
            except NoStandInFits as why:
                raise self.error("%s, and %s" % (self._missing, why))
            self._instantiate(cls)
        with self._calling("setup"):
            self.py_layer.setup(bottom, top)
        self.blobs = self.py_layer.blobs

    def reshape(self, bottom, top):
        with self._calling("reshape"):
            self.py_layer.reshape(bottom, top)

    def forward_cpu(self, bottom, top):
        with self._calling("forward"):
            self.py_layer.forward(bottom, top)

    def get_data_state(self):
        """The user layer's optional ``get_state()`` (a dict; see caffepy.data.state), else None."""
        get = getattr(self.py_layer, "get_state", None)
        return get() if callable(get) else None

    def set_data_state(self, state):
        setter = getattr(self.py_layer, "set_state", None)
        if not callable(setter):
            raise self.error("a data state was saved for this layer, but its class has no set_state")
        setter(state)

    def backward_cpu(self, top, propagate_down, bottom):
        with self._calling("backward"):
            self.py_layer.backward(top, list(propagate_down), bottom)
