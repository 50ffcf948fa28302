"""The roi sampler of MSCNN's second stage and Cascade R-CNN (``ProposalTarget``), following
zhaoweicai/cascade-rcnn's proposal_target_layer.cpp (whose parameters are a superset of MSCNN's),
and Cascade R-CNN's ``DetectionEvaluate`` (a per-layer variant of SSD's: 3 bottoms).
"""
import numpy as np

from ...layers.base import Layer, register_layer, register_variant
from .cascade_rcnn import jaccard
from .mscnn import box_iou
from .mscnn_train import bbox_norm


def jaccard_xywh(a, b):
    """Cascade R-CNN's JaccardOverlap of (x, y, w, h) boxes, inclusive pixels: the overlap runs
    to min(x + w - 1) and counts + 1; 0 for an empty box. (MSCNN's BoxIOU runs to min(x + w).)"""
    if a[2] <= 0 or a[3] <= 0 or b[2] <= 0 or b[3] <= 0:
        return 0.0
    tlx, tly = max(a[0], b[0]), max(a[1], b[1])
    brx, bry = min(a[0] + a[2] - 1, b[0] + b[2] - 1), min(a[1] + a[3] - 1, b[1] + b[3] - 1)
    over = 0.0 if (tlx > brx or tly > bry) else (brx - tlx + 1) * (bry - tly + 1)
    return over / (a[2] * a[3] + b[2] * b[3] - over)


