"""Built-in implementations of py-faster-rcnn's Python layers (Ren et al., Faster R-CNN).

Nets written for py-faster-rcnn (and the R-FCN / FPN forks that copy its ``lib/``) name Python
layers that live in that project, not in Caffe. When ``python_param.module`` cannot be imported and
(module, layer) is in :data:`KNOWN_LAYERS`, the Python layer uses the class here instead (and logs
it); a module of the user's on ``sys.path`` always wins.

=========================================  ============================================
python_param (module, layer)               caffepy class
=========================================  ============================================
rpn.proposal_layer, ProposalLayer          :class:`proposal.ProposalLayer`
rpn.anchor_target_layer, AnchorTargetLayer :class:`anchor_target.AnchorTargetLayer`
rpn.proposal_target_layer,                 :class:`proposal_target.ProposalTargetLayer`
ProposalTargetLayer
=========================================  ============================================

The layers read py-faster-rcnn's default configuration, :data:`config.cfg` (see that module).
py-faster-rcnn's data layer ``roi_data_layer.layer.RoIDataLayer`` reads its roidb from the
training script and has no stand-in here (``caffepy.zoo`` replaces it with an Input layer).
"""
import importlib

KNOWN_LAYERS = {
    ("rpn.proposal_layer", "ProposalLayer"): ("proposal", "ProposalLayer"),
    ("rpn.anchor_target_layer", "AnchorTargetLayer"): ("anchor_target", "AnchorTargetLayer"),
    ("rpn.proposal_target_layer", "ProposalTargetLayer"):
        ("proposal_target", "ProposalTargetLayer"),
}


def builtin_layer_class(module_name, class_name):
    """caffepy's class standing in for ``module_name.class_name``, or None when there is none."""
    target = KNOWN_LAYERS.get((module_name, class_name))
    if target is None:
        return None
    module = importlib.import_module("%s.%s" % (__name__, target[0]))
    return getattr(module, target[1])
