"""Implementations of well-known third-party layers that are not part of Caffe itself.

When a Python layer's ``python_param.module`` cannot be imported and (module, layer) is in
:data:`KNOWN_PYTHON_LAYERS`, the Python layer uses caffepy's class instead (and logs it); a module
of the user's on ``sys.path`` always wins.

* ``caffepy.contrib.frcnn``: py-faster-rcnn's RPN layers (``rpn.proposal_layer.ProposalLayer``,
  ``rpn.anchor_target_layer.AnchorTargetLayer``, ``rpn.proposal_target_layer.ProposalTargetLayer``)
  and its training data layer ``roi_data_layer.layer.RoIDataLayer`` (fed by ``set_roidb``).
* ``caffepy.contrib.pyloss``: Caffe's example ``pyloss.EuclideanLossLayer``.
* ``caffepy.contrib.spatial_dropout``: ENet's ``spatial_dropout.SpatialDropoutLayer``.
* ``caffepy.contrib.ctpn``: CTPN's ``layers.text_proposal_layer.ProposalLayer``.
* ``caffepy.contrib.detectnet``: NVCaffe DetectNet's ``caffe.layers.detectnet.clustering``
  ``ClusterDetections`` and ``ClusterGroundtruth``, and ``caffe.layers.detectnet.mean_ap``
  ``ScoreDetections`` and ``mAP``.
"""
import importlib

KNOWN_PYTHON_LAYERS = {
    ("rpn.proposal_layer", "ProposalLayer"): ("frcnn.proposal", "ProposalLayer"),
    ("rpn.anchor_target_layer", "AnchorTargetLayer"): ("frcnn.anchor_target", "AnchorTargetLayer"),
    ("rpn.proposal_target_layer", "ProposalTargetLayer"):
        ("frcnn.proposal_target", "ProposalTargetLayer"),
    ("roi_data_layer.layer", "RoIDataLayer"): ("frcnn.roi_data", "RoIDataLayer"),
    ("pyloss", "EuclideanLossLayer"): ("pyloss", "EuclideanLossLayer"),
    ("spatial_dropout", "SpatialDropoutLayer"): ("spatial_dropout", "SpatialDropoutLayer"),
    ("layers.text_proposal_layer", "ProposalLayer"): ("ctpn", "TextProposalLayer"),
    ("caffe.layers.detectnet.clustering", "ClusterDetections"): ("detectnet", "ClusterDetections"),
    ("caffe.layers.detectnet.clustering", "ClusterGroundtruth"):
        ("detectnet", "ClusterGroundtruth"),
    ("caffe.layers.detectnet.mean_ap", "ScoreDetections"): ("detectnet", "ScoreDetections"),
    ("caffe.layers.detectnet.mean_ap", "mAP"): ("detectnet", "mAP"),
}


def builtin_layer_class(module_name, class_name):
    """caffepy's class standing in for ``module_name.class_name``, or None when there is none."""
    target = KNOWN_PYTHON_LAYERS.get((module_name, class_name))
    if target is None:
        return None
    module = importlib.import_module("%s.%s" % (__name__, target[0]))
    return getattr(module, target[1])