@register_layer("ProposalTarget")
class ProposalTargetLayer(Layer):
    """Sample B rois, label them and give their box-regression targets.

    Bottoms: rois R x 5 (image, x1, y1, x2, y2), gt boxes G x (>= 7) (image, x1, y1, x2, y2,
    label, ignored, ...; image -1 rows are skipped). Boxes are (x, y, w = x2 - x1 + 1, h). With
    ``append_gtbox`` the gt boxes join the rois. Each roi takes its best-IoU gt of the same image
    (Cascade R-CNN's inclusive JaccardOverlap when the gt rows have 8 values, as its readers give;
    MSCNN's BoxIOU for its 7; none: overlap 0):
    overlap >= fg_thr: foreground (left out when that gt is ignored); in [bg_thr_lw, bg_thr_hg):
    background; else "discarded". B = ``batch_size`` (-1: foreground + background count), F =
    round(fg_fraction B) (-1: all foreground). F foregrounds are drawn at random (all when fewer),
    then B - F backgrounds (all when fewer; then with ``pickup_discard`` the first discarded rois
    fill up). With no roi at all one random background box (>= 32 pixels, IoU < fg_thr, in an
    ``img_width`` x ``img_height`` image) is made.
    Tops (K rows: foregrounds then backgrounds): rois K x 5, labels K x 1, targets, inside and
    outside weights K x D (D = 4 cls_num with ``bbox_reg_param.cls_aware``, else 8: class
    min(label, 1)), matched gt K x 6 (label, x1, y1, x2, y2, overlap; zeros for background),
    [sample weights K x 1]. Targets at columns 4c..4c + 3 of a foreground: ((gx - rx) / rw,
    (gy - ry) / rh, log(gw / rw), log(gh / rh)) of the centres / sizes, normalised by
    ``bbox_reg_param``; weights 1 there when bbox_thr_lw <= overlap <= bbox_thr_hg. Sample weights:
    1 (overlap for foregrounds with ``iou_weighted``), then foregrounds x fg_fraction K / their sum
    and backgrounds x (1 - fg_fraction) K / their sum (when the foreground sum is not 0). No backward.

    prototxt: ``proposal_target_param { cls_num batch_size: 128 fg_fraction: 0.25
    num_img_per_batch: 4 fg_thr: 0.5 bg_thr_hg: 0.5 bg_thr_lw: 0.1 img_width img_height
    iou_weighted: false bbox_thr_lw: 0 bbox_thr_hg: 10 pickup_discard: true append_gtbox: true }``,
    ``bbox_reg_param { bbox_mean bbox_std cls_aware: true }``.
    """
    exact_num_bottom_blobs = 2
    min_top_blobs = 6
    max_top_blobs = 7

    def layer_setup(self, bottom, top):
        self.p = p = self.layer_param.proposal_target_param
        self.mean, self.std = bbox_norm(self.layer_param, self.error)
        self.D = 4 * p.cls_num if self.layer_param.bbox_reg_param.cls_aware else 8
        if p.fg_thr < p.bg_thr_hg:
            raise self.error("proposal_target_param fg_thr must be >= bg_thr_hg")

    def reshape(self, bottom, top):
        p = self.p
        if bottom[0].num_axes < 2 or bottom[0].shape[1] != 5:
            raise self.error("bottom 0 (rois) must be R x 5, got %s" % (tuple(bottom[0].shape),))
        if bottom[1].num_axes < 2 or bottom[1].shape[1] < 7:
            raise self.error("bottom 1 (gt boxes) must be G x 7 or more, got %s"
                             % (tuple(bottom[1].shape),))
        b = max(bottom[0].shape[0], 1) if p.batch_size == -1 else p.batch_size
        if b <= 0:
            raise self.error("proposal_target_param batch_size must be > 0 or -1")
        self._shape(top, b)

    def _shape(self, top, k):
        for t, c in zip(top, (5, 1, self.D, self.D, self.D, 6, 1)):
            t.reshape((k, c, 1, 1))

    def forward_cpu(self, bottom, top):
        p, rng = self.p, self.rng()
        r = bottom[0].data.reshape(bottom[0].shape[0], -1).astype(np.float64)
        g = bottom[1].data.reshape(bottom[1].shape[0], -1).astype(np.float64)
        xywh = lambda a: np.stack([a[:, 0], a[:, 1], a[:, 2], a[:, 3] - a[:, 1] + 1,
                                   a[:, 4] - a[:, 2] + 1], 1)
        rois = xywh(r)
        if len(rois) and rois[:, 0].max() >= p.num_img_per_batch:
            raise self.error("roi image id >= num_img_per_batch (%d)" % p.num_img_per_batch)
        iou = jaccard_xywh if g.shape[1] >= 8 else box_iou
        g = g[g[:, 0] != -1]
        gts, labels, ignored = xywh(g[:, :5]), g[:, 5], g[:, 6]
        if p.append_gtbox:
            rois = np.concatenate([rois, gts])
        best, over = np.full(len(rois), -1), np.zeros(len(rois))
        for i, roi in enumerate(rois):
            same = np.flatnonzero(gts[:, 0] == roi[0])
            if same.size:
                ious = [iou(roi[1:], gts[j, 1:]) for j in same]
                best[i], over[i] = same[int(np.argmax(ious))], max(ious)
        fg = [i for i in range(len(rois)) if over[i] >= p.fg_thr and not ignored[best[i]]]
        bg = [i for i in range(len(rois)) if p.bg_thr_lw <= over[i] < p.bg_thr_hg]
        rest = [i for i in range(len(rois)) if over[i] < p.bg_thr_lw or p.bg_thr_hg <= over[i] < p.fg_thr]
        if p.batch_size == -1:
            B, F = len(fg) + len(bg), len(fg)
        else:
            B, F = p.batch_size, int(np.floor(p.fg_fraction * p.batch_size + 0.5))
        F = min(F, len(fg))
        if len(fg) > F:
            fg = list(rng.permutation(fg)[:F])
        if len(bg) > B - F:
            bg = list(rng.permutation(bg)[:B - F])
        elif p.pickup_discard:
            bg += rest[:B - F - len(bg)]
        if not fg and not bg:
            rois = np.concatenate([rois, [self._backup(gts, rng, iou)]])
            best, over = np.append(best, -1), np.append(over, 0.0)
            bg = [len(rois) - 1]
        keep = list(fg) + list(bg)
        K = len(keep)
        self._shape(top, K)
        for t in top[2:6]:
            t.data[...] = 0
        lab = np.zeros(K)
        lab[:len(fg)] = labels[best[fg]] if fg else []
        kr = rois[keep]
        top[0].data[...] = np.stack([kr[:, 0], kr[:, 1], kr[:, 2], kr[:, 1] + kr[:, 3] - 1,
                                     kr[:, 2] + kr[:, 4] - 1], 1).reshape(K, 5, 1, 1)
        top[1].data[...] = lab.reshape(K, 1, 1, 1)
        for n, i in enumerate(keep[:len(fg)]):
            gt, roi = gts[best[i]], rois[i]
            t = np.array([(gt[1] + gt[3] / 2 - roi[1] - roi[3] / 2) / roi[3],
                          (gt[2] + gt[4] / 2 - roi[2] - roi[4] / 2) / roi[4],
                          np.log(gt[3] / roi[3]), np.log(gt[4] / roi[4])])
            t = (t - self.mean) / self.std
            c = int(lab[n]) if self.layer_param.bbox_reg_param.cls_aware else 1
            top[2].data[n, 4 * c:4 * c + 4] = t.reshape(4, 1, 1)
            w = 1.0 if p.bbox_thr_lw <= over[i] <= p.bbox_thr_hg else 0.0
            top[3].data[n, 4 * c:4 * c + 4] = w
            top[4].data[n, 4 * c:4 * c + 4] = w
            top[5].data[n] = np.array([lab[n], gt[1], gt[2], gt[1] + gt[3] - 1,
                                       gt[2] + gt[4] - 1, over[i]]).reshape(6, 1, 1)
        if len(top) > 6:
            sw = np.ones(K)
            pos = lab > 0
            if p.iou_weighted:
                sw[pos] = over[keep][pos]
            ps, ns = sw[pos].sum(), sw[~pos].sum()
            if ps != 0:
                sw = np.where(pos, sw * p.fg_fraction * K / ps, sw * (1 - p.fg_fraction) * K / ns)
            top[6].data[...] = sw.reshape(K, 1, 1, 1)

    def _backup(self, gts, rng, iou):
        p = self.p
        if p.img_width <= 32 or p.img_height <= 32:
            raise self.error("no roi to sample and img_width / img_height (> 32) not set")
        for _ in range(1000):
            img = int(rng.integers(p.num_img_per_batch))
            x, y = int(rng.integers(p.img_width - 32)), int(rng.integers(p.img_height - 32))
            w = max(int(rng.integers(p.img_width - x)), 32)
            h = max(int(rng.integers(p.img_height - y)), 32)
            ious = [iou((x, y, w, h), gt[1:]) for gt in gts if gt[0] == img]
            if not ious or max(ious) < p.fg_thr:
                return [img, x, y, w, h]
        raise self.error("could not draw a background roi away from the ground truth")


