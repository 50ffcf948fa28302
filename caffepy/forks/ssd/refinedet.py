"""RefineDet (sfzhang15/RefineDet): the ODM's MultiBoxLoss, which reads the anchor refinement
module's (ARM's) objectness and offsets as extra bottoms.

It keeps SSD's type name, so it is a variant chosen per layer (``register_variant``): a
MultiBoxLoss with 5 or 6 bottoms (SSD's takes 4).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import register_variant
from .detection import decode_boxes
from .multibox import MultiBoxLossLayer


@register_variant("MultiBoxLoss", lambda lp: len(lp.bottom) in (5, 6))
class RefineDetMultiBoxLossLayer(MultiBoxLossLayer):
    """SSD's MultiBox loss for RefineDet's object detection module (sfzhang15/RefineDet,
    src/caffe/layers/multibox_loss_layer.cpp and src/caffe/util/bbox_util.cpp:
    CasRegFindMatches, CasRegEncodeLocPrediction, MineHardExamples).

    Everything is SSD's ``MultiBoxLoss`` (same fields, loss and gradients) except:
      * 6 bottoms: each image's priors are first refined by its ARM offsets,
        r = decode(prior, variance, arm_loc) (``code_type``, not clipped); with
        ``use_prior_for_matching`` the refined boxes are matched to the ground truth, and every
        positive's target is encode(truth, r, variance) (``bp_inside`` also tests r). Without
        use_prior_for_matching the decoded predictions are matched, decoded from the unrefined
        priors, as the fork does. HARD_EXAMPLE mining scores positives' location loss against
        the unrefined priors, as the fork does.
      * 5 or 6 bottoms: mining (either type) only picks priors whose ARM objectness
        arm_conf[n, p, 1] is >= ``objectness_score`` (default 0.01); positives are kept whatever
        their objectness.
    No gradient to the ARM bottoms (the fork has none).

    prototxt: SSD's ``multibox_loss_param`` plus ``objectness_score: 0.01``; ``share_location``
    must be true with 6 bottoms. Bottoms: odm loc (N x P*4), odm conf (N x P*C), priors
    (1 x 2 x P*4), ground truth (1 x 1 x G x 8), arm conf (N x P*2 probabilities, e.g. the
    flattened softmax) [, arm loc (N x P*4)]. Top: the scalar loss.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 5
    max_bottom_blobs = 6

    def layer_setup(self, bottom, top):
        MultiBoxLossLayer.layer_setup(self, bottom, top)
        if len(bottom) == 6 and not self.p.share_location:
            raise self.error("share_location must be true with the ARM offsets (6 bottoms)")

    def reshape(self, bottom, top):
        MultiBoxLossLayer.reshape(self, bottom[:4], top)
        N, P = bottom[0].shape[0], self.P
        if bottom[4].count != N * P * 2:
            raise self.error("arm conf (bottom[4], shape %s) must hold N x P x 2 = %d x %d x 2 "
                             "values" % (bottom[4].shape, N, P), ShapeError)
        if len(bottom) == 6 and bottom[5].count != N * P * 4:
            raise self.error("arm loc (bottom[5], shape %s) must hold N x P x 4 = %d x %d x 4 "
                             "values" % (bottom[5].shape, N, P), ShapeError)
        self.objectness = bottom[4].data.reshape(N, P, 2)[:, :, 1].astype(np.float64)

    def _image_priors(self, bottom, b, priors, variances):
        if len(bottom) < 6:
            return priors
        arm = bottom[5].data.reshape(bottom[0].shape[0], self.P, 4)[b].astype(np.float64)
        return decode_boxes(priors, variances, arm, self.p.code_type,
                            self.p.encode_variance_in_target)

    def _eligible(self, b, candidates):
        return self.objectness[b, candidates] >= self.p.objectness_score

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[4:]):
            raise self.error("cannot backpropagate to the ARM inputs (bottoms 4 and 5)")
        MultiBoxLossLayer.backward_cpu(self, top, propagate_down, bottom)
