"""Capsule networks of chenzhenhua986/CAFFE-CapsNet.

Modules: ``ops`` (the per-capsule layers: Squash, CapsuleLen, CapsuleMask, CapsuleRelu,
CapsuleReshape, MarginLoss), ``routing`` (the layers with weights: CapsuleTransform,
CapsuleRouting, DynamicRouting, CapsuleConvTransform, CapsuleConvRouting, Tensor). Not built:
the fork's CapsuleDeconvTransform / CapsuleDeconvRouting, whose forward reads its bottom at
output-grid positions and adds into a top it never clears (no consistent function to port).
Schema: proto/additions.d/census_forks.json (the fork's parameter messages; its LayerParameter
numbers 148-164 collide with BVLC's, so they are renumbered from 11100).
"""
