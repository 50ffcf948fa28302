"""Two-stage detectors: py-faster-rcnn, R-FCN, PVANet, MSCNN and Cascade R-CNN.

Modules: ``roi`` (ROIPooling, PSROIPooling), ``proposal`` (the C++ ``Proposal`` layer), ``rfcn``
(R-FCN's SoftmaxWithLoss / SmoothL1Loss with per-instance tops), ``ohem`` (SoftmaxWithLossOHEM,
SmoothL1LossOHEM, BoxAnnotatorOHEM), ``mscnn`` (BoxOutput, DecodeBBox), ``mscnn_train``
(DetectionLoss, SmoothL1Loss variants), ``cascade_rcnn`` (BoxGroupOutput, ScaleRoute, ROIAlign),
``cascade_target`` (ProposalTarget, DetectionEvaluate variant), ``cascade_train`` (HardMining,
BboxAccuracy, DetectionAccuracy, DetectionGroupLoss / Accuracy, FrcnnOutput), ``zoo_mscnn`` (the
input shapes of MSCNN / Cascade R-CNN data layers for the zoo helpers), ``frcnn_cpp``
(makefile/frcnn's C++ FrcnnProposal, FrcnnAnchorTarget, FrcnnProposalTarget, configured from the
fork's JSON config), ``sds_rcnn`` (SDS-RCNN's SoftmaxWithLoss with a per-label weight bottom).
Built-in Python layers (``frcnn``): py-faster-rcnn's ``rpn.proposal_layer.ProposalLayer``,
``rpn.anchor_target_layer.AnchorTargetLayer``, ``rpn.proposal_target_layer.ProposalTargetLayer``
and ``roi_data_layer.layer.RoIDataLayer``, used when the user's module is not on sys.path.
Schema: proto/additions.d/mscnn_cascade.json, surveyed_forks.json (PVANet's proposal_param).
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('rpn.proposal_layer', 'ProposalLayer', 'frcnn.proposal:ProposalLayer'),
        ('rpn.anchor_target_layer', 'AnchorTargetLayer', 'frcnn.anchor_target:AnchorTargetLayer'),
        ('rpn.proposal_target_layer', 'ProposalTargetLayer', 'frcnn.proposal_target:ProposalTargetLayer'),
        ('roi_data_layer.layer', 'RoIDataLayer', 'frcnn.roi_data:RoIDataLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
