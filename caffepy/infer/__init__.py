"""Inference mode: ``Net(proto, TEST, weights=w, optimize=True)``, ``net.optimize()``,
``caffepy time|test --optimize``.

Modules: ``plan`` (the execution plan: folding, fused activations, identity layers removed, Concat
elimination, buffers reused by liveness; :func:`optimize`), ``fold`` (BatchNorm / Scale / Bias
folded into the weights), ``steps`` (each step compiled into a closure: GEMM / Winograd
convolutions, depthwise, LRN, pooling), ``winograd`` (F(2x2, 3x3)), ``shards`` (the batch split
over threads), ``threads`` (the BLAS / numba thread setting that has been fastest),
``kernels`` (numba kernels of the steps, forward only).
"""
from .plan import Plan, optimize  # noqa: F401
