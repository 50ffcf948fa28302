"""``caffe._caffe``: pycaffe's compiled module (Boost.Python), which some Python layers import from
directly (``from caffe._caffe import RawBlobVec``).

Its classes and functions are caffepy's under pycaffe's names (``Net``, the solvers, ``Layer``,
``Blob``, ``set_mode_cpu``, ``layer_type_list``, ... looked up on :mod:`caffepy` on first use, as
``import caffe`` does). Its vector wrappers are lists, which is what caffepy hands a Python layer:
``BlobVec`` (a layer's parameter blobs, with ``add_blob``), ``RawBlobVec`` (the bottom and top
blobs), ``LayerVec``, ``StringVec``, ``IntVec``, ``BoolVec``.
"""
import caffepy as _caffepy
from caffepy.layers.python_layer import BlobVec  # noqa: F401


class RawBlobVec(list):
    """The bottom or top blobs of a layer (pycaffe: ``vector<Blob*>``)."""


class LayerVec(list):
    """A net's layers (pycaffe: ``vector<Layer*>``)."""


class StringVec(list):
    """pycaffe's ``vector<string>``."""


class IntVec(list):
    """pycaffe's ``vector<int>``."""


class BoolVec(list):
    """pycaffe's ``vector<bool>``."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        value = getattr(_caffepy, name)
    except AttributeError:
        raise AttributeError("module 'caffe._caffe' (caffepy) has no attribute '%s'" % name)
    globals()[name] = value
    return value
