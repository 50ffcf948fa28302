"""Curve-Text-Detector's (Yuliang-Liu/Curve-Text-Detector) layers: its RPN proposal Python layer
and its ``Convert`` layer (TLOC, the recurrent offset connections of its curve-text head).

* ``CtdProposalLayer``: the fork's ``rpn.proposal_layer.ProposalLayer``, py-faster-rcnn's layer
  with the fork's own anchors; a stand-in for that name beside py-faster-rcnn's, chosen by the
  score / delta channels (12 anchors by default, py-faster-rcnn's 9).
* ``ConvertLayer``: ``N x D x ... x W`` features to an LSTM's ``W x N x D`` sequence and its
  ``W x N`` sequence-continuation indicators.
"""
from ...layers.base import Layer, register_layer
from ...layers.stand_ins import StandInForm
from .frcnn import boxes
from .frcnn.config import Section
from .frcnn.proposal import ProposalLayer, channels_check

RATIOS = (0.25, 0.5, 2)
SCALES = (4, 8, 16, 22)


def ctd_anchors(params):
    """The fork's anchors for a parsed ``param_str``: ratio-major, scale-minor (as
    :func:`caffepy.forks.detection.frcnn.boxes.generate_anchors`)."""
    return boxes.generate_anchors(16, RATIOS, params.get("scales", SCALES))


def default_config():
    rpn = dict(RPN_NMS_THRESH=0.7, RPN_MIN_SIZE=16, RPN_PRE_NMS_TOP_N=6000,
               RPN_POST_NMS_TOP_N=300)
    return Section(TEST=Section(rpn), TRAIN=Section(
        rpn, RPN_NMS_THRESH=0.5, RPN_PRE_NMS_TOP_N=12000, RPN_POST_NMS_TOP_N=2000))


cfg = default_config()


class CtdProposalLayer(ProposalLayer):
    """Curve-Text-Detector's ``rpn.proposal_layer.ProposalLayer``.

        layer { type: "Python" bottom: "rpn_cls_prob_reshape" bottom: "rpn_bbox_pred"
                bottom: "im_info" top: "rois"                    # top: "scores" optional
                python_param { module: "rpn.proposal_layer" layer: "ProposalLayer"
                               param_str: "'feat_stride': 16" } }

    The fork kept py-faster-rcnn's computation (:mod:`caffepy.forks.detection.frcnn.proposal`:
    anchors at every cell, deltas, clipping to ``im_info``, the ``RPN_MIN_SIZE * scale`` filter,
    pre-NMS top N, NMS, post-NMS top N; tops ``rois`` ``R x 5``, ``scores`` ``R x 1``, set up as
    ``1 x 5`` and ``1 x 1 x 1 x 1``) and changed the anchors: aspect ratios ``h / w`` of
    ``(0.25, 0.5, 2)`` around the 16 x 16 base box, times ``param_str`` ``scales`` (default
    ``(4, 8, 16, 22)``), so 12 anchors by default: ``24 x H x W`` scores, ``48 x H x W`` deltas.
    ``param_str``: ``feat_stride`` (required), ``scales``; the fork reads no ``ratios`` or
    ``base_size``.

    Settings (the fork's ``lib/fast_rcnn/config.py``, :data:`cfg`): TEST as py-faster-rcnn's
    (pre-NMS 6000, post-NMS 300, NMS 0.7, min size 16); TRAIN pre-NMS 12000, post-NMS 2000,
    NMS 0.5, min size 16 (its recipe ``experiments/cfgs/rfcn_ctd.yml`` sets TRAIN pre-NMS 5000,
    post-NMS 300: change ``cfg`` in place for those). As a stand-in it is chosen when the
    channels fit its anchors and not py-faster-rcnn's; where both fit (``scales`` of the same
    length, no ``ratios``), py-faster-rcnn's layer, registered first, is used. No gradient flows
    back.
    """

    stand_in_form = StandInForm("Curve-Text-Detector", bottoms=3, tops=(1, 2),
                                shapes=channels_check(ctd_anchors),
                                note="2A score and 4A delta channels for A anchors of ratios "
                                     "0.25 0.5 2 (12 unless param_str has scales)")

    def make_anchors(self, params):
        return ctd_anchors(params)

    def config(self):
        return cfg

    def setup(self, bottom, top):
        super(CtdProposalLayer, self).setup(bottom, top)
        if len(top) > 1:
            top[1].reshape(1, 1, 1, 1)


@register_layer("Convert")
class ConvertLayer(Layer):
    """Curve-Text-Detector's ``Convert``: features to an LSTM's sequence.

    Bottom ``N x D x ... x W`` (the fork indexes it as ``N x D x W``: the axes between D and the
    last have size 1 in its nets). Tops: ``W x N x D`` with ``top[w, n, d] = bottom[n, d, w]``
    (the last axis becomes time), and, when there is a second top, the ``W x N`` continuation
    indicators of Caffe's LSTM (0 at ``w = 0``, else 1). Backward: the gradient transposed back
    to the bottom. No prototxt fields.
    """

    exact_num_bottom_blobs = 1
    min_top_blobs = 1
    max_top_blobs = 2

    def reshape(self, bottom, top):
        shape = bottom[0].shape
        if len(shape) < 3 or bottom[0].count != shape[0] * shape[1] * shape[-1]:
            raise self.error("bottom must be N x D x ... x W with the middle axes of size 1, got "
                             "%s" % (tuple(shape),))
        n, d, w = shape[0], shape[1], shape[-1]
        top[0].reshape(w, n, d)
        if len(top) > 1:
            top[1].reshape(w, n)

    def forward_cpu(self, bottom, top):
        n, d, w = bottom[0].shape[0], bottom[0].shape[1], bottom[0].shape[-1]
        top[0].data[...] = bottom[0].data.reshape(n, d, w).transpose(2, 0, 1)
        if len(top) > 1:
            top[1].data[...] = 1
            top[1].data[0] = 0

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.transpose(1, 2, 0).reshape(bottom[0].shape)
