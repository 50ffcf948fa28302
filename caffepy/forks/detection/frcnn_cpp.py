"""makefile/frcnn's C++ Faster R-CNN layers (a descendant of D-X-Y/caffe-faster-rcnn):
``FrcnnProposal``, ``FrcnnAnchorTarget`` and ``FrcnnProposalTarget``.

Source: makefile/frcnn ``src/caffe/FRCNN/frcnn_proposal_layer.cpp``,
``frcnn_anchor_target_layer.cpp``, ``frcnn_proposal_target_layer.cpp``,
``util/frcnn_param.cpp`` and ``util/frcnn_bbox_transform.cpp``. The three layers compute what
py-faster-rcnn's Python RPN layers compute (:mod:`caffepy.forks.detection.frcnn`, whose box
arithmetic is reused here), but take their settings from one process-wide configuration, the
fork's ``FrcnnParam``, which the fork's ``FrcnnRoiData`` reader loads from the JSON file named in
its ``window_data_param { config: "..." }``. Here that configuration is :data:`CONFIG`: the values
of the fork's ``examples/FRCNN/config/default_config.json`` until :func:`load_config` reads one of
the fork's config files (its quasi-JSON: ``"key": "value"`` pairs, lists as comma-separated
strings that may span lines). The anchors are the config's ``anchors`` (rows ``x1 y1 x2 y2`` of
the cell at the origin), not generated from scales and ratios.
"""
import re

import numpy as np

from ... import common
from ...layers.base import Layer, fork_param, register_layer
from .frcnn import boxes
from .frcnn.anchor_target import anchor_targets


def default_config():
    """The fork's ``examples/FRCNN/config/default_config.json`` (keys read by these layers)."""
    return dict(
        batch_size=128, fg_fraction=0.25, fg_thresh=0.5, bg_thresh_hi=0.5, bg_thresh_lo=0.1,
        bbox_normalize_targets=1, bbox_inside_weights=[1.0, 1.0, 1.0, 1.0],
        bbox_normalize_means=[0.0, 0.0, 0.0, 0.0], bbox_normalize_stds=[0.1, 0.1, 0.2, 0.2],
        rpn_positive_overlap=0.7, rpn_negative_overlap=0.3, rpn_clobber_positives=0,
        rpn_fg_fraction=0.5, rpn_batchsize=256, rpn_nms_thresh=0.7, rpn_pre_nms_top_n=12000,
        rpn_post_nms_top_n=2000, rpn_min_size=16, rpn_bbox_inside_weights=[1.0, 1.0, 1.0, 1.0],
        rpn_positive_weight=-1.0, rpn_allowed_border=0,
        test_rpn_nms_thresh=0.7, test_rpn_pre_nms_top_n=6000, test_rpn_post_nms_top_n=300,
        test_rpn_min_size=16, test_rpn_score_thresh=0.0, test_soft_nms=0,
        eps=1e-14, feat_stride=16, n_classes=21,
        anchors=[-84, -40, 100, 56, -176, -88, 192, 104, -360, -184, 376, 200,
                 -56, -56, 72, 72, -120, -120, 136, 136, -248, -248, 264, 264,
                 -36, -80, 52, 96, -80, -168, 96, 184, -168, -344, 184, 360])


CONFIG = default_config()
_PAIR = re.compile(r'"(\w+)"\s*:\s*"([^"]*)"', re.S)


def parse_config(text):
    """{key: float or list of floats} from the text of one of the fork's config files."""
    out = {}
    for key, value in _PAIR.findall(text):
        items = [v for v in re.split(r"[,\s]+", value.strip()) if v]
        if not items:
            out[key] = value
            continue
        try:
            nums = [float(v) for v in items]
        except ValueError:
            out[key] = value
            continue
        out[key] = nums if len(nums) != 1 or "," in value else nums[0]
    return out


