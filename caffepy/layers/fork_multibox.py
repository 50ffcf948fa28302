"""SSD's training loss (weiliu89/caffe): MultiBoxLoss.

Boxes are ``[xmin, ymin, xmax, ymax]`` normalised to the image, as in fork_detection.py.
"""
import numpy as np

from .base import Layer, register_layer
from .loss import normalization_mode, normalizer

_FLT_MIN = np.finfo(np.float32).tiny


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


def match(priors, gt, per_prediction, threshold):
    """SSD's MatchBBox (label -1): (gt index per prior or -1, max overlap per prior).

    Bipartite first: repeatedly the largest overlap (> 1e-6) between an unmatched prior and a
    ground truth not yet taken; then, PER_PREDICTION, every unmatched prior takes its best ground
    truth when that overlap is >= ``threshold``.
    """
    ov = overlaps(priors, gt)
    ov = np.where(ov > 1e-6, ov, 0.0)
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
    Gradients: loc_weight * smoothL1'(.) / n on the positives' offsets, (softmax - onehot) / n
    (LOGISTIC: (sigmoid - onehot) / n) on the selected confidences, times the top diff; nothing
    elsewhere.

    prototxt: ``multibox_loss_param { num_classes (required) loc_loss_type: SMOOTH_L1
    conf_loss_type: SOFTMAX loc_weight: 1 share_location: true match_type: PER_PREDICTION
    overlap_threshold: 0.5 use_prior_for_matching: true background_label_id: 0
    use_difficult_gt: true neg_pos_ratio: 3 neg_overlap: 0.5 code_type: CORNER
    encode_variance_in_target: false mining_type: MAX_NEGATIVE (do_neg_mining: legacy) }``,
    ``loss_param { normalization: VALID }``. Supported: SMOOTH_L1, SOFTMAX or LOGISTIC, share_location,
    use_prior_for_matching, mining MAX_NEGATIVE or NONE (NONE: every prior counts), no nms_param
    in mining, no bp_inside / ignore_cross_boundary_bbox / map_object_to_agnostic.
    Bottoms: loc (N x P*4), conf (N x P*C), priors (1 x 2 x P*4), ground truth (1 x 1 x G x 8,
    rows [image, label, instance, xmin, ymin, xmax, ymax, difficult]). Top: the scalar loss.
    """
    exact_num_bottom_blobs = 4
    exact_num_top_blobs = 1
    auto_top_blobs = True
    is_loss = True

    def layer_setup(self, bottom, top):
        p = self.layer_param.multibox_loss_param
        if not p.HasField("num_classes") or p.num_classes < 1:
            raise self.error("multibox_loss_param.num_classes is required")
        unsupported = [name for name, bad in (
            ("loc_loss_type L2", p.loc_loss_type != p.SMOOTH_L1),
            ("share_location: false", not p.share_location),
            ("use_prior_for_matching: false", not p.use_prior_for_matching),
            ("mining_type HARD_EXAMPLE", p.mining_type == p.HARD_EXAMPLE),
            ("nms_param in mining", p.HasField("nms_param") and p.nms_param.nms_threshold > 0),
            ("bp_inside", p.bp_inside), ("ignore_cross_boundary_bbox", p.ignore_cross_boundary_bbox),
            ("map_object_to_agnostic", p.map_object_to_agnostic)) if bad]
        if unsupported:
            raise self.error("not supported: %s" % ", ".join(unsupported))
        self.p = p
        self.C, self.bg = int(p.num_classes), int(p.background_label_id)
        self.logistic = p.conf_loss_type == p.LOGISTIC
        self.mining = p.mining_type != p.NONE
        if p.HasField("do_neg_mining") and not p.HasField("mining_type"):
            self.mining = bool(p.do_neg_mining)
        lp = self.layer_param.loss_param
        self.norm_mode = normalization_mode(lp, legacy_default=type(lp).VALID)

    def reshape(self, bottom, top):
        loc, conf, priors, gt = bottom
        P = loc.count // max(loc.shape[0], 1) // 4
        if loc.count != loc.shape[0] * P * 4 or priors.count != 2 * P * 4:
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
            if row[7] and not self.p.use_difficult_gt:
                continue
            out.setdefault(int(row[0]), []).append(row)
        return {k: np.array(v) for k, v in out.items()}

    def forward_cpu(self, bottom, top):
        p, N, P, C = self.p, bottom[0].shape[0], self.P, self.C
        loc = bottom[0].data.reshape(N, P, 4).astype(np.float64)
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
        labels = np.full((N, P), -1)            # -1: not selected; else the class to learn
        self.pos, self.loc_target = [], []
        for b in range(N):
            if b not in gts:
                if not self.mining:
                    labels[b] = self.bg
                continue
            g = gts[b]
            idx, best = match(priors, g[:, 3:7], p.match_type == p.PER_PREDICTION,
                              p.overlap_threshold)
            pos = np.nonzero(idx >= 0)[0]
            labels[b, pos] = g[idx[pos], 1].astype(int)
            if len(pos):
                self.pos.append((b, pos))
                self.loc_target.append(encode(priors[pos], variances[pos], g[idx[pos], 3:7],
                                              p.code_type, p.encode_variance_in_target))
            neg = np.nonzero((idx == -1) & (best < p.neg_overlap))[0]
            if self.mining:
                k = min(int(len(pos) * p.neg_pos_ratio), len(neg))
                if self.logistic:      # every class against the background's one-hot target
                    loss = bce[b, neg].sum(axis=1) - conf[b, neg, self.bg]
                else:
                    loss = -np.log(np.maximum(self.prob[b, neg, self.bg], _FLT_MIN))
                neg = neg[np.argsort(-loss, kind="stable")[:k]]
            else:
                neg = np.nonzero(idx == -1)[0]
            labels[b, neg] = self.bg
        self.labels = labels
        matches = sum(len(pos) for _, pos in self.pos)
        self.norm = normalizer(self.norm_mode, self.layer_param.loss_param, N, P, matches)
        self.loc_diff = [loc[b, pos] - t for (b, pos), t in zip(self.pos, self.loc_target)]
        loc_loss = sum(np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5).sum()
                       for d in self.loc_diff)
        sel = labels >= 0
        if self.logistic:
            conf_loss = bce[sel].sum() - conf[sel, labels[sel]].sum()
        else:
            conf_loss = -np.log(np.maximum(self.prob[sel, labels[sel]], _FLT_MIN)).sum()
        top[0].data[...] = (p.loc_weight * loc_loss + conf_loss) / self.norm

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[2] or propagate_down[3]:
            raise self.error("cannot backpropagate to the prior or label inputs")
        scale = float(top[0].diff) / self.norm
        N, P, C = bottom[0].shape[0], self.P, self.C
        if propagate_down[0]:
            g = np.zeros((N, P, 4))
            for (b, pos), d in zip(self.pos, self.loc_diff):
                g[b, pos] = np.where(np.abs(d) < 1, d, np.sign(d))
            bottom[0].diff[...] = (self.p.loc_weight * scale * g).reshape(bottom[0].shape)
        if propagate_down[1]:
            g = np.zeros((N, P, C))
            sel = self.labels >= 0
            g[sel] = self.prob[sel]
            b, i = np.nonzero(sel)
            g[b, i, self.labels[sel]] -= 1
            bottom[1].diff[...] = (scale * g).reshape(bottom[1].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index < 2
