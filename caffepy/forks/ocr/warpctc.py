"""CTC of the warp-ctc Caffe forks and beam-search decoding.

* ``WarpCTCLoss``: ChWick/caffe's warp-ctc layer, with the 2-bottom form that senlinuc/caffe_ocr
  and its many copies add; it reads ChWick's ``ctc_loss_param { blank_index }``.
* ``CtcLoss``, ``ContinuationIndicator``, ``LabelsequenceAccuracy``: xmfbit/warpctc-caffe.
* ``CTCBeamSearchDecoder``: caffepy's (no Caffe fork publishes one): CTC prefix beam search with
  the interface of ChWick's ``CTCGreedyDecoder``.

warp-ctc's rules, which both loss layers keep: softmax over the classes inside; the usual CTC
paths (a label may repeat over time, the blank between two equal labels cannot be skipped); the
gradient w.r.t. the scores, y - posterior, for t < T_n and 0 beyond, not divided by N; a labelling
that cannot fit (U + repeats > T_n) costs 0 with a zero gradient.
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from .ctc import CTCGreedyDecoderLayer, CTCLossLayer, _lengths, _logsumexp, _targets


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


class _WarpCTC(CTCLossLayer):
    """The shared warp-ctc cost and gradient; subclasses read the lengths and labels."""

    def _check_scores(self, bottom):
        shape = bottom[0].shape
        if not (len(shape) == 3 or (len(shape) == 4 and shape[3] == 1)):
            raise self.error("scores must be T x N x C (x 1), got %s" % (shape,), ShapeError)
        return shape[:3]

    def layer_setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        self.T, self.N, self.C = self._check_scores(bottom)
        top[0].reshape(())

    def _costs(self, x, lengths, targets):
        """warp-ctc's per-sequence costs; keeps the gradient (N times the mean's) in self.grad."""
        T, N, C = x.shape
        x = x.astype(np.float64)
        e = np.exp(x - x.max(axis=2, keepdims=True))
        self.prob = e / e.sum(axis=2, keepdims=True)
        self.grad = np.zeros_like(self.prob)
        costs = np.zeros(N)
        for n in range(N):
            tn, z = int(lengths[n]), list(targets[n])
            if any(v < 0 or v >= C or v == self.blank for v in z):
                raise self.error("sequence %d: a label outside [0, %d) or equal to the blank %d"
                                 % (n, C, self.blank))
            if tn > T or tn < 0:
                raise self.error("sequence %d: length %d outside [0, %d]" % (n, tn, T))
            repeats = sum(1 for a, b in zip(z, z[1:]) if a == b)
            if tn == 0 or len(z) + repeats > tn:
                continue
            lp = np.asarray([self.blank] + [v for c in z for v in (c, self.blank)])
            with np.errstate(divide="ignore"):
                logy = np.log(self.prob[:tn, n])
            a = self._recursion(logy, lp, True)
            b = self._recursion(logy[::-1], lp[::-1], True)[::-1, ::-1]
            ab = a + b - logy[:, lp]
            logp = _logsumexp(ab[0])
            costs[n] = -logp
            post = np.zeros((tn, C))
            for c in np.unique(lp):
                post[:, c] = np.exp(_logsumexp(ab[:, lp == c], axis=1) - logp)
            self.grad[:tn, n] = self.prob[:tn, n] - post
        return costs

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down[1:]):
            raise self.error("cannot propagate to the lengths, indicators or labels")
        if propagate_down[0]:
            bottom[0].diff.reshape(self.grad.shape)[...] = self.grad * float(top[0].diff)


@register_layer("WarpCTCLoss")
class WarpCTCLossLayer(_WarpCTC):
    """warp-ctc loss of ChWick/caffe and senlinuc/caffe_ocr (see the module for the CTC rules).

        loss = sum_n cost_n / #{n: cost_n finite};   dx = (y - posterior) dL (not divided by N)
    (the forks leave warp-ctc's gradient unscaled: equal at loss weight 1, the default.)
    The blank is class ``blank_index``, which must be in [0, C); unset, it is 0 (caffe_ocr's
    default; ChWick's default -1 hands an invalid class to warp-ctc, and an explicit -1 is
    refused). Bottoms, by count:
      2 (caffe_ocr): scores (T, N, C), labels (N, L); entries equal to the blank are padding and
        skipped; every sequence lasts T.
      3: scores, indicators (T, N) (0 starts a sequence, as CTCLoss), labels (T, N) ending at the
        first negative value; with blank_index 0 every label is shifted by +1 (caffe_ocr's rule,
        for 0-based labels; ChWick shifts for blank_index -1 instead); an empty labelling skips
        its sequence (cost 0).
      4: scores, sequence lengths (N), label lengths (N), labels (L, N) read as [t, n].
    prototxt: ``ctc_loss_param { blank_index }``. Top: the loss ().
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 2
    max_bottom_blobs = 4

    def reshape(self, bottom, top):
        super(WarpCTCLossLayer, self).reshape(bottom, top)
        T, N, C = self.T, self.N, self.C
        p = self.layer_param.ctc_loss_param
        self.blank = p.blank_index if p.HasField("blank_index") else 0
        if not 0 <= self.blank < C:
            raise self.error("ctc_loss_param.blank_index %d is not a class of the %d scores (the "
                             "forks pass it to warp-ctc as the blank)" % (self.blank, C))
        nb = len(bottom)
        if nb == 2 and (bottom[1].num_axes < 1 or bottom[1].shape[0] != N):
            raise self.error("labels must be N x L with N = %d, got %s" % (N, bottom[1].shape),
                             ShapeError)
        if nb == 3:
            for b in bottom[1:]:
                if b.count != T * N:
                    raise self.error("indicators and labels must be T x N = %d x %d, got %s"
                                     % (T, N, b.shape), ShapeError)
        if nb == 4:
            if bottom[1].count != N or bottom[2].count != N or bottom[3].count % N:
                raise self.error("lengths must hold N = %d values and the labels L x N"
                                 % N, ShapeError)

    def forward_cpu(self, bottom, top):
        T, N = self.T, self.N
        x = bottom[0].data.reshape(T, N, self.C)
        if len(bottom) == 2:
            lab = np.rint(bottom[1].data.reshape(N, -1)).astype(np.int64)
            targets = [[int(v) for v in row if v != self.blank] for row in lab]
            lengths = np.full(N, T)
        elif len(bottom) == 3:
            lengths = _lengths(bottom[1].data.reshape(T, N), T)
            shift = 1 if self.blank == 0 else 0
            targets = [[v + shift for v in z] for z in _targets(bottom[2].data.reshape(T, N), N)]
            lengths = np.where([len(z) == 0 for z in targets], 0, lengths)
        else:
            lengths = np.rint(bottom[1].data.reshape(-1)).astype(np.int64)
            lab_len = np.rint(bottom[2].data.reshape(-1)).astype(np.int64)
            lab = np.rint(bottom[3].data.reshape(-1, N)).astype(np.int64)
            if lab_len.min(initial=0) < 0 or lab_len.max(initial=0) > lab.shape[0]:
                raise self.error("label lengths must be in [0, %d]" % lab.shape[0])
            targets = [list(lab[:lab_len[n], n]) for n in range(N)]
        for n in range(N if len(bottom) == 3 else 0):   # ChWick's check, 3-bottom form only
            if len(targets[n]) > lengths[n] and lengths[n] > 0:
                raise self.error("sequence %d: %d labels for %d steps (the label length must "
                                 "not exceed the sequence length)"
                                 % (n, len(targets[n]), lengths[n]))
        costs = self._costs(x, lengths, targets)
        finite = np.isfinite(costs)
        top[0].data[...] = costs[finite].sum() / max(int(finite.sum()), 1)


@register_layer("CtcLoss")
class CtcLossLayer(_WarpCTC):
    """xmfbit/warpctc-caffe's warp-ctc loss (see the module for the CTC rules):
        loss = sum_n cost_n / N;   dx = (y - posterior) dL (not divided by N)
    Every sequence lasts ``time_step`` (<= T); labels (N, L) with entries equal to
    ``blank_label`` skipped (padding); ``alphabet_size`` must equal C (warp-ctc's stride).

    prototxt: ``ctc_loss_param { alphabet_size time_step blank_label: 0 }`` (xmfbit's fields,
    merged into ChWick's message under the numbers 10750-10752). Bottoms: scores (T, N, C),
    labels (N, L). Top: the loss ().
    """
    exact_num_bottom_blobs = 2

    def reshape(self, bottom, top):
        super(CtcLossLayer, self).reshape(bottom, top)
        p = self.layer_param.ctc_loss_param
        if p.alphabet_size != self.C:
            raise self.error("ctc_loss_param.alphabet_size %d differs from the %d scores per step"
                             % (p.alphabet_size, self.C))
        if not 0 < p.time_step <= self.T:
            raise self.error("ctc_loss_param.time_step must be in [1, %d], got %d"
                             % (self.T, p.time_step))
        if bottom[1].num_axes < 1 or bottom[1].shape[0] != self.N:
            raise self.error("labels must be N x L with N = %d, got %s"
                             % (self.N, bottom[1].shape), ShapeError)
        self.blank = p.blank_label

    def forward_cpu(self, bottom, top):
        p = self.layer_param.ctc_loss_param
        x = bottom[0].data.reshape(self.T, self.N, self.C)
        lab = np.rint(bottom[1].data.reshape(self.N, -1)).astype(np.int64)
        targets = [[int(v) for v in row if v != self.blank] for row in lab]
        if not any(targets):
            raise self.error("every labelling is empty")
        costs = self._costs(x, np.full(self.N, p.time_step), targets)
        top[0].data[...] = costs.sum() / self.N


@register_layer("ContinuationIndicator")
class ContinuationIndicatorLayer(Layer):
    """xmfbit's sequence indicators for the recurrent layers: a (time_step, batch_size) top with
    0 at t = 0 and 1 after (one sequence per column). No bottom, no backward.

    prototxt: ``continuation_indicator_param { time_step batch_size }`` (both > 0).
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.continuation_indicator_param
        if p.time_step <= 0 or p.batch_size <= 0:
            raise self.error("continuation_indicator_param needs time_step > 0 and batch_size > 0")

    def reshape(self, bottom, top):
        p = self.layer_param.continuation_indicator_param
        top[0].reshape((p.time_step, p.batch_size))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = 1
        top[0].data[0] = 0


@register_layer("LabelsequenceAccuracy")
class LabelsequenceAccuracyLayer(Layer):
    """xmfbit's sequence accuracy: per example the best class at each step (first on ties),
    repeats merged and ``blank_label`` removed, compared with the labels (N, L) without their
    blank entries; accuracy = share of exact matches. Bottoms: scores (N, T, C) (batch first:
    the fork's nets Permute the T x N x C scores), labels (N, L). Top: accuracy ().

    prototxt: ``labelsequence_accuracy_param { blank_label: 0 }``.
    """
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 3 or bottom[1].shape[0] != bottom[0].shape[0]:
            raise self.error("scores must be N x T x C and labels N x L, got %s and %s"
                             % (bottom[0].shape, bottom[1].shape), ShapeError)
        top[0].reshape(())

    def forward_cpu(self, bottom, top):
        blank = self.layer_param.labelsequence_accuracy_param.blank_label
        best = bottom[0].data.argmax(axis=2)
        gt = bottom[1].data.reshape(best.shape[0], -1)
        hits = 0
        for path, row in zip(best, gt):
            keep = (path != blank) & np.concatenate([[True], path[1:] != path[:-1]])
            hits += list(path[keep]) == [v for v in row if v != blank]
        top[0].data[...] = hits / float(best.shape[0])


@register_layer("CTCBeamSearchDecoder")
class CTCBeamSearchDecoderLayer(CTCGreedyDecoderLayer):
    """CTC prefix beam search (caffepy's; Graves 2012 / Hannun et al. 2014, the rule of
    TensorFlow's ctc_beam_search_decoder without a language model).

    Per sequence (length from the indicators): log y = log_softmax(x) over C (feed the scores);
    each prefix keeps log p_b (paths ending in the blank) and log p_nb; a step extends every kept
    prefix by the blank (to p_b), by its last label (to its own p_nb from p_nb, and to prefix + c
    from p_b only) and by every other label c; the best ``beam_width`` prefixes by
    p_b + p_nb survive. Tops as CTCGreedyDecoder's with ``top_paths`` best sequences:
    sequences (N, T, top_paths, 1), -1 padded; scores (N, top_paths, 1, 1) = -log p(prefix);
    accuracy as the greedy decoder's on the best sequence. ``ctc_merge_repeated: false`` is
    refused (it has no CTC meaning for a prefix search).

    prototxt: ``ctc_decoder_param { blank_index: -1 beam_width: 10 top_paths: 1 }`` (beam_width
    and top_paths are caffepy's fields). Bottoms: scores (T, N, C), indicators (T, N)
    [, targets (T, N)].
    """

    def layer_setup(self, bottom, top):
        super(CTCBeamSearchDecoderLayer, self).layer_setup(bottom, top)
        p = self.layer_param.ctc_decoder_param
        if not p.ctc_merge_repeated:
            raise self.error("ctc_decoder_param.ctc_merge_repeated: false is not supported by "
                             "the beam search")
        if p.beam_width < 1 or not 1 <= p.top_paths <= p.beam_width:
            raise self.error("need beam_width >= 1 and 1 <= top_paths <= beam_width")
        self.paths = int(p.top_paths)

    def reshape(self, bottom, top):
        super(CTCBeamSearchDecoderLayer, self).reshape(bottom, top)
        T, N, _ = bottom[0].shape
        top[0].reshape(N, T, self.paths, 1)
        if self.score_top is not None:
            top[self.score_top].reshape(N, self.paths, 1, 1)

    def _search(self, logy):
        """The ``top_paths`` best (labelling, -log p) of one sequence; each step scores every
        extension of every kept prefix at once (a W x C array), then keeps the best W."""
        width = self.layer_param.ctc_decoder_param.beam_width
        prefixes, lb, lnb = [()], np.zeros(1), np.full(1, -np.inf)
        for lp in logy:
            total = np.logaddexp(lb, lnb)
            last = np.array([q[-1] if q else -1 for q in prefixes])
            stay_b = total + lp[self.blank]
            stay_nb = np.where(last >= 0, lnb + lp[np.maximum(last, 0)], -np.inf)
            ext = total[:, None] + lp[None, :]
            rows = np.flatnonzero(last >= 0)
            ext[rows, last[rows]] = lb[rows] + lp[last[rows]]   # a repeat needs a blank between
            ext[:, self.blank] = -np.inf
            index = {q: k for k, q in enumerate(prefixes)}
            for j, q in enumerate(prefixes):                   # q also reached from its parent
                k = index.get(q[:-1]) if q else None
                if k is not None:
                    stay_nb[j] = np.logaddexp(stay_nb[j], ext[k, q[-1]])
                    ext[k, q[-1]] = -np.inf
            flat = ext.reshape(-1)
            take = (np.argpartition(-flat, width - 1)[:width] if flat.size > width
                    else np.arange(flat.size))
            take = take[np.isfinite(flat[take])]
            cand = ([(q, stay_b[k], stay_nb[k]) for k, q in enumerate(prefixes)]
                    + [(prefixes[c // lp.size] + (int(c % lp.size),), -np.inf, flat[c])
                       for c in np.sort(take)])
            cand.sort(key=lambda e: -np.logaddexp(e[1], e[2]))
            cand = cand[:width]
            prefixes = [e[0] for e in cand]
            lb = np.array([e[1] for e in cand])
            lnb = np.array([e[2] for e in cand])
        score = np.logaddexp(lb, lnb)
        order = np.argsort(-score, kind="stable")[:self.paths]
        return [(list(prefixes[k]), -float(score[k])) for k in order]

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.astype(np.float64)
        T, N, C = x.shape
        lengths = _lengths(bottom[1].data.reshape(T, N), T)
        logy = _log_softmax(x)
        top[0].data[...] = -1
        best = []
        for n in range(N):
            found = self._search(logy[:lengths[n], n])
            best.append(found[0][0])
            for k, (seq, score) in enumerate(found):
                top[0].data[n, :len(seq), k, 0] = seq
                if self.score_top is not None:
                    top[self.score_top].data[n, k, 0, 0] = score
        if self.acc_top is not None:
            targets = _targets(bottom[2].data.reshape(T, N), N)
            hits = sum(1 for s, z in zip(best, targets) if s[:len(z)] == z)
            top[self.acc_top].data[...] = hits / float(N)