def load_config(path):
    """Update :data:`CONFIG` from the fork's config file at ``path`` (as its reader does)."""
    with open(path) as f:
        CONFIG.update(parse_config(f.read()))
    return CONFIG


def _anchors(layer):
    a = np.asarray(CONFIG["anchors"], dtype=np.float64).ravel()
    if a.size == 0 or a.size % 4:
        raise layer.error("the Faster R-CNN config's anchors hold %d numbers, not a positive "
                          "multiple of 4" % a.size)
    return a.reshape(-1, 4)


def _train(layer):
    return boxes.phase_key(layer.phase) == "TRAIN"


@register_layer("FrcnnProposal")
class FrcnnProposalLayer(Layer):
    """Region proposals from RPN outputs (makefile/frcnn ``frcnn_proposal_layer.cpp``).

    Bottoms: ``rpn_cls_prob_reshape`` ``1 x 2A x H x W`` (object probabilities in channels
    ``A..2A-1``), ``rpn_bbox_pred`` ``1 x 4A x H x W``, ``im_info`` ``[height, width, scale]``;
    A = the config's anchor count. Each anchor ``k`` at cell ``(h, w)`` is shifted by
    ``(w, h) * feat_stride`` (``proposal_param.feat_stride`` when set and non-zero, else the
    config's), moved by its deltas (``dx * w + cx``, ``exp(dw) * w``, corners at ``c -+ w / 2``),
    clipped to ``[0, width - 1] x [0, height - 1]``, dropped when narrower or lower than
    ``rpn_min_size * scale``; in TEST, anchors ``k > 0`` scoring below ``test_rpn_score_thresh``
    are skipped. The best ``pre_nms_top_n`` by score go through greedy NMS (IoU ``> nms_thresh``
    suppresses) until ``post_nms_top_n`` are kept (``rpn_*`` settings in TRAIN, ``test_rpn_*``
    in TEST). Tops: rois ``R x 5 x 1 x 1`` ``[0, x1, y1, x2, y2]`` and optionally scores
    ``R x 1 x 1 x 1``.
    One image per batch (the fork's CHECK); no backward. The fork's soft-NMS
    (``test_soft_nms != 0``) is not reproduced.
    """

    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "proposal_param")
        stride = int(p.feat_stride) if p is not None and "feat_stride" in \
            p.DESCRIPTOR.fields_by_name and p.HasField("feat_stride") else 0
        self.feat_stride = stride or int(CONFIG["feat_stride"])
        if self.feat_stride <= 0:
            raise self.error("feat_stride must be > 0, got %d" % self.feat_stride)
        if int(CONFIG.get("test_soft_nms", 0)):
            raise self.error("the config's test_soft_nms (soft-NMS) is not supported")
        top[0].reshape(1, 5, 1, 1)
        if len(top) > 1:
            top[1].reshape(1, 1, 1, 1)

    def reshape(self, bottom, top):
        a = len(_anchors(self))
        if bottom[1].shape[1] != 4 * a or bottom[0].shape[1] != 2 * a:
            raise self.error("%d anchors need %d score and %d delta channels, got %s and %s"
                             % (a, 2 * a, 4 * a, bottom[0].shape, bottom[1].shape))
        if bottom[0].shape[0] != 1 or bottom[1].shape[0] != 1:
            raise self.error("only single item batches are supported, got %d"
                             % bottom[1].shape[0])

    def forward_cpu(self, bottom, top):
        c, tr = CONFIG, _train(self)
        pre_n = int(c["rpn_pre_nms_top_n" if tr else "test_rpn_pre_nms_top_n"])
        post_n = int(c["rpn_post_nms_top_n" if tr else "test_rpn_post_nms_top_n"])
        thresh = float(c["rpn_nms_thresh" if tr else "test_rpn_nms_thresh"])
        min_size = float(c["rpn_min_size" if tr else "test_rpn_min_size"])
        anchors = _anchors(self)
        a = len(anchors)
        height, width = bottom[1].shape[2:4]
        info = bottom[2].data.ravel()
        scores = bottom[0].data[0, a:2 * a].transpose(1, 2, 0).reshape(-1)
        deltas = bottom[1].data[0].reshape(a, 4, height, width).transpose(2, 3, 0, 1)
        cand = boxes.shifted_anchors(anchors, height, width, self.feat_stride)
        props = boxes.clip_boxes(boxes.bbox_transform_inv(cand, deltas.reshape(-1, 4)), info[:2])
        keep = ((props[:, 2] - props[:, 0] + 1 >= info[2] * min_size) &
                (props[:, 3] - props[:, 1] + 1 >= info[2] * min_size))
        if not tr:
            k = np.tile(np.arange(a), height * width)
            keep &= ~((scores < float(c.get("test_rpn_score_thresh", 0))) & (k > 0))
        props, scores = props[keep], scores[keep]
        if pre_n <= 0 or post_n <= 0:
            props, scores = props[:0], scores[:0]
        # std::sort with std::greater on (score, index): ties go to the later candidate
        order = np.lexsort((-np.arange(len(scores)), -scores))[:max(pre_n, 0)]
        props, scores = props[order], scores[order]
        kept = boxes.nms(props, scores, thresh)[:max(post_n, 0)]
        rois = np.hstack([np.zeros((len(kept), 1)), props[kept]])
        top[0].reshape(len(kept), 5, 1, 1)
        top[0].data[...] = rois.reshape(top[0].shape)
        if len(top) > 1:
            top[1].reshape(len(kept), 1, 1, 1)
            top[1].data[...] = scores[kept].reshape(top[1].shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("FrcnnAnchorTarget")
class FrcnnAnchorTargetLayer(Layer):
    """RPN training labels and regression targets (makefile/frcnn
    ``frcnn_anchor_target_layer.cpp``).

    Bottoms: ``rpn_cls_score`` ``1 x C x H x W`` (only H, W read), ``gt_boxes`` ``G x 5``
    ``[x1, y1, x2, y2, label]``, ``im_info``. The config's A anchors at each cell (stride
    ``feat_stride``) lying inside the image with ``rpn_allowed_border`` slack are labelled as in
    py-faster-rcnn (:func:`caffepy.forks.detection.frcnn.anchor_target.anchor_targets`):
    background below ``rpn_negative_overlap``, object at ``rpn_positive_overlap`` or when within
    ``eps`` of a gt box's best IoU, ``rpn_clobber_positives`` ordering, at most
    ``rpn_fg_fraction * rpn_batchsize`` objects and ``rpn_batchsize`` labelled anchors in all
    (the rest drawn at random, ``caffepy.common.rng``, set to -1). Tops: labels
    ``1 x 1 x A*H x W``, bbox targets, inside weights (``rpn_bbox_inside_weights`` on objects)
    and outside weights (``1 / #labelled`` with ``rpn_positive_weight < 0``, else ``p / #pos``,
    ``(1 - p) / #neg``), each ``1 x 4A x H x W``. One image per batch; no backward.
    """

    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 4

    def reshape(self, bottom, top):
        if bottom[0].shape[0] != 1:
            raise self.error("only single item batches are supported, got %d"
                             % bottom[0].shape[0])
        if len(bottom[1].shape) < 2 or bottom[1].count // bottom[1].shape[0] < 5:
            raise self.error("gt_boxes must be G x 5 [x1, y1, x2, y2, label], got %s"
                             % (bottom[1].shape,))
        a = len(_anchors(self))
        height, width = bottom[0].shape[2:4]
        top[0].reshape(1, 1, a * height, width)
        for t in top[1:]:
            t.reshape(1, 4 * a, height, width)

    def forward_cpu(self, bottom, top):
        c = CONFIG
        anchors = _anchors(self)
        a = len(anchors)
        height, width = bottom[0].shape[2:4]
        cand = boxes.shifted_anchors(anchors, height, width, int(c["feat_stride"]))
        gt = bottom[1].data.reshape(bottom[1].shape[0], -1)[:, :5].astype(np.float64)
        settings = dict(
            RPN_CLOBBER_POSITIVES=bool(c["rpn_clobber_positives"]),
            RPN_NEGATIVE_OVERLAP=c["rpn_negative_overlap"],
            RPN_POSITIVE_OVERLAP=c["rpn_positive_overlap"], RPN_FG_FRACTION=c["rpn_fg_fraction"],
            RPN_BATCHSIZE=int(c["rpn_batchsize"]),
            RPN_BBOX_INSIDE_WEIGHTS=list(c["rpn_bbox_inside_weights"]),
            RPN_POSITIVE_WEIGHT=c["rpn_positive_weight"])
        try:
            outs = anchor_targets(cand, gt, bottom[2].data.ravel()[:3],
                                  float(c["rpn_allowed_border"]), settings, common.rng(),
                                  eps=float(c["eps"]))
        except ValueError as e:
            raise self.error(str(e))
        for t, v in zip(top, outs):
            t.data[...] = v.reshape(height, width, -1).transpose(2, 0, 1).reshape(t.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("FrcnnProposalTarget")
class FrcnnProposalTargetLayer(Layer):
    """RoI sampling for the detection head (makefile/frcnn ``frcnn_proposal_target_layer.cpp``).

    Bottoms: rois ``R x 5`` ``[0, x1, y1, x2, y2]`` (batch index 0 only) and ``gt_boxes``
    ``G x 5`` ``[x1, y1, x2, y2, label > 0]``. With ``proposal_target_param.stage`` s > 0 (the
    fork's Cascade R-CNN form, ``FrcnnProposalTargetParameter { gt_iou_thr: 0.95 stage: 0 }``,
    read when the schema has those fields) rois whose best IoU is ``>= gt_iou_thr`` are dropped
    first. The gt boxes join the candidates; each takes the last gt box of highest IoU (ties to
    the later one) and its label. Up to ``batch_size * fg_fraction`` (truncated) candidates with
    IoU ``>= fg_thresh + 0.1 s`` are drawn as foreground, then up to the rest of ``batch_size``
    with IoU in ``[bg_thresh_lo, bg_thresh_hi + 0.1 s)`` as background (label 0); if fewer than
    ``batch_size`` remain, the fork fills up: with no sample at all, from candidates below
    ``bg_thresh_lo`` (up to ``batch_size`` of them); otherwise by repeating the background ones
    (taken from those below ``bg_thresh_hi`` when there were none). Tops (``S x C x 1 x 1``):
    rois, labels, and for the K = ``n_classes`` (config) classes bbox targets (``bbox_transform``
    to the assigned gt box, ``(t - bbox_normalize_means) / bbox_normalize_stds`` when
    ``bbox_normalize_targets``) in the label's 4 columns, inside weights
    (``bbox_inside_weights`` there) and outside weights (1 where inside > 0). No backward.
    """

    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 5

    def layer_setup(self, bottom, top):
        self.stage, self.gt_iou_thr = 0, 0.95
        p = fork_param(self.layer_param, "proposal_target_param")
        if p is not None:
            fields = p.DESCRIPTOR.fields_by_name
            if "stage" in fields:
                self.stage = int(p.stage)
            if "gt_iou_thr" in fields:
                self.gt_iou_thr = float(p.gt_iou_thr)
        self.num_classes = int(CONFIG["n_classes"])
        top[0].reshape(1, 5, 1, 1)
        top[1].reshape(1, 1, 1, 1)
        for t in top[2:]:
            t.reshape(1, 4 * self.num_classes, 1, 1)

    def reshape(self, bottom, top):
        for i, what in enumerate(("rois", "gt_boxes")):
            b = bottom[i]
            if len(b.shape) < 2 or b.count // max(b.shape[0], 1) < 5:
                raise self.error("%s must be N x 5, got %s" % (what, b.shape,))

    def _draw(self, inds, n, rng):
        inds = np.asarray(inds, dtype=np.int64)
        return rng.permutation(inds)[:max(int(n), 0)]

    def forward_cpu(self, bottom, top):
        c, rng = CONFIG, common.rng()
        rois = bottom[0].data.reshape(bottom[0].shape[0], -1)[:, :5].astype(np.float64)
        gt = bottom[1].data.reshape(bottom[1].shape[0], -1)[:, :5].astype(np.float64)
        if np.any(rois[:, 0] != 0):
            raise self.error("only single item batches are supported (roi batch index 0)")
        if np.any(gt[:, 4] <= 0):
            raise self.error("ground-truth labels must be greater than 0")
        cand = rois[:, 1:5]
        if self.stage and len(gt):
            cand = cand[boxes.bbox_overlaps(cand, gt).max(axis=1) < self.gt_iou_thr]
        cand = np.vstack([cand, gt[:, :4]])
        if len(gt):
            ov = boxes.bbox_overlaps(cand, gt)
            assign = len(gt) - 1 - np.argmax(ov[:, ::-1], axis=1)      # last of the best
            max_ov = ov[np.arange(len(cand)), assign]
        else:
            assign, max_ov = np.zeros(len(cand), dtype=np.int64), np.zeros(len(cand))
        per_image = int(c["batch_size"])
        fg_per_image = int(per_image * float(c["fg_fraction"]))
        fg = self._draw(np.where(max_ov >= c["fg_thresh"] + 0.1 * self.stage)[0],
                        fg_per_image, rng)
        bg_all = np.where((max_ov >= c["bg_thresh_lo"]) &
                          (max_ov < c["bg_thresh_hi"] + 0.1 * self.stage))[0]
        bg = self._draw(bg_all, per_image - len(fg), rng)
        keep = np.concatenate([fg, bg]).astype(np.int64)
        remaining = per_image - len(keep)
        if remaining > 0:
            if len(keep) == 0:
                easy = self._draw(np.where(max_ov < c["bg_thresh_lo"])[0], per_image, rng)
                if len(easy):       # the fork's vector::resize pads with index 0
                    keep = np.concatenate([easy, np.zeros(per_image - len(easy))])
                keep = keep.astype(np.int64)
            else:
                pool = bg if len(bg) else np.where(max_ov < c["bg_thresh_hi"])[0]
                if len(pool):
                    keep = np.concatenate([keep, np.resize(pool, remaining)]).astype(np.int64)
        labels = gt[assign[keep], 4] if len(gt) else np.zeros(len(keep))
        labels[len(fg):] = 0
        out_rois = np.hstack([np.zeros((len(keep), 1)), cand[keep]])
        k = self.num_classes
        targets = np.zeros((len(keep), 4 * k))
        inside = np.zeros_like(targets)
        if len(gt) and len(keep):
            t = boxes.bbox_transform(cand[keep], gt[assign[keep], :4])
            if int(c["bbox_normalize_targets"]):
                t = (t - np.asarray(c["bbox_normalize_means"])) / np.asarray(
                    c["bbox_normalize_stds"])
            for i in np.where(labels > 0)[0]:
                cls = int(labels[i])
                if cls >= k:
                    raise self.error("gt label %d outside n_classes %d" % (cls, k))
                targets[i, 4 * cls:4 * cls + 4] = t[i]
                inside[i, 4 * cls:4 * cls + 4] = c["bbox_inside_weights"]
        for t, v in zip(top, (out_rois, labels, targets, inside, (inside > 0).astype(float))):
            v = v.reshape(len(keep), -1, 1, 1)
            t.reshape(*v.shape)
            t.data[...] = v

    def backward_cpu(self, top, propagate_down, bottom):
        pass