@register_variant("DetectionEvaluate", lambda lp: len(lp.bottom) == 3)
class CascadeDetectionEvaluateLayer(Layer):
    """Cascade R-CNN's DetectionEvaluate: true / false positives of one image's detections.

    Bottoms: detections D x 7 (image, x1, y1, x2, y2, label, score; image -1 or label -1 rows
    skipped), gt boxes G x 8 (image, x1, y1, x2, y2, label, ignored, difficult), image sizes
    N x 2 (height, width of the net input). ``name_size_file`` lines "name height width" give the
    original sizes, one per evaluated image in turn (cycling). Top: (num_classes - 1 + valid
    detections) x 5: first per class c >= 1 (-1, c, positives, -1, -1) (difficult gts counted only
    with ``evaluate_difficult_gt``), then per image (ascending) and label (ascending) each
    detection by score: (image, label, score, tp, fp). Boxes of a label with gts are scaled to the
    original size and matched greedily to the gt of highest inclusive IoU: tp when IoU >=
    ``overlap_threshold`` and that gt is not taken yet (a difficult gt when not evaluating them:
    neither), else fp. The sizes file is read at the first forward (the fork reads it at setup;
    caffepy builds the net without it). No backward.

    prototxt: ``detection_evaluate_param { num_classes overlap_threshold: 0.5
    evaluate_difficult_gt: true name_size_file }`` (read by field name; SSD's message).
    """
    exact_num_bottom_blobs = 3
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.detection_evaluate_param
        if not p.HasField("num_classes") or not p.HasField("name_size_file"):
            raise self.error("detection_evaluate_param needs num_classes and name_size_file")
        if p.overlap_threshold <= 0:
            raise self.error("overlap_threshold must be > 0")
        self.p, self.sizes, self.count = p, None, 0

    def reshape(self, bottom, top):
        ch = [b.shape[1] if b.num_axes > 1 else None for b in bottom]
        if ch != [7, 8, 2]:
            raise self.error("bottoms must be D x 7, G x 8 and N x 2, got %s"
                             % [tuple(b.shape) for b in bottom])
        valid = int((bottom[0].data.reshape(-1, 7)[:, 5] != -1).sum())
        top[0].reshape((self.p.num_classes - 1 + valid, 5, 1, 1))

    def _read_sizes(self):
        try:
            with open(self.p.name_size_file) as f:
                words = f.read().split()
            self.sizes = [(float(words[i + 1]), float(words[i + 2]))
                          for i in range(0, len(words) - 2, 3)]
        except (OSError, ValueError, IndexError) as e:
            raise self.error("cannot read name_size_file %r: %s" % (self.p.name_size_file, e))
        if not self.sizes:
            raise self.error("name_size_file %r has no 'name height width' line"
                             % self.p.name_size_file)

    def forward_cpu(self, bottom, top):
        if self.sizes is None:
            self._read_sizes()
        p = self.p
        det = bottom[0].data.reshape(-1, 7).astype(np.float64)
        gt = bottom[1].data.reshape(-1, 8).astype(np.float64)
        size = bottom[2].data.reshape(-1, 2).astype(np.float64)
        det = det[(det[:, 0] != -1) & (det[:, 5] != -1)]
        gt = gt[gt[:, 0] != -1]
        rows = []
        for c in range(1, p.num_classes):
            g = gt[gt[:, 5] == c]
            n = len(g) if p.evaluate_difficult_gt else int((g[:, 7] == 0).sum())
            rows.append([-1, c, n, -1, -1])
        for img in sorted(set(det[:, 0].astype(int))):
            d_img, g_img = det[det[:, 0] == img], gt[gt[:, 0].astype(int) == img]
            ratio = None
            if len(g_img):
                if img >= len(size):
                    raise self.error("image %d has no size row (bottom 2 has %d)" % (img, len(size)))
                h0, w0 = self.sizes[self.count]
                ratio = np.array([w0 / size[img, 1], h0 / size[img, 0]] * 2)
            for c in sorted(set(d_img[:, 5].astype(int))):
                d = d_img[d_img[:, 5] == c]
                g = g_img[g_img[:, 5] == c]
                if not len(g):
                    rows += [[img, c, s, 0, 1] for s in d[:, 6]]
                    continue
                d = d[np.argsort(-d[:, 6], kind="stable")]
                boxes, gboxes = d[:, 1:5] * ratio, g[:, 1:5] * ratio
                taken = np.zeros(len(g), bool)
                for b, s in zip(boxes, d[:, 6]):
                    ious = [jaccard(b, q) for q in gboxes]
                    j = int(np.argmax(ious))
                    if ious[j] < p.overlap_threshold:
                        rows.append([img, c, s, 0, 1])
                    elif not p.evaluate_difficult_gt and g[j, 7]:
                        rows.append([img, c, s, 0, 0])
                    elif taken[j]:
                        rows.append([img, c, s, 0, 1])
                    else:
                        taken[j] = True
                        rows.append([img, c, s, 1, 0])
            self.count = (self.count + 1) % len(self.sizes)
        top[0].reshape((len(rows), 5, 1, 1))
        top[0].data[...] = np.asarray(rows, np.float64).reshape(top[0].shape)
