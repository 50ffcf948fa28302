"""SSH's (mahyarnajibi/SSH, the Single Stage Headless face detector)
``SSH.layers.proposal_layer.ProposalLayer``: the face boxes of one detection module.

    layer { type: "Python" bottom: "m1@ssh_cls_prob_reshape_output"
            bottom: "m1@ssh_bbox_pred_output" bottom: "im_info"
            top: "m1@ssh_boxes" top: "m1@ssh_cls_prob"                      # scores optional
            python_param { module: "SSH.layers.proposal_layer" layer: "ProposalLayer"
                           param_str: "{'feat_stride': 8, 'scales': [1, 2], 'ratios': [1,]}" } }

py-faster-rcnn's RPN proposal layer (:mod:`caffepy.forks.detection.frcnn.proposal`, same bottoms:
``N x 2A x H x W`` scores, ``N x 4A x H x W`` deltas, ``im_info``) with SSH's changes:

* anchors from ``param_str``: ``feat_stride`` (required), ``scales`` (default ``(8, 16, 32)``),
  ``ratios`` (``(0.5, 1, 2)``), ``base_size`` (16), generated as py-faster-rcnn does;
* TEST: decode, clip to ``im_info``, drop boxes narrower or lower than ``ANCHOR_MIN_SIZE *
  scale`` (0), keep the best ``N_DETS_PER_MODULE`` (1000) by face score, and no NMS (SSH's test
  script applies NMS to all modules' boxes together);
* TRAIN: min size 4, the best ``ANCHOR_N_PRE_NMS`` (1000), NMS at ``NMS_THRESH`` (0.3), the best
  ``ANCHOR_N_POST_NMS`` (300);
* when no box is left, ``rois`` is the one row ``[0, 0, 0, 16, 16]`` (``scores`` stays empty).

Tops: ``rois`` ``R x 5`` ``[image index, x1, y1, x2, y2]`` (setup: ``1 x 5``), ``scores`` ``R x 1``
(setup: ``1 x 1 x 1 x 1``). SSH takes one image; here each image of the batch is processed in
turn. Settings: the fork's ``SSH/configs/default_config.yml`` as :data:`cfg` (its ``wider*.yml``
files do not change these). No gradient flows back.
"""
import numpy as np

from ...layers.python_layer import Layer
from ...layers.stand_ins import StandInForm
from .frcnn import boxes
from .frcnn.config import Section
from .frcnn.proposal import anchor_channels_problem, channels_check, propose

EMPTY_ROI = (0.0, 0.0, 0.0, 16.0, 16.0)


def default_config():
    return Section(TRAIN=Section(NMS_THRESH=0.3, ANCHOR_N_PRE_NMS=1000, ANCHOR_N_POST_NMS=300,
                                 ANCHOR_MIN_SIZE=4),
                   TEST=Section(N_DETS_PER_MODULE=1000, ANCHOR_MIN_SIZE=0))


cfg = default_config()


class SshProposalLayer(Layer):
    """See module doc."""

    stand_in_form = StandInForm("SSH", bottoms=3, tops=(1, 2),
                                shapes=channels_check(boxes.anchors_from_params),
                                note="2A score and 4A delta channels for A anchors (9 unless "
                                     "param_str has scales / ratios)")

    def setup(self, bottom, top):
        params = boxes.parse_param_str(self.param_str)
        self.feat_stride = boxes.feat_stride(self, params)
        self.anchors = boxes.anchors_from_params(params)
        self.settings = dict(cfg[boxes.phase_key(self.phase)])
        problem = anchor_channels_problem(len(self.anchors), [b.data.shape for b in bottom])
        if problem:
            raise ValueError("SshProposalLayer: " + problem)
        top[0].reshape(1, 5)
        if len(top) > 1:
            top[1].reshape(1, 1, 1, 1)

    def reshape(self, bottom, top):
        pass

    def _counts(self):
        s = self.settings
        if boxes.phase_key(self.phase) == "TRAIN":
            return s["ANCHOR_N_PRE_NMS"], s["ANCHOR_N_POST_NMS"], s["NMS_THRESH"]
        return s["N_DETS_PER_MODULE"], 0, None

    def forward(self, bottom, top):
        pre_n, post_n, nms_thresh = self._counts()
        im_info = bottom[2].data.reshape(bottom[2].data.shape[0], -1)
        rois, scores = [], []
        for n in range(bottom[0].data.shape[0]):
            info = im_info[min(n, len(im_info) - 1)]
            props, fg = propose(bottom[0].data[n], bottom[1].data[n], info, self.anchors,
                                self.feat_stride, pre_n, post_n, nms_thresh,
                                self.settings["ANCHOR_MIN_SIZE"])
            rois.append(np.hstack([np.full((len(props), 1), n), props]))
            scores.append(fg)
        rois = np.vstack(rois)
        if not len(rois):
            rois = np.array([EMPTY_ROI])
        boxes.write_proposals(top, rois, scores)

    def backward(self, top, propagate_down, bottom):
        pass
