"""Fork families: layers, built-in Python layers and zoo helpers of the Caffe forks.

One package per family (``yolo``, ``ssd``, ``detection``, ``flownet``, ``video``, ``segmentation``,
``face``, ``ocr``, ``nvcaffe``, ``misc``); each package's docstring lists its layer types, its
built-in stand-ins for well-known Python layers, and its schema fragment in proto/additions.d/.
Nothing in the core imports a family: the layer registry walks this package by name
(``caffepy.layers._all``), and each module registers its types (``register_layer`` /
``register_variant``) and each family its Python-layer stand-ins
(``caffepy.layers.python_layer.register_stand_in``) when imported.

The old import paths ``caffepy.contrib.*`` and ``caffepy.layers.fork_*`` resolve to the modules
here (``caffepy._aliases``).
"""
from ..layers.python_layer import builtin_layer_class  # noqa: E402,F401  (the old caffepy.contrib name)
