"""Built-in implementations of py-faster-rcnn's Python layers (Ren et al., Faster R-CNN).

Nets written for py-faster-rcnn (and the R-FCN / FPN forks that copy its ``lib/``) name Python
layers that live in that project, not in Caffe. When ``python_param.module`` cannot be imported,
the Python layer uses the class here instead (and logs it; table in ``caffepy.forks``); a module
of the user's on ``sys.path`` always wins.

=========================================  ============================================
python_param (module, layer)               caffepy class
=========================================  ============================================
rpn.proposal_layer, ProposalLayer          :class:`proposal.ProposalLayer`
rpn.anchor_target_layer, AnchorTargetLayer :class:`anchor_target.AnchorTargetLayer`
rpn.proposal_target_layer,                 :class:`proposal_target.ProposalTargetLayer`
ProposalTargetLayer
roi_data_layer.layer, RoIDataLayer         :class:`roi_data.RoIDataLayer` (minibatches:
                                           ``roi_minibatch``)
=========================================  ============================================

The layers read py-faster-rcnn's default configuration, :data:`config.cfg` (see that module).
The data layer ``RoIDataLayer`` gets its roidb from the training script
(``solver.net.layers[0].set_roidb(roidb)``); ``caffepy.zoo`` replaces it with Input layers.

``compiled`` holds numpy versions of py-faster-rcnn's Cython / CUDA helpers (``bbox_overlaps``,
``cpu_nms``, ``gpu_nms``, fast-rcnn's ``nms``) with their results, which a user's copy of
py-faster-rcnn's ``lib/`` gets when its extensions were never built
(:mod:`caffepy.layers.legacy_import`).
"""
