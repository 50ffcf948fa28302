"""Export caffepy nets to ONNX (``caffepy export``; ``pip install 'caffepy[onnx]'``).

    from caffepy import onnx as caffe_onnx
    model = caffe_onnx.export(net, "model.onnx", opset=13, dynamic_batch=False)
    caffe_onnx.check(net, model)          # onnxruntime vs caffepy, <= 1e-4 relative

``export`` takes a built :class:`caffepy.Net` (or a .prototxt path plus ``weights``), converts
each layer with Caffe's exact semantics (one module per family: ``ops_conv``, ``ops_neuron``,
``ops_norm``, ``ops_shape``, ``ops_fork``), keeps layer names as node names and blob names as
value names, and writes the model atomically. A layer without a faithful ONNX form raises
:class:`ExportError`, one line naming the layer, its type and why. The ``onnx`` package is
imported only inside the functions that need it, so this package never shadows it.

``export_part`` (``part.py``) builds the model of a run of consecutive layers at once, with the
whole net's value names: inference mode's onnxruntime parts (caffepy.infer.parts).
"""
from .builder import ExportError
from .check import check, compare
from .export import DEFAULT_OPSET, export, load_net, to_model
from .part import export_part

__all__ = ["ExportError", "check", "compare", "export", "export_part", "load_net", "to_model",
           "DEFAULT_OPSET"]
