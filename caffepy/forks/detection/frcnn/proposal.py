"""py-faster-rcnn's ``rpn.proposal_layer.ProposalLayer``: region proposals from RPN outputs.

    layer { type: "Python" bottom: "rpn_cls_prob_reshape" bottom: "rpn_bbox_pred" bottom: "im_info"
            top: "rois" top: "scores"    # scores optional
            python_param { module: "rpn.proposal_layer" layer: "ProposalLayer"
                           param_str: "'feat_stride': 16" } }

Bottoms: ``scores`` ``N x 2A x H x W`` (background probabilities in the first A channels, object
probabilities in the last A), ``bbox_deltas`` ``N x 4A x H x W``, ``im_info`` ``N x 3`` (image
height, width, scale). For each image: the A anchors (``boxes.generate_anchors``) are placed at
every cell (stride ``feat_stride``), moved by the deltas, clipped to the image, those narrower or
lower than ``RPN_MIN_SIZE * scale`` dropped, the best ``RPN_PRE_NMS_TOP_N`` by object score kept,
NMS at ``RPN_NMS_THRESH``, the best ``RPN_POST_NMS_TOP_N`` kept (values from ``config.cfg``, TRAIN
or TEST by the layer's phase). Tops: ``rois`` ``R x 5`` ``[image index, x1, y1, x2, y2]``, and
``scores`` ``R x 1``. py-faster-rcnn takes one image; here each image of the batch is processed
in turn. param_str: ``feat_stride`` (required), and, as in forks, ``scales`` (default
``(8, 16, 32)``), ``ratios`` (``(0.5, 1, 2)``), ``base_size`` (16). No gradient flows back.

The fork C++ layer ``Proposal`` (``proposal_param { feat_stride base_size min_size ratio scale
pre_nms_topn post_nms_topn nms_thresh }`` where the schema has it) runs the same computation.
"""
import numpy as np

from ....layers.python_layer import Layer
from ....layers.stand_ins import StandInForm
from . import boxes
from .config import cfg


def propose(scores, deltas, im_info, anchors, feat_stride, pre_nms_top_n, post_nms_top_n,
            nms_thresh, min_size):
    """Proposals ``(R x 4, R)`` of one image from its ``2A x H x W`` scores, ``4A x H x W``
    deltas and ``im_info`` row (see module doc); ``nms_thresh`` None: no NMS (and no
    ``post_nms_top_n``)."""
    a = anchors.shape[0]
    height, width = scores.shape[-2:]
    all_anchors = boxes.shifted_anchors(anchors, height, width, feat_stride)
    fg = scores[a:].transpose(1, 2, 0).reshape(-1)
    d = deltas.transpose(1, 2, 0).reshape(-1, 4)
    props = boxes.clip_boxes(boxes.bbox_transform_inv(all_anchors, d), im_info[:2])
    min_side = min_size * im_info[2]
    keep = np.where((props[:, 2] - props[:, 0] + 1 >= min_side) &
                    (props[:, 3] - props[:, 1] + 1 >= min_side))[0]
    props, fg = props[keep], fg[keep]
    order = np.argsort(-fg, kind="stable")
    if pre_nms_top_n > 0:
        order = order[:pre_nms_top_n]
    props, fg = props[order], fg[order]
    if nms_thresh is None:
        return props, fg
    keep = boxes.nms(props, fg, nms_thresh)
    if post_nms_top_n > 0:
        keep = keep[:post_nms_top_n]
    return props[keep], fg[keep]


def anchor_channels_problem(num_anchors, shapes):
    """Why bottoms of these ``shapes`` are not ``N x 2A x H x W`` scores and ``N x 4A x H x W``
    deltas for ``num_anchors`` anchors (A), or None."""
    a = num_anchors
    if len(shapes) < 2 or len(shapes[0]) != 4 or len(shapes[1]) != 4 \
            or shapes[0][1] != 2 * a or shapes[1][1] != 4 * a:
        return "%d anchors need %d score and %d delta channels, got %s and %s" % (
            a, 2 * a, 4 * a, *(tuple(s) for s in shapes[:2]))
    return None


def channels_check(anchors_for):
    """A :class:`StandInForm` ``shapes`` check: :func:`anchor_channels_problem` for the anchors
    ``anchors_for(params)`` makes from the layer's parsed ``param_str``."""
    def check(param_str, shapes):
        try:
            params = boxes.parse_param_str(param_str)
        except ValueError as e:
            return str(e)
        return anchor_channels_problem(len(anchors_for(params)), shapes)
    return check


class ProposalLayer(Layer):
    """See module doc. Subclasses for forks of this layer override ``make_anchors`` and
    ``config``."""

    stand_in_form = StandInForm("py-faster-rcnn", bottoms=3, tops=(1, 2),
                                shapes=channels_check(boxes.anchors_from_params),
                                note="2A score and 4A delta channels for A anchors (9 unless "
                                     "param_str has scales / ratios)")

    def make_anchors(self, params):
        return boxes.anchors_from_params(params)

    def config(self):
        return cfg

    def setup(self, bottom, top):
        params = boxes.parse_param_str(self.param_str)
        self.feat_stride = boxes.feat_stride(self, params)
        self.anchors = self.make_anchors(params)
        self.settings = dict(self.config()[boxes.phase_key(self.phase)])
        self._check(bottom, top)
        top[0].reshape(1, 5)
        if len(top) > 1:
            top[1].reshape(1, 1)

    def _check(self, bottom, top):
        if len(bottom) != 3 or not 1 <= len(top) <= 2:
            raise ValueError("ProposalLayer takes 3 bottoms (scores, bbox deltas, im_info) and "
                             "1-2 tops (rois, scores); got %d and %d" % (len(bottom), len(top)))
        problem = anchor_channels_problem(len(self.anchors), [b.data.shape for b in bottom])
        if problem:
            raise ValueError("%s: %s" % (type(self).__name__, problem))

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        s = self.settings
        im_info = bottom[2].data.reshape(bottom[2].data.shape[0], -1)
        rois, scores = [], []
        for n in range(bottom[0].data.shape[0]):
            info = im_info[min(n, len(im_info) - 1)]
            props, fg = propose(bottom[0].data[n], bottom[1].data[n], info, self.anchors,
                                self.feat_stride, s["RPN_PRE_NMS_TOP_N"], s["RPN_POST_NMS_TOP_N"],
                                s["RPN_NMS_THRESH"], s["RPN_MIN_SIZE"])
            rois.append(np.hstack([np.full((len(props), 1), n), props]))
            scores.append(fg)
        rois = np.vstack(rois)
        boxes.write_proposals(top, rois, scores)

    def backward(self, top, propagate_down, bottom):
        pass
