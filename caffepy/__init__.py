"""caffepy: a Caffe-compatible deep-learning framework in Python.

``import caffepy as caffe`` gives the pycaffe surface: ``Net``, ``TRAIN`` / ``TEST``, solvers,
``set_mode_cpu`` / ``set_mode_gpu``, ``layers`` / ``params`` / ``NetSpec``, ``io``, ``draw``.
"""
__version__ = "0.1.0"

from .common import set_mode_cpu, set_mode_gpu, set_device, set_random_seed  # noqa: F401,E402
from .proto.caffe_pb2 import TRAIN, TEST  # noqa: F401,E402
from .layers.base import Layer as _LayerBase, layer_type_list  # noqa: F401,E402
