"""Layers, one module per family; each registers its prototxt type strings with ``register_layer``."""
from .base import (Layer, LossLayer, NeuronLayer, create_layer, get_layer_class,  # noqa: F401
                   layer_type_list, register_layer)
