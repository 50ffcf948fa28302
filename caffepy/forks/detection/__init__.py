"""Two-stage detectors: py-faster-rcnn, R-FCN, PVANet, MSCNN and Cascade R-CNN, and the RPN
proposal layers of Curve-Text-Detector and SSH.

Modules: ``roi`` (ROIPooling, PSROIPooling), ``proposal`` (the C++ ``Proposal`` layer), ``rfcn``
(R-FCN's SoftmaxWithLoss / SmoothL1Loss with per-instance tops), ``ohem`` (SoftmaxWithLossOHEM,
SmoothL1LossOHEM, BoxAnnotatorOHEM), ``mscnn`` (BoxOutput, DecodeBBox), ``mscnn_train``
(DetectionLoss, SmoothL1Loss variants), ``cascade_rcnn`` (BoxGroupOutput, ScaleRoute, ROIAlign),
``nnop_roi_align`` (nnop/caffe's ROIAlign, commit 023b8b31: the most of four bilinear samples per
bin, taken when ``roi_align_param`` is set; nnop/mtnet's nets),
``cascade_target`` (ProposalTarget, DetectionEvaluate variant), ``cascade_train`` (HardMining,
BboxAccuracy, DetectionAccuracy, DetectionGroupLoss / Accuracy, FrcnnOutput), ``zoo_mscnn`` (the
input shapes of MSCNN / Cascade R-CNN data layers for the zoo helpers), ``frcnn_cpp``
(makefile/frcnn's C++ FrcnnProposal, FrcnnAnchorTarget, FrcnnProposalTarget, configured from the
fork's JSON config), ``sds_rcnn`` (SDS-RCNN's SoftmaxWithLoss with a per-label weight bottom),
``ctd`` and ``ssh`` (Curve-Text-Detector's and SSH's Python proposal layers), ``rstar_cnn`` and
``rstar_data`` (R*CNN's MIL, Sum and its context-box data layer), ``rpn_cpp`` (the C++ ``RPN``
proposal layer of JacobWang95/PureCPP_FRCNN and its copies, rpn_param), ``conadd``
(busyboxs/roi_roi's zero-padding sum Conadd), ``cambricon`` (Cambricon/caffe's ImageDetect, DetectionOut and
DetectionPoseOutput), ``mnc`` (MNC's InnerProductBlob, MaskPooling, ROIWarping, ROIMaskPooling,
MaskResize; their harvested fields in caffepy.proto.harvest_computed.COMPUTED), ``rotated_roi``
(RotateROIPooling of CRPN and, with three bottoms, of RRPN), ``rotated_align`` (RotateROIAlign
of CRPN and RRPN), ``rfcn_align`` (PSROIAlign,
DeformablePSROIPooling), ``deform_conv`` (makefile/frcnn's DeformableConvolution),
``attention_mask`` (the AttentionMask proposal forks' TopK, NormalizedSigmoidCrossEntropyLoss,
SlidingWindow, FlagsToIndices, ArgMaxMy), ``reinspect`` (ApolloCaffe's HungarianLoss and NumpyData).
Built-in Python layers, used when the user's module is not on sys.path:

===============================================  ===========================================
python_param (module, layer)                     caffepy class (the fork's form)
===============================================  ===========================================
rpn.proposal_layer, ProposalLayer                ``frcnn.proposal.ProposalLayer``
                                                 (py-faster-rcnn: 3 bottoms, 2A / 4A channels
                                                 for its 9 anchors or param_str's);
                                                 ``ctd.CtdProposalLayer`` (Curve-Text-Detector:
                                                 the same bottoms for its 12 anchors);
                                                 R-C3D's twin layer (2 bottoms) is in
                                                 ``caffepy.forks.video.rc3d``
rpn.anchor_target_layer, AnchorTargetLayer       ``frcnn.anchor_target.AnchorTargetLayer``
rpn.proposal_target_layer, ProposalTargetLayer   ``frcnn.proposal_target.ProposalTargetLayer``
roi_data_layer.layer, RoIDataLayer               ``frcnn.roi_data.RoIDataLayer``;
                                                 ``rstar_data.RStarRoIDataLayer`` (R*CNN: 4
                                                 tops, with the context boxes)
SSH.layers.proposal_layer, ProposalLayer         ``ssh.SshProposalLayer`` (SSH's face boxes)
===============================================  ===========================================

Where several classes stand in for one name, the first registered whose form fits the layer is
used (``caffepy.layers.stand_ins``): py-faster-rcnn's first, so the layers that fit it keep it.
Schema: proto/additions.d/mscnn_cascade.json, surveyed_forks.json (PVANet's proposal_param).
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('rpn.proposal_layer', 'ProposalLayer', 'frcnn.proposal:ProposalLayer'),
        ('rpn.proposal_layer', 'ProposalLayer', 'ctd:CtdProposalLayer'),
        ('rpn.anchor_target_layer', 'AnchorTargetLayer', 'frcnn.anchor_target:AnchorTargetLayer'),
        ('rpn.proposal_target_layer', 'ProposalTargetLayer', 'frcnn.proposal_target:ProposalTargetLayer'),
        # R*CNN's four-top layer first: py-faster-rcnn's (3 or 6 tops) never has its form
        ('roi_data_layer.layer', 'RoIDataLayer', 'rstar_data:RStarRoIDataLayer'),
        ('roi_data_layer.layer', 'RoIDataLayer', 'frcnn.roi_data:RoIDataLayer'),
        ('SSH.layers.proposal_layer', 'ProposalLayer', 'ssh:SshProposalLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
