"""Inference mode: ``Net(proto, TEST, weights=w, optimize=True)``, ``net.optimize()``,
``caffepy time|test --optimize [--engine ...]``.

Modules: ``engine`` (which engine runs the mode: caffepy's own steps, onnxruntime or openvino,
``CAFFEPY_INFER_ENGINE``; :func:`optimize`), ``choice`` (how ``auto`` chooses: the check
against the exact path, the timing, the cache of choices), the onnxruntime engine: ``parts``
(the net cut into onnxruntime and caffepy parts, each onnxruntime part's ONNX model, BatchNorm /
Scale folded first) and ``ort`` (the sessions, running the parts, the check), the openvino
engine: ``ov`` (the same parts compiled by openvino); caffepy's own engine: ``plan`` (the
execution plan: folding, fused activations, identity layers removed, Concat elimination,
buffers reused by liveness; ``trial``, auto's candidate), ``steps`` (each step compiled
into a closure: GEMM / Winograd convolutions, depthwise, LRN, pooling), ``winograd``
(F(2x2, 3x3)), ``shards`` (the batch split over threads), ``kernels`` (numba kernels of the
steps, forward only); shared: ``fold`` (BatchNorm / Scale / Bias folded into the weights),
``threads`` (the thread limit; the BLAS / numba thread setting that has been fastest).

Importing this package installs :func:`optimize` as ``Net.optimize``'s front door
(``caffepy.net.set_optimizer``): the net never imports inference mode.
"""
from .engine import optimize  # noqa: F401
from .plan import Plan  # noqa: F401
from ..net import set_optimizer as _set_optimizer

_set_optimizer(optimize)
