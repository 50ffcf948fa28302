"""py-faster-rcnn's ``rpn.proposal_target_layer.ProposalTargetLayer``: samples RoIs for the
detection head and gives their class labels and box-regression targets.

    layer { type: "Python" bottom: "rpn_rois" bottom: "gt_boxes"
            top: "rois" top: "labels" top: "bbox_targets"
            top: "bbox_inside_weights" top: "bbox_outside_weights"
            python_param { module: "rpn.proposal_target_layer" layer: "ProposalTargetLayer"
                           param_str: "'num_classes': 21" } }

Bottoms: proposals ``R x 5`` ``[0, x1, y1, x2, y2]`` and ``gt_boxes`` ``G x 5``
``[x1, y1, x2, y2, class]``; the gt boxes join the candidates. Each candidate takes the class of
the gt box it overlaps most; (``cfg.TRAIN``) up to ``round(FG_FRACTION * BATCH_SIZE)`` candidates
with IoU ``>= FG_THRESH`` are drawn as foreground and up to ``BATCH_SIZE`` minus those with IoU in
``[BG_THRESH_LO, BG_THRESH_HI)`` as background (label 0), without replacement
(``caffepy.common.rng``). Tops: ``rois`` ``S x 5``, ``labels`` ``S``, and ``S x 4K`` (K =
``num_classes``) ``bbox_targets`` (``boxes.bbox_transform`` to the assigned gt box, normalised by
``BBOX_NORMALIZE_MEANS``/``STDS`` when ``BBOX_NORMALIZE_TARGETS_PRECOMPUTED``) in the 4 columns of
the roi's class (none for background), ``bbox_inside_weights`` (``BBOX_INSIDE_WEIGHTS`` there) and
``bbox_outside_weights`` (1 where the inside weight is > 0). Only one image per batch (all roi
batch indices 0). No gradient flows back.

The tops are 4-d, ``S x C x 1 x 1`` (``labels`` ``S x 1 x 1 x 1``), as in py-R-FCN's copy of this
layer, whose nets (OHEM: the per-roi losses are summed with an Eltwise) need it; py-faster-rcnn's
own 2-d ``S x C`` / 1-d ``S`` tops have the same values, and its consumers (ROIPooling,
SoftmaxWithLoss, Accuracy, SmoothL1Loss) compare only counts. py-R-FCN's options are honoured too:
``BATCH_SIZE: -1`` takes every candidate, ``AGONISTIC: True`` (its spelling) puts every
foreground target in the columns of class 1 (class-agnostic regression).
"""
import numpy as np

from .... import common
from ....layers.python_layer import Layer
from . import boxes
from .config import cfg


def _draw(inds, n, rng):
    n = int(min(n, inds.size))
    return rng.choice(inds, size=n, replace=False) if inds.size else inds


def draw_fg_bg(max_ov, fg_per_image, rois_per_image, settings, rng):
    """(indices kept: the foreground ones first, how many are foreground): up to
    ``fg_per_image`` with overlap ``>= FG_THRESH``, then up to the rest of ``rois_per_image``
    with overlap in ``[BG_THRESH_LO, BG_THRESH_HI)``, each drawn without replacement (what
    py-faster-rcnn's proposal target layer and its data layer both sample)."""
    s = settings
    fg = _draw(np.where(max_ov >= s["FG_THRESH"])[0], fg_per_image, rng)
    bg = _draw(np.where((max_ov < s["BG_THRESH_HI"]) & (max_ov >= s["BG_THRESH_LO"]))[0],
               rois_per_image - fg.size, rng)
    return np.concatenate([fg, bg]).astype(np.int64), fg.size


def sample_rois(all_rois, gt_boxes, num_classes, settings, rng):
    """(rois ``S x 5``, labels ``S``, targets, inside weights ``S x 4K``) (see module doc)."""
    s = settings
    rois_per_image = np.inf if s["BATCH_SIZE"] == -1 else s["BATCH_SIZE"]
    fg_per_image = np.round(s["FG_FRACTION"] * rois_per_image)
    if len(gt_boxes):
        overlaps = boxes.bbox_overlaps(all_rois[:, 1:5], gt_boxes[:, :4])
        assignment = overlaps.argmax(axis=1)
        max_ov = overlaps.max(axis=1)
    else:
        assignment = np.zeros(len(all_rois), dtype=np.int64)
        max_ov = np.zeros(len(all_rois))
    keep, n_fg = draw_fg_bg(max_ov, fg_per_image, rois_per_image, s, rng)
    labels = gt_boxes[assignment[keep], 4].astype(np.float64) if len(gt_boxes) else \
        np.zeros(keep.size)
    labels[n_fg:] = 0
    rois = all_rois[keep]

    targets = np.zeros((keep.size, 4 * num_classes))
    inside = np.zeros_like(targets)
    if len(gt_boxes) and keep.size:
        t = boxes.bbox_transform(rois[:, 1:5], gt_boxes[assignment[keep], :4])
        if s["BBOX_NORMALIZE_TARGETS_PRECOMPUTED"]:
            t = (t - np.asarray(s["BBOX_NORMALIZE_MEANS"])) / np.asarray(s["BBOX_NORMALIZE_STDS"])
        for i in np.where(labels > 0)[0]:
            c = 1 if s["AGONISTIC"] else int(labels[i])
            if c >= num_classes:
                raise ValueError("gt class %d outside num_classes %d" % (c, num_classes))
            targets[i, 4 * c:4 * c + 4] = t[i]
            inside[i, 4 * c:4 * c + 4] = s["BBOX_INSIDE_WEIGHTS"]
    return rois, labels, targets, inside


class ProposalTargetLayer(Layer):
    """See module doc."""

    def setup(self, bottom, top):
        params = boxes.parse_param_str(self.param_str)
        if "num_classes" not in params:
            raise ValueError("ProposalTargetLayer: param_str %r has no 'num_classes'"
                             % self.param_str)
        if len(bottom) < 2 or len(top) != 5:
            raise ValueError("ProposalTargetLayer takes 2 bottoms (rois, gt_boxes) and 5 tops; "
                             "got %d and %d" % (len(bottom), len(top)))
        self.num_classes = int(params["num_classes"])
        top[0].reshape(1, 5, 1, 1)
        top[1].reshape(1, 1, 1, 1)
        for t in top[2:]:
            t.reshape(1, 4 * self.num_classes, 1, 1)

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        gt = np.asarray(bottom[1].data, dtype=np.float64).reshape(-1, 5)
        rois = np.asarray(bottom[0].data, dtype=np.float64).reshape(-1, 5)
        rois = np.vstack([rois, np.hstack([np.zeros((len(gt), 1)), gt[:, :4]])])
        if np.any(rois[:, 0] != 0):
            raise ValueError("ProposalTargetLayer takes one image per batch (roi batch index 0)")
        rois, labels, targets, inside = sample_rois(rois, gt, self.num_classes, cfg.TRAIN,
                                                    common.rng())
        for t, v in zip(top, (rois, labels, targets, inside, (inside > 0).astype(np.float64))):
            v = v.reshape(len(v), -1, 1, 1)
            t.reshape(*v.shape)
            t.data[...] = v

    def backward(self, top, propagate_down, bottom):
        pass
