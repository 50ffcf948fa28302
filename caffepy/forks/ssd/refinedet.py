"""RefineDet (sfzhang15/RefineDet): the ODM's MultiBoxLoss and DetectionOutput, which read the
anchor refinement module's (ARM's) objectness and offsets as extra bottoms.

They keep SSD's type names, so they are variants chosen per layer (``register_variant``): a
MultiBoxLoss with 5 or 6 bottoms (SSD's takes 4), a DetectionOutput with 4 or 5 (SSD's takes 3,
or 4 where the 4th is only drawn on by ``visualize``: with 4 bottoms the 4th is the ARM
objectness when it holds N x P x 2 values, else SSD's ignored bottom).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import register_variant
from .detection import DetectionOutputLayer, decode_boxes
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


@register_variant("DetectionOutput", lambda lp: len(lp.bottom) in (4, 5)
                  and not lp.detection_output_param.HasField("use_polygon"))
class RefineDetDetectionOutputLayer(DetectionOutputLayer):
    """SSD's DetectionOutput on RefineDet's ODM predictions (sfzhang15/RefineDet,
    src/caffe/layers/detection_output_layer.cpp; OSGetConfidenceScores and
    CasRegDecodeBBoxesAll in src/caffe/util/bbox_util.cpp).

    As SSD's DetectionOutput, except:
      * ARM objectness (bottom 3): a prior whose arm_conf[n, p, 1] is < ``objectness_score``
        (default 0.01) gets the scores 1 for class 0 and 0 for every other class (class 0
        whatever ``background_label_id``, as the fork), so it yields no detection;
      * ARM offsets (bottom 4): each image's priors are refined first,
        r = decode(prior, variance, arm_loc) (``code_type``, not clipped), and the ODM offsets
        are decoded against r with the prior variances.
    With 4 bottoms whose 4th does not hold N x P x 2 values, the 4th is SSD's (``visualize``)
    bottom and ignored.

    prototxt: SSD's ``detection_output_param`` plus ``objectness_score: 0.01``; share_location
    must be true with ARM offsets. Bottoms: odm loc (N x P*L*4), odm conf (N x P*num_classes,
    probabilities), priors (1 x 2 x P*4), arm conf (N x P*2 probabilities) [, arm loc
    (N x P*4)]. Top: 1 x 1 x num_kept x 7.
    """
    max_bottom_blobs = 5

    def layer_setup(self, bottom, top):
        DetectionOutputLayer.layer_setup(self, bottom, top)
        if len(bottom) == 5 and not self.share_location:
            raise self.error("share_location must be true with the ARM offsets (5 bottoms)")

    def reshape(self, bottom, top):
        DetectionOutputLayer.reshape(self, bottom[:3], top)
        N, P = bottom[0].shape[0], self.P
        self.arm_conf = len(bottom) == 5 or bottom[3].count == N * P * 2
        if len(bottom) == 5:
            if bottom[3].count != N * P * 2:
                raise self.error("arm conf (bottom[3], shape %s) must hold N x P x 2 = %d x %d x 2 "
                                 "values" % (bottom[3].shape, N, P), ShapeError)
            if bottom[4].count != N * P * 4:
                raise self.error("arm loc (bottom[4], shape %s) must hold N x P x 4 = %d x %d x 4 "
                                 "values" % (bottom[4].shape, N, P), ShapeError)

    def _image_prior(self, bottom, n, prior):
        if len(bottom) < 5:
            return prior
        arm = bottom[4].data.reshape(bottom[0].shape[0], self.P, 4)[n].astype(np.float64)
        refined = decode_boxes(prior[0], prior[1], arm, self.code_type, self.variance_encoded)
        return np.stack([refined, prior[1]])

    def _image_conf(self, bottom, n, conf):
        if not self.arm_conf:
            return conf
        obj = bottom[3].data.reshape(bottom[0].shape[0], self.P, 2)[n, :, 1]
        low = obj < self.layer_param.detection_output_param.objectness_score
        out = conf.copy()
        out[low] = 0.0
        out[low, 0] = 1.0
        return out
