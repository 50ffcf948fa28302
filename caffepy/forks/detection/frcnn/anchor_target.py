"""py-faster-rcnn's ``rpn.anchor_target_layer.AnchorTargetLayer``: RPN training labels and targets.

    layer { type: "Python" bottom: "rpn_cls_score" bottom: "gt_boxes" bottom: "im_info"
            bottom: "data"
            top: "rpn_labels" top: "rpn_bbox_targets"
            top: "rpn_bbox_inside_weights" top: "rpn_bbox_outside_weights"
            python_param { module: "rpn.anchor_target_layer" layer: "AnchorTargetLayer"
                           param_str: "'feat_stride': 16" } }

Bottoms: a score map ``1 x C x H x W`` (only its H, W are read), ``gt_boxes`` ``G x 5``
``[x1, y1, x2, y2, class]``, ``im_info`` ``1 x 3`` (height, width, scale); further bottoms are
ignored. The A anchors at each of the ``H x W`` cells (as ProposalLayer) that lie inside the image
(``allowed_border`` pixels of slack, default 0) are labelled (``cfg.TRAIN``): 0 (background) when
their best IoU with any gt box is below ``RPN_NEGATIVE_OVERLAP``, 1 (object) when it is at least
``RPN_POSITIVE_OVERLAP`` or when the anchor is a best match of some gt box, -1 (ignored) otherwise
and outside the image. At most ``RPN_FG_FRACTION * RPN_BATCHSIZE`` positives are kept and
``RPN_BATCHSIZE`` minus those negatives, the rest drawn at random (``caffepy.common.rng``) and set
to -1. Tops (A-major channel order, as the scores): ``labels`` ``1 x 1 x A*H x W``;
``bbox_targets`` ``1 x 4A x H x W`` (``boxes.bbox_transform`` to the best gt box);
``bbox_inside_weights`` (``RPN_BBOX_INSIDE_WEIGHTS`` on positives) and ``bbox_outside_weights``
(``1 / number of labelled anchors`` on labelled ones when ``RPN_POSITIVE_WEIGHT < 0``, else
``p / #positives`` and ``(1 - p) / #negatives``), both ``1 x 4A x H x W``. With no gt box every
inside anchor is background. No gradient flows back.
"""
import numpy as np

from .... import common
from ....layers.python_layer import Layer
from . import boxes
from .config import cfg


def _subsample(labels, value, keep_at_most, rng):
    inds = np.where(labels == value)[0]
    if len(inds) > keep_at_most:
        labels[rng.choice(inds, size=len(inds) - int(keep_at_most), replace=False)] = -1


