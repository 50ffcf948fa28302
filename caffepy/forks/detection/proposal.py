"""The fork C++ ``Proposal`` layer (py-faster-rcnn's C++ port in the R-FCN / PVANet forks): the
computation of py-faster-rcnn's ``rpn.proposal_layer.ProposalLayer``
(:mod:`caffepy.forks.detection.frcnn.proposal`), configured from the layer's ``proposal_param``."""
from ...layers.base import Layer, register_layer


@register_layer("Proposal")
class ProposalLayer(Layer):
    """The fork C++ ``Proposal`` layer: ``caffepy.forks.detection.frcnn.proposal`` (see there) configured
    from ``proposal_param { feat_stride: 16 base_size: 16 min_size: 16 ratio: [0.5, 1, 2]
    scale: [8, 16, 32] pre_nms_topn: 6000 post_nms_topn: 300 nms_thresh: 0.7 }`` when the schema
    has that message, else from those defaults. Bottoms: scores, bbox deltas, im_info; tops: rois
    (and scores)."""

    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        from .frcnn import proposal
        self.impl = proposal.ProposalLayer(self.layer_param)
        self.impl.phase = self.phase
        p = _proposal_param(self.layer_param)
        self.impl.param_str = repr({"feat_stride": p["feat_stride"], "base_size": p["base_size"],
                                    "ratios": p["ratio"], "scales": p["scale"]})
        self.impl.setup(bottom, top)
        self.impl.settings = dict(RPN_PRE_NMS_TOP_N=p["pre_nms_topn"],
                                  RPN_POST_NMS_TOP_N=p["post_nms_topn"],
                                  RPN_NMS_THRESH=p["nms_thresh"], RPN_MIN_SIZE=p["min_size"])

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        self.impl.forward(bottom, top)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


_PROPOSAL_DEFAULTS = dict(feat_stride=16, base_size=16, min_size=16, ratio=[0.5, 1.0, 2.0],
                          scale=[8.0, 16.0, 32.0], pre_nms_topn=6000, post_nms_topn=300,
                          nms_thresh=0.7)


def _proposal_param(layer_param):
    out = dict(_PROPOSAL_DEFAULTS)
    if "proposal_param" not in layer_param.DESCRIPTOR.fields_by_name:
        return out
    msg = layer_param.proposal_param
    for key in out:
        if key not in msg.DESCRIPTOR.fields_by_name:
            continue
        value = getattr(msg, key)
        if isinstance(out[key], list):
            if len(value):
                out[key] = list(value)
        elif msg.HasField(key):
            out[key] = value
    return out
