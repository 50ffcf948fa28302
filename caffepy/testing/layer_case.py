"""Helpers for layer tests: build a layer from a prototxt snippet and blobs from arrays.

    layer = make_layer('type: "ReLU" relu_param { negative_slope: 0.1 }', dtype=np.float64)
    bottom = make_blobs([x]); top = make_blobs(1)
    run_layer(layer, bottom, top)           # setup + forward, returns top arrays
    check_layer_gradient(layer, bottom, top, kink_range=1e-3)
"""
import numpy as np

from ..blob import Blob
from ..layers.base import create_layer
from ..proto import caffe_pb2


def make_layer(text, dtype=np.float64, phase=caffe_pb2.TEST, name="L"):
    """Create a layer from LayerParameter text (``name``/``type`` lines may be omitted except type)."""
    from google.protobuf import text_format
    lp = caffe_pb2.LayerParameter()
    text_format.Parse(text, lp)
    if not lp.name:
        lp.name = name
    lp.phase = phase
    return create_layer(lp, phase=phase, dtype=dtype)


def make_blobs(spec, dtype=np.float64):
    """``spec``: an int (that many empty blobs) or a list of arrays (copied into new blobs)."""
    if isinstance(spec, int):
        return [Blob((), dtype=dtype) for _ in range(spec)]
    out = []
    for a in spec:
        a = np.asarray(a, dtype=dtype)
        b = Blob(a.shape, dtype=dtype)
        b.data[...] = a
        out.append(b)
    return out


def run_layer(layer, bottom, top):
    """Set up and run forward; returns copies of the top data arrays."""
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    return [t.data.copy() for t in top]
