"""SSD's training loss (weiliu89/caffe): MultiBoxLoss.

Boxes are ``[xmin, ymin, xmax, ymax]`` normalised to the image, as in detection.py.
"""
import numpy as np

from ...layers.base import Layer, register_layer
from .detection import decode_boxes, jaccard
from ...layers.loss import normalization_mode, normalizer

_FLT_MIN = np.finfo(np.float32).tiny


def _smooth_l1(d):
    return np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5)


def _nms(boxes, order, threshold, top_k):
    """SSD's ApplyNMS over ``boxes`` visited in ``order`` (descending score): positions kept."""
    if top_k > -1:
        order = order[:top_k]
    size = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    left, kept = [int(i) for i in order if size[i] >= 1e-5], []
    while left:
        best = left.pop(0)
        kept.append(best)
        if top_k > -1 and len(kept) >= top_k:
            break
        if left:
            ov = jaccard(boxes[best], boxes[left])
            left = [i for i, o in zip(left, ov) if o <= threshold]
    return np.array(kept, int)


def overlaps(a, b):
    """Jaccard overlaps (len(a) x len(b)) of normalised corner boxes, SSD's JaccardOverlap."""
    a, b = a[:, None, :], b[None, :, :]
    iw = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0])
    ih = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1])
    meet = (iw > 0) & (ih > 0)
    inter = np.where(meet, iw * ih, 0.0)

    def size(x):
        ok = (x[..., 2] >= x[..., 0]) & (x[..., 3] >= x[..., 1])
        return np.where(ok, (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1]), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(meet, inter / (size(a) + size(b) - inter), 0.0)


def match(priors, gt, per_prediction, threshold, ignore_cross_boundary=False):
    """SSD's MatchBBox (label -1): (gt index per prior or -1, max overlap per prior).

    Bipartite first: repeatedly the largest overlap (> 1e-6) between an unmatched prior and a
    ground truth not yet taken; then, PER_PREDICTION, every unmatched prior takes its best ground
    truth when that overlap is >= ``threshold``. With ``ignore_cross_boundary`` a prior with a
    coordinate outside [0, 1] is never matched: index -2, overlap 0.
    """
    ov = overlaps(priors, gt)
    ov = np.where(ov > 1e-6, ov, 0.0)
    crossing = ((priors < 0) | (priors > 1)).any(axis=1) if ignore_cross_boundary else None
    if crossing is not None:
        ov[crossing] = 0.0
    best = ov.max(axis=1) if len(gt) else np.zeros(len(priors))
    idx = np.full(len(priors), -1)
    work = ov.copy()
    for _ in range(len(gt)):
        i, j = np.unravel_index(np.argmax(work), work.shape)
        if work[i, j] <= 0:
            break
        idx[i] = j
        best[i] = ov[i, j]
        work[i, :] = 0
        work[:, j] = 0
    if per_prediction:
        free = (idx == -1) & (ov.max(axis=1, initial=0) >= threshold)
        free &= ov.max(axis=1, initial=0) > 0
        idx[free] = ov[free].argmax(axis=1)
    if crossing is not None:
        idx[crossing] = -2
    return idx, best


def encode(priors, variances, boxes, code_type, variance_in_target):
    """SSD's EncodeBBox for rows of matched (prior, variance, ground-truth box)."""
    var = np.ones_like(variances) if variance_in_target else variances
    pw, ph = priors[:, 2] - priors[:, 0], priors[:, 3] - priors[:, 1]
    if code_type == 1:                                  # CORNER
        return (boxes - priors) / var
    if code_type == 3:                                  # CORNER_SIZE
        return (boxes - priors) / np.stack([pw, ph, pw, ph], 1) / var
    bw, bh = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return np.stack([((boxes[:, 0] + boxes[:, 2]) - (priors[:, 0] + priors[:, 2])) / 2 / pw,
                     ((boxes[:, 1] + boxes[:, 3]) - (priors[:, 1] + priors[:, 3])) / 2 / ph,
                     np.log(bw / pw), np.log(bh / ph)], 1) / var


