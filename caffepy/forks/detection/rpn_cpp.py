"""The C++ ``RPN`` proposal layer several Faster R-CNN forks carry (``rpn_param``, declared by
JacobWang95/PureCPP_FRCNN, CCHOT/caffe, liukuixiang/windows-faster-rcnn and
muzixilin/cpp-faster-rcnn). Read: PureCPP_FRCNN's
``caffe-fast-rcnn/src/caffe/layers/rpn_layer.cpp``; zhanglaplace/faster-rcnn-cplusplus2's
``rpn_layer.cpp`` is the same file, and muzixilin's computes the same (it adds buffer reuse and
debug dumps). It computes what py-faster-rcnn's Python ``ProposalLayer`` computes
(:mod:`caffepy.forks.detection.frcnn.proposal`), with its own rounding, filtering, clipping and
suppression rules, listed in :class:`RPNLayer`.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, fork_param, register_layer


def _round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def rpn_anchors(base_size, ratios, scales):
    """The fork's anchors (A x 4, rows ``x1 y1 x2 y2``), ratio-major, scale-minor.

    From the box ``[0, 0, base - 1, base - 1]`` (centre ``c = (base - 1) / 2``): for each ratio
    ``r`` (float32), ``w = round(sqrt(base^2 / r))``, ``h = round(w r)`` (C's round: halves away
    from zero), then for each integer scale ``s`` the box of size ``(w s, h s)`` centred on ``c``:
    ``c -+ (size - 1) / 2``. The corners are stored as C ints, i.e. truncated toward zero.
    """
    base = float(base_size)
    ctr = (base - 1.0) / 2.0
    out = []
    for r in np.asarray(ratios, dtype=np.float32):
        ws = float(_round_half_away(np.sqrt(np.float32(base * base) / r)))
        hs = float(_round_half_away(np.float32(ws) * r))
        for s in scales:
            w, h = ws * int(s), hs * int(s)
            out.append([ctr - 0.5 * (w - 1), ctr - 0.5 * (h - 1),
                        ctr + 0.5 * (w - 1), ctr + 0.5 * (h - 1)])
    return np.trunc(np.asarray(out, dtype=np.float64).reshape(-1, 4))


def rpn_nms(boxes, thresh):
    """The fork's greedy suppression over boxes already sorted best first: box j is erased when
    its IoU (areas with +1) with a kept earlier box is ``>= thresh``. Returns kept indices."""
    boxes = np.asarray(boxes, dtype=np.float64)
    area = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    alive = np.arange(len(boxes))
    keep = []
    while alive.size:
        i, rest = alive[0], alive[1:]
        keep.append(i)
        iw = np.maximum(0.0, np.minimum(boxes[i, 2], boxes[rest, 2])
                        - np.maximum(boxes[i, 0], boxes[rest, 0]) + 1)
        ih = np.maximum(0.0, np.minimum(boxes[i, 3], boxes[rest, 3])
                        - np.maximum(boxes[i, 1], boxes[rest, 1]) + 1)
        inter = iw * ih
        with np.errstate(divide="ignore", invalid="ignore"):
            ovr = inter / (area[i] + area[rest] - inter)
        alive = rest[~(ovr >= thresh)]
    return np.asarray(keep, dtype=np.int64)


@register_layer("RPN")
class RPNLayer(Layer):
    """Region proposals of the C++ Faster R-CNN forks (module doc).

    prototxt: ``rpn_param { feat_stride basesize scale (repeated) ratio (repeated) boxminsize
    per_nms_topn post_nms_topn nms_thresh }`` (no defaults in the forks' schema: unset reads 0).
    Bottoms: scores ``N x 2A x H x W`` (object probabilities in channels ``A..2A-1``), deltas
    ``N x 4A x H x W``, ``im_info`` ``[height, width, scale]``; A = len(ratio) x len(scale)
    anchors (:func:`rpn_anchors`). Only image 0 is read (the fork reads ``data_at(0, ...)`` and
    writes batch index 0). For anchor ``k`` at cell ``(h, w)`` (shifted by ``feat_stride (w, h)``,
    width ``aw = x2 - x1 + 1``, centre ``x1 + aw / 2``): centre ``dx aw + cx``, width
    ``exp(dw) aw`` (y alike). A proposal is dropped when its width or height (before clipping) is
    below ``boxminsize * scale``; the kept ones get corners ``centre -+ width / 2`` clipped to
    ``[0, int(width)] x [0, int(height)]`` of im_info (not ``- 1``). Sorted by score, best first
    (ties: in (h, w, k) order here; the fork's std::sort leaves them unspecified), the best
    ``per_nms_topn`` kept (0: all), suppressed by :func:`rpn_nms` (IoU ``>= nms_thresh``; an unset
    nms_thresh of 0 keeps one box), the best ``post_nms_topn`` kept (0: all).
    Tops: rois ``R x 5 x 1 x 1`` ``[0, x1, y1, x2, y2]``, optionally scores ``R x 1 x 1 x 1``.
    No backward (the fork's Backward_cpu is empty).
    """
    exact_num_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 2

    def layer_setup(self, bottom, top):
        p = fork_param(self.layer_param, "rpn_param")
        if p is None:
            raise self.error("this schema has no rpn_param")
        self.feat_stride = int(p.feat_stride)
        self.min_size = int(p.boxminsize)
        self.pre_n, self.post_n = int(p.per_nms_topn), int(p.post_nms_topn)
        self.nms_thresh = float(np.float32(p.nms_thresh))
        self.anchors = rpn_anchors(int(p.basesize), list(p.ratio), list(p.scale))
        if not len(self.anchors):
            raise self.error("rpn_param gives no anchors: it needs at least one scale and one "
                             "ratio")
        top[0].reshape(1, 5, 1, 1)
        if len(top) > 1:
            top[1].reshape(1, 1, 1, 1)

    def reshape(self, bottom, top):
        a = len(self.anchors)
        s, d = bottom[0].shape, bottom[1].shape
        if len(s) != 4 or len(d) != 4 or s[1] != 2 * a or d[1] != 4 * a or s[2:] != d[2:]:
            raise self.error("%d anchors need scores N x %d x H x W and deltas N x %d x H x W, "
                             "got %s and %s" % (a, 2 * a, 4 * a, s, d), ShapeError)
        if bottom[2].count < 3:
            raise self.error("im_info needs [height, width, scale], got shape %s"
                             % (bottom[2].shape,), ShapeError)

    def proposals(self, scores, deltas, info):
        """(boxes R x 4, scores R) of one image: ``scores`` 2A x H x W, ``deltas`` 4A x H x W."""
        a = len(self.anchors)
        height, width = deltas.shape[1:]
        sy, sx = np.meshgrid(np.arange(height) * self.feat_stride,
                             np.arange(width) * self.feat_stride, indexing="ij")
        anc = self.anchors[None, None] + np.stack([sx, sy, sx, sy], -1)[:, :, None]  # H W A 4
        aw = anc[..., 2] - anc[..., 0] + 1.0
        ah = anc[..., 3] - anc[..., 1] + 1.0
        d = deltas.reshape(a, 4, height, width).transpose(2, 3, 0, 1).astype(np.float64)
        cx = d[..., 0] * aw + (anc[..., 0] + 0.5 * aw)
        cy = d[..., 1] * ah + (anc[..., 1] + 0.5 * ah)
        with np.errstate(over="ignore"):
            pw = np.exp(d[..., 2]) * aw
            ph = np.exp(d[..., 3]) * ah
        fg = scores[a:2 * a].transpose(1, 2, 0).astype(np.float64)
        src_h, src_w, scale = int(info[0]), int(info[1]), float(np.float32(info[2]))
        local_min = float(np.float32(self.min_size * scale))
        keep = ~((pw < local_min) | (ph < local_min))
        cx, cy, pw, ph, fg = cx[keep], cy[keep], pw[keep], ph[keep], fg[keep]
        boxes = np.stack([np.clip(cx - 0.5 * pw, 0, src_w), np.clip(cy - 0.5 * ph, 0, src_h),
                          np.clip(cx + 0.5 * pw, 0, src_w), np.clip(cy + 0.5 * ph, 0, src_h)], 1)
        order = np.argsort(-fg, kind="stable")
        if self.pre_n > 0:
            order = order[:self.pre_n]
        boxes, fg = boxes[order], fg[order]
        kept = rpn_nms(boxes, self.nms_thresh)
        if self.post_n > 0:
            kept = kept[:self.post_n]
        return boxes[kept], fg[kept]

    def forward_cpu(self, bottom, top):
        info = bottom[2].data.reshape(-1)[:3]
        boxes, fg = self.proposals(bottom[0].data[0], bottom[1].data[0], info)
        rois = np.hstack([np.zeros((len(boxes), 1)), boxes])
        top[0].reshape(len(boxes), 5, 1, 1)
        top[0].data[...] = rois.reshape(-1, 5, 1, 1)
        if len(top) > 1:
            top[1].reshape(len(boxes), 1, 1, 1)
            top[1].data[...] = fg.reshape(-1, 1, 1, 1)

    def backward_cpu(self, top, propagate_down, bottom):
        pass

    def allow_force_backward(self, bottom_index):
        return False
