"""The ``Python`` layer: a layer written in Python by the user, as pycaffe's PythonLayer.

    layer { name: "rpn" type: "Python" bottom: "x" top: "y"
            python_param { module: "my_layers" layer: "MyLayer" param_str: "{'k': 3}" } }

``module`` is imported from ``sys.path`` and ``layer`` is a class in it, subclass of
:class:`Layer` (exported as ``caffepy.Layer``; pycaffe's ``caffe.Layer``). The class is
instantiated with the LayerParameter; the instance gets ``param_str``, ``phase`` (``caffepy.TRAIN`` /
``caffepy.TEST``) and ``blobs`` (its parameter blobs, a list with ``add_blob(*shape)``), then Caffe's
calls: ``setup(bottom, top)`` once, ``reshape(bottom, top)`` before every forward,
``forward(bottom, top)``, ``backward(top, propagate_down, bottom)``. ``bottom``/``top`` are lists
of blobs with ``.data`` / ``.diff`` numpy arrays, ``.shape``, ``.count``, ``.num`` ...
and ``.reshape(*shape)``. ``loss_weight`` works as for any layer.
"""
import importlib

from ..blob import Blob
from .base import Layer as _CaffepyLayer, register_layer


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


def load_python_layer_class(module_name, class_name):
    """Import ``module_name`` from sys.path and return its attribute ``class_name``.

    Raises ImportError / AttributeError with a one-line message naming module and class.
    """
    if not module_name:
        raise ImportError("python_param.module is empty")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError("cannot import python_param.module '%s' (for layer class '%s'): %s"
                          % (module_name, class_name, " ".join(str(e).split())))
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise AttributeError("module '%s' (%s) has no class '%s'"
                             % (module_name, getattr(module, "__file__", "?"), class_name))


@register_layer("Python")
class PythonLayer(_CaffepyLayer):
    """Runs a user's Python layer (see module doc for the protocol).

    prototxt: ``python_param { module (required), layer (required), param_str: "",
    share_in_parallel: false }``. Any number of bottoms and tops, as the user class decides.
    """

    def __init__(self, layer_param, phase=None, dtype="float32"):
        super(PythonLayer, self).__init__(layer_param, phase=phase, dtype=dtype)
        pp = layer_param.python_param
        try:
            cls = load_python_layer_class(pp.module, pp.layer)
        except (ImportError, AttributeError) as e:
            raise self.error(str(e))
        except Exception as e:  # an error raised while importing the user's module
            raise self.error("importing python_param.module '%s' failed: %s: %s"
                             % (pp.module, type(e).__name__, " ".join(str(e).split())))
        self.py_layer = cls(layer_param)
        self.py_layer.param_str = pp.param_str
        self.py_layer.phase = self.phase
        self.py_layer.blobs = BlobVec(self.blobs, dtype=self.dtype)
        self.blobs = self.py_layer.blobs

    def layer_setup(self, bottom, top):
        self.py_layer.setup(bottom, top)
        self.blobs = self.py_layer.blobs

    def reshape(self, bottom, top):
        self.py_layer.reshape(bottom, top)

    def forward_cpu(self, bottom, top):
        self.py_layer.forward(bottom, top)

    def backward_cpu(self, top, propagate_down, bottom):
        self.py_layer.backward(top, list(propagate_down), bottom)