def anchor_targets(anchors, gt_boxes, im_info, allowed_border, settings, rng, eps=0.0):
    """(labels ``K``, targets ``K x 4``, inside ``K x 4``, outside ``K x 4``) for ``K`` anchors;
    an anchor is a best match of a gt box when its IoU is within ``eps`` of that box's best
    (0: equal, as py-faster-rcnn; makefile/frcnn's C++ layer passes its config's ``eps``)."""
    s = settings
    total = len(anchors)
    b = allowed_border
    inside = np.where((anchors[:, 0] >= -b) & (anchors[:, 1] >= -b) &
                      (anchors[:, 2] < im_info[1] + b) & (anchors[:, 3] < im_info[0] + b))[0]
    ins = anchors[inside]
    labels = np.full(len(inside), -1.0)
    gt = np.asarray(gt_boxes, dtype=np.float64).reshape(-1, gt_boxes.shape[-1])
    if len(gt) and len(ins):
        overlaps = boxes.bbox_overlaps(ins, gt)
        argmax = overlaps.argmax(axis=1)
        max_ov = overlaps[np.arange(len(ins)), argmax]
        best_of_gt = np.unique(np.where(np.abs(overlaps - overlaps.max(axis=0)) <= eps)[0])
    else:
        argmax = np.zeros(len(ins), dtype=np.int64)
        max_ov = np.zeros(len(ins))
        best_of_gt = np.zeros(0, dtype=np.int64)
    if not s["RPN_CLOBBER_POSITIVES"]:
        labels[max_ov < s["RPN_NEGATIVE_OVERLAP"]] = 0
    labels[best_of_gt] = 1
    labels[max_ov >= s["RPN_POSITIVE_OVERLAP"]] = 1
    if s["RPN_CLOBBER_POSITIVES"]:
        labels[max_ov < s["RPN_NEGATIVE_OVERLAP"]] = 0
    _subsample(labels, 1, int(s["RPN_FG_FRACTION"] * s["RPN_BATCHSIZE"]), rng)
    _subsample(labels, 0, s["RPN_BATCHSIZE"] - np.sum(labels == 1), rng)

    targets = np.zeros((len(ins), 4))
    if len(gt) and len(ins):
        targets = boxes.bbox_transform(ins, gt[argmax, :4])
    inside_w = np.zeros((len(ins), 4))
    inside_w[labels == 1] = s["RPN_BBOX_INSIDE_WEIGHTS"]
    outside_w = np.zeros((len(ins), 4))
    p = s["RPN_POSITIVE_WEIGHT"]
    with np.errstate(divide="ignore", invalid="ignore"):
        if p < 0:
            pos_w = neg_w = 1.0 / np.sum(labels >= 0)
        else:
            if not 0 < p < 1:
                raise ValueError("RPN_POSITIVE_WEIGHT must be < 0 or in (0, 1), got %r" % p)
            pos_w = p / np.sum(labels == 1)
            neg_w = (1.0 - p) / np.sum(labels == 0)
    outside_w[labels == 1] = pos_w
    outside_w[labels == 0] = neg_w
    return (_unmap(labels, total, inside, -1), _unmap(targets, total, inside, 0),
            _unmap(inside_w, total, inside, 0), _unmap(outside_w, total, inside, 0))


def _unmap(values, count, inds, fill):
    out = np.full((count,) + values.shape[1:], float(fill))
    out[inds] = values
    return out


class AnchorTargetLayer(Layer):
    """See module doc."""

    def setup(self, bottom, top):
        params = boxes.parse_param_str(self.param_str)
        if "feat_stride" not in params:
            raise ValueError("AnchorTargetLayer: param_str %r has no 'feat_stride'"
                             % self.param_str)
        if len(bottom) < 3 or len(top) != 4:
            raise ValueError("AnchorTargetLayer takes >= 3 bottoms (scores, gt_boxes, im_info) and "
                             "4 tops; got %d and %d" % (len(bottom), len(top)))
        self.feat_stride = params["feat_stride"]
        self.allowed_border = params.get("allowed_border", 0)
        self.anchors = boxes.anchors_from_params(params)
        self.reshape(bottom, top)

    def reshape(self, bottom, top):
        a = self.anchors.shape[0]
        height, width = bottom[0].data.shape[-2:]
        top[0].reshape(1, 1, a * height, width)
        for t in top[1:]:
            t.reshape(1, 4 * a, height, width)

    def forward(self, bottom, top):
        if bottom[0].data.shape[0] != 1:
            raise ValueError("AnchorTargetLayer takes one image per batch, got %d"
                             % bottom[0].data.shape[0])
        a = self.anchors.shape[0]
        height, width = bottom[0].data.shape[-2:]
        anchors = boxes.shifted_anchors(self.anchors, height, width, self.feat_stride)
        outs = anchor_targets(anchors, bottom[1].data, bottom[2].data.reshape(-1)[:3],
                              self.allowed_border, cfg.TRAIN, common.rng())
        for t, v in zip(top, outs):
            v = v.reshape(1, height, width, -1).transpose(0, 3, 1, 2)
            if v.shape[1] == a:
                v = v.reshape(1, 1, a * height, width)
            t.reshape(*v.shape)
            t.data[...] = v

    def backward(self, top, propagate_down, bottom):
        pass