@register_layer("MultiBoxLoss")
class MultiBoxLossLayer(Layer):
    """SSD's MultiBox loss: match priors to ground truth, mine hard negatives, smooth-L1 on the
    matched boxes' offsets plus softmax loss on positives and mined negatives.

    Per image with ground truth: priors are matched (:func:`match`, on the priors themselves,
    ``use_prior_for_matching``); positives are matched priors. MAX_NEGATIVE mining: among
    unmatched priors whose best overlap is < ``neg_overlap``, the min(floor(pos x
    ``neg_pos_ratio``), candidates) with the largest background softmax loss
    -log p(background) are negatives. With M matches over the batch and the normaliser
    n = LossParameter normalization of (VALID: M, FULL: N x P, BATCH_SIZE: N, NONE: 1), at least 1:
        loss = loc_weight * sum_pos smoothL1(loc_pred - encode(gt, prior)) / n
               + sum_{pos, neg} -log max(softmax(conf)[label], FLT_MIN) / n
    (label: the ground truth's for positives, ``background_label_id`` for negatives;
    smoothL1(x) = 0.5 x^2 if |x| < 1 else |x| - 0.5, summed over the 4 offsets).
    ``conf_loss_type: LOGISTIC`` replaces the softmax loss by the sum over classes of the sigmoid
    cross entropy against the one-hot label (mining ranks negatives by that sum too).
    A term whose bottom the layer's ``propagate_down`` turns off (``propagate_down: false`` for
    loc or conf) is left out of the loss, as in SSD.
    Gradients: loc_weight * smoothL1'(.) / n on the positives' offsets, (softmax - onehot) / n
    (LOGISTIC: (sigmoid - onehot) / n) on the selected confidences, times the top diff; nothing
    elsewhere.

    prototxt: ``multibox_loss_param { num_classes (required) loc_loss_type: SMOOTH_L1
    conf_loss_type: SOFTMAX loc_weight: 1 share_location: true match_type: PER_PREDICTION
    overlap_threshold: 0.5 use_prior_for_matching: true background_label_id: 0
    use_difficult_gt: true neg_pos_ratio: 3 neg_overlap: 0.5 code_type: CORNER
    encode_variance_in_target: false mining_type: MAX_NEGATIVE (do_neg_mining: legacy)
    nms_param { nms_threshold: 0.3 top_k } sample_size: 64 use_prior_for_nms: false
    ignore_cross_boundary_bbox: false bp_inside: false map_object_to_agnostic: false }``,
    ``loss_param { normalization: VALID }``.
    HARD_EXAMPLE mining (:meth:`_mine`): every prior of an image with ground truth is a candidate,
    scored by its softmax (logistic) loss against its label (the matched truth's, else the
    background) plus, when matched, its smooth-L1 loss; the min(``sample_size``, P) highest are
    kept: a matched prior not kept stops being a positive (M shrinks), an unmatched one kept is a
    negative. With ``nms_param { nms_threshold > 0 top_k }`` (either mining) the candidates are
    first put through SSD's ApplyNMS by that score (boxes: the priors with
    ``use_prior_for_nms``, else the decoded predictions; boxes under 1e-5 in size dropped;
    ``top_k`` unset is 0 as in the fork, which keeps nothing) and taken in NMS order. Ties in
    the loss keep prior order (the fork's std::sort leaves them unspecified).
    ``share_location: false`` (with mining NONE, as the fork requires): loc holds C boxes per
    prior (N x P*C*4, class c at offset 4 c); a positive's offsets are those of its truth's class.
    ``loc_loss_type: L2``: 0.5 x^2 per offset instead of smoothL1 (gradient x), as SSD's
    EuclideanLoss over the matched offsets.
    ``ignore_cross_boundary_bbox``: matched boxes (priors, or decoded predictions) reaching
    outside [0, 1] are never matched nor mined as negatives (SSD's -2); without mining they count
    as background like every unmatched prior.
    ``use_prior_for_matching: false``: the decoded predictions (not clipped) are matched
    instead of the priors; with per-class locations each class's predictions against that
    class's truths, so a prior can be a positive of several classes (each counts in M; its
    confidence target is the last such class).
    The offsets' difference is (prediction - encoded truth) / variance with
    ``encode_variance_in_target`` (SSD divides both); ``bp_inside`` zeroes it (no loss, no
    gradient) on each coordinate whose matched box (the prior, or the decoded prediction without
    use_prior_for_matching) lies outside [0, 1].
    ``map_object_to_agnostic`` (num_classes 2): every positive's
    confidence target is background_label_id + 1 (mining still scores the truth's own label, as
    SSD does, so a label >= num_classes is an error there).
    Supported: SMOOTH_L1 or L2, SOFTMAX or LOGISTIC.
    Bottoms: loc (N x P*4, or P*C*4), conf (N x P*C), priors (1 x 2 x P*4), ground truth
    (1 x 1 x G x 8, rows [image, label, instance, xmin, ymin, xmax, ymax, difficult]).
    Top: the scalar loss.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.multibox_loss_param
        if not p.HasField("num_classes") or p.num_classes < 1:
            raise self.error("multibox_loss_param.num_classes is required")
        self.p = p
        self.C, self.bg = int(p.num_classes), int(p.background_label_id)
        if p.map_object_to_agnostic and self.C != (2 if self.bg >= 0 else 1):
            raise self.error("map_object_to_agnostic needs num_classes %d (background_label_id "
                             "%d), got %d" % (2 if self.bg >= 0 else 1, self.bg, self.C))
        self.logistic = p.conf_loss_type == p.LOGISTIC
        if not self.logistic and not 0 <= self.bg < self.C:
            raise self.error("background_label_id %d must be in [0, num_classes %d) for SOFTMAX"
                             % (self.bg, self.C))
        self.mining = p.mining_type != p.NONE
        if p.HasField("do_neg_mining") and not p.HasField("mining_type"):
            self.mining = bool(p.do_neg_mining)
        self.hard = self.mining and p.mining_type == p.HARD_EXAMPLE
        if self.hard and p.sample_size <= 0:
            raise self.error("HARD_EXAMPLE mining needs sample_size > 0, got %d" % p.sample_size)
        if self.mining and not p.share_location:
            raise self.error("negative mining needs share_location: true (as in SSD)")
        self.Lc = 1 if p.share_location else self.C
        self.l2 = p.loc_loss_type == p.L2
        lp = self.layer_param.loss_param
        self.norm_mode = normalization_mode(lp, legacy_default=type(lp).VALID)

    def reshape(self, bottom, top):
        loc, conf, priors, gt = bottom
        P = loc.count // max(loc.shape[0], 1) // (4 * self.Lc)
        if loc.count != loc.shape[0] * P * 4 * self.Lc or priors.count != 2 * P * 4:
            raise self.error("loc %s and priors %s disagree on the number of priors"
                             % (loc.shape, priors.shape))
        if conf.count != conf.shape[0] * P * self.C or conf.shape[0] != loc.shape[0]:
            raise self.error("conf %s must be N x %d*%d" % (conf.shape, P, self.C))
        if gt.shape[-1] != 8:
            raise self.error("ground truth must have rows of 8 values, got %s" % (gt.shape,))
        self.P = P
        top[0].reshape(())

    def _ground_truth(self, gt):
        out = {}
        for row in gt.reshape(-1, 8):
            if int(row[0]) == -1:
                continue
            if int(row[1]) == self.bg:
                raise self.error("found the background label %d in the ground truth" % self.bg)
            if not self.p.map_object_to_agnostic and not 0 <= int(row[1]) < self.C:
                raise self.error("ground-truth label %d is outside [0, num_classes %d)"
                                 % (int(row[1]), self.C))
            if row[7] and not self.p.use_difficult_gt:
                continue
            out.setdefault(int(row[0]), []).append(row)
        return {k: np.array(v) for k, v in out.items()}

    def forward_cpu(self, bottom, top):
        p, N, P, C = self.p, bottom[0].shape[0], self.P, self.C
        loc = bottom[0].data.reshape(N, P, self.Lc, 4).astype(np.float64)
        conf = bottom[1].data.reshape(N, P, C).astype(np.float64)
        pri = bottom[2].data.reshape(2, P, 4).astype(np.float64)
        priors, variances = pri[0], pri[1]
        gts = self._ground_truth(bottom[3].data.astype(np.float64))
        if self.logistic:
            self.prob = 1.0 / (1.0 + np.exp(-conf))
            bce = np.maximum(conf, 0) + np.log1p(np.exp(-np.abs(conf)))     # target 0, per class
        else:
            z = conf - conf.max(axis=2, keepdims=True)
            self.prob = np.exp(z) / np.exp(z).sum(axis=2, keepdims=True)
        if self.logistic:      # each prior's loss against class c's one-hot target
            self.prior_loss = lambda b, m, c: bce[b, m].sum(axis=-1) - np.where(
                c >= 0, conf[b, m, np.maximum(c, 0)], 0.0)   # label -1: all-zero target
        else:
            self.prior_loss = lambda b, m, c: -np.log(np.maximum(self.prob[b, m, c], _FLT_MIN))
        labels = np.full((N, P), -1)            # the class to learn where ``chosen``
        chosen = np.zeros((N, P), bool)
        self.pos, self.loc_target = [], []      # loc_target: (scaled diff, scale) per image
        for b in range(N):
            if b not in gts:
                if not self.mining:
                    labels[b], chosen[b] = self.bg, True
                continue
            g = gts[b]
            pri_b = self._image_priors(bottom, b, priors, variances)
            idx, best, pos, gi, slot = self._match(
                g, loc[b], pri_b if p.use_prior_for_matching else priors, variances)
            diff, factor = self._loc_diff(loc[b], pos, gi, slot, g, pri_b, variances)
            if self.mining:
                mine_diff = diff if pri_b is priors else self._loc_diff(
                    loc[b], pos, gi, slot, g, priors, variances)[0]
                keep, neg = self._mine(b, loc[b], idx, best, g, pos, mine_diff, priors, variances)
                pos, gi, slot = pos[keep], gi[keep], slot[keep]
                diff, factor = diff[keep], factor[keep]
            else:
                neg = np.nonzero(idx < 0)[0]
            last = len(pos) - 1 - np.unique(pos[::-1], return_index=True)[1]
            labels[b, pos[last]] = (self.bg + 1 if p.map_object_to_agnostic    # objectness
                                    else g[gi[last], 1].astype(int))   # the last class wins
            labels[b, neg] = self.bg
            chosen[b, pos] = chosen[b, neg] = True
            if len(pos):
                self.pos.append((b, pos, slot))
                self.loc_target.append((diff, factor))
        self.labels, self.chosen = labels, chosen
        matches = sum(len(pos) for _, pos, _ in self.pos)
        self.norm = normalizer(self.norm_mode, self.layer_param.loss_param, N, P, matches)
        self.loc_diff = [d for d, _ in self.loc_target]
        loc_loss = sum(self._loc_loss(d).sum() for d in self.loc_diff)
        b, i = np.nonzero(chosen)
        conf_loss = self._conf_loss(b, i, labels[chosen])
        # SSD adds a term only where the layer's propagate_down (default true, true) keeps it
        down = list(self.layer_param.propagate_down) or [True, True]
        top[0].data[...] = (p.loc_weight * loc_loss * down[0] + conf_loss * down[1]) / self.norm

    def _conf_loss(self, b, i, labels):
        """The confidence loss summed over the chosen priors (image b, prior i, their labels)."""
        return self.prior_loss(b, i, labels).sum()

    def _conf_grad(self, b, i, labels):
        """Its gradient on those priors' confidences (rows x C), before the scale: softmax (or
        sigmoid) - onehot(label)."""
        g = self.prob[b, i].copy()
        k = np.nonzero(labels >= 0)[0]
        g[k, labels[k]] -= 1
        return g

    def _match(self, g, loc, priors, variances):
        """SSD's FindMatches for one image: (idx, best) per prior as :func:`match` gives them,
        and the positives as (prior, truth row, loc slot) arrays; a prior may be a positive of
        several classes when locations are per class and matched on the predictions."""
        p = self.p
        args = (p.match_type == p.PER_PREDICTION, p.overlap_threshold, p.ignore_cross_boundary_bbox)

        def boxes(slot):
            return priors if p.use_prior_for_matching else decode_boxes(
                priors, variances, loc[:, slot], p.code_type, p.encode_variance_in_target)
        if p.use_prior_for_matching or p.share_location:
            idx, best = match(boxes(0), g[:, 3:7], *args)
            pos = np.nonzero(idx >= 0)[0]
            slot = np.zeros(len(pos), int) if p.share_location else g[idx[pos], 1].astype(int)
            return idx, best, pos, idx[pos], slot
        found = []
        for c in range(self.C):
            rows = np.nonzero(g[:, 1] == c)[0]
            if c == self.bg or not len(rows):
                continue
            ic, _ = match(boxes(c), g[rows, 3:7], *args)
            hit = np.nonzero(ic >= 0)[0]
            found.append((hit, rows[ic[hit]], np.full(len(hit), c)))
        pos, gi, slot = (np.concatenate([f[i] for f in found]).astype(int) if found
                         else np.zeros(0, int) for i in range(3))
        idx = np.full(len(priors), -1)
        idx[pos] = gi
        return idx, None, pos, gi, slot

    def _image_priors(self, bottom, b, priors, variances):
        """The priors image b's positives are matched (on priors) and encoded against."""
        return priors

    def _eligible(self, b, candidates):
        """Which mining candidates of image b may be picked."""
        return np.ones(len(candidates), bool)

    def _loc_loss(self, d):
        return 0.5 * d * d if self.l2 else _smooth_l1(d)

    def _loc_diff(self, loc, pos, gi, slot, g, priors, variances):
        """SSD's EncodeLocPrediction for one image's positives: ((prediction - encoded truth) f,
        f), f = 1 / variance with ``encode_variance_in_target`` (else 1), times 0 on the
        coordinates whose matched box (prior, or decoded prediction) lies outside [0, 1] with
        ``bp_inside``."""
        p = self.p
        pred = loc[pos, slot]
        target = encode(priors[pos], variances[pos], g[gi, 3:7], p.code_type,
                        p.encode_variance_in_target)
        factor = 1.0 / variances[pos] if p.encode_variance_in_target else np.ones_like(pred)
        if p.bp_inside:
            box = priors[pos] if p.use_prior_for_matching else decode_boxes(
                priors[pos], variances[pos], pred, p.code_type, p.encode_variance_in_target)
            factor = factor * ((box >= 0) & (box <= 1))
        return (pred - target) * factor, factor

    def _mine(self, b, loc, idx, best, g, pos, diff, priors, variances):
        """SSD's MineHardExamples for image b: (which of ``pos`` stay positives, negatives)."""
        p = self.p
        label = np.where(idx >= 0, g[np.maximum(idx, 0), 1], self.bg).astype(int)
        if label.max(initial=0) >= self.C:
            raise self.error("ground-truth label %d is not below num_classes %d"
                             % (label.max(), self.C))
        loss = self.prior_loss(b, np.arange(len(idx)), label)
        if self.hard:
            loss[pos] += self._loc_loss(diff).sum(axis=1)
            candidates = np.arange(len(idx))
        else:
            candidates = np.nonzero((idx == -1) & (best < p.neg_overlap))[0]
        candidates = candidates[self._eligible(b, candidates)]
        if self.hard:
            k = min(int(p.sample_size), len(candidates))
        else:
            k = min(int(len(pos) * p.neg_pos_ratio), len(candidates))
        order = np.argsort(-loss[candidates], kind="stable")
        if p.HasField("nms_param") and p.nms_param.nms_threshold > 0:
            boxes = priors if p.use_prior_for_nms else decode_boxes(
                priors, variances, loc[:, 0], p.code_type, p.encode_variance_in_target)
            order = _nms(boxes[candidates], order, p.nms_param.nms_threshold,
                         int(p.nms_param.top_k))
        chosen = candidates[order[:k]]
        if not self.hard:
            return np.arange(len(pos)), chosen
        picked = np.zeros(len(idx), bool)
        picked[chosen] = True
        return np.nonzero(picked[pos])[0], np.nonzero(picked & (idx == -1))[0]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2] or propagate_down[3]:
            raise self.error("cannot backpropagate to the prior or label inputs")
        scale = float(top[0].diff) / self.norm
        N, P, C = bottom[0].shape[0], self.P, self.C
        if propagate_down[0]:
            g = np.zeros((N, P, self.Lc, 4))
            for (b, pos, slot), (d, f) in zip(self.pos, self.loc_target):
                g[b, pos, slot] = (d if self.l2 else np.where(np.abs(d) < 1, d, np.sign(d))) * f
            bottom[0].diff[...] = (self.p.loc_weight * scale * g).reshape(bottom[0].shape)
        if propagate_down[1]:
            g = np.zeros((N, P, C))
            b, i = np.nonzero(self.chosen)
            g[b, i] = self._conf_grad(b, i, self.labels[self.chosen])
            bottom[1].diff[...] = (scale * g).reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2
