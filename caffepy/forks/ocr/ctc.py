"""CTC for CRNN-style nets: CTCLoss and CTCGreedyDecoder of ChWick/caffe's ``ctc`` branch (the
BVLC pull request that TextBoxes++ and the Caffe OCR forks build on).

Blobs are time-major as Caffe's recurrent layers: scores T x N x C, sequence indicators T x N
(0 starts a sequence: a sequence lasts until the next 0 after t = 0, or to T), target labels
T x N (a negative value ends the labelling). The blank is class ``blank_index`` (C - 1 when
negative).
"""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, LossLayer, register_layer


def _lengths(ind, T):
    """Sequence lengths from T x N indicators: the first t >= 1 with indicator 0, else T."""
    zero = np.rint(ind[1:]) == 0
    return np.where(zero.any(axis=0), zero.argmax(axis=0) + 1, T)


def _targets(blob, n):
    seqs = []
    for col in range(n):
        lab = blob[:, col]
        end = np.flatnonzero(lab < 0)
        seqs.append([int(v + 0.5) for v in lab[:end[0] if end.size else lab.size]])
    return seqs


def _logsumexp(a, axis=None):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


@register_layer("CTCLoss")
class CTCLossLayer(LossLayer):
    """Connectionist temporal classification loss (Graves et al. 2006), softmax included.

    For each sequence n (length T_n from the indicators, labels z of length U):
    y = softmax(x) over C; l' = z with blanks around and between its labels (after merging
    repeats when ``preprocess_collapse_repeated``); alpha / beta the CTC forward / backward
    variables, where a label may repeat over time (stay on u) unless ``ctc_merge_repeated`` is
    false for non-blank u, and may skip the blank between two labels unless they are equal and
    ``ctc_merge_repeated`` is true (TensorFlow's rules, which the fork ports).
        loss = -sum_n log p(z_n | x_n) / N
        dx[t, n, c] = (y[t, n, c] - sum_{u: l'_u = c} alpha_t(u) beta_t(u) / p(z_n | x_n)) dL
    (t < T_n; 0 beyond; dL the top diff, i.e. the loss weight). Like the fork's, the gradient is
    not divided by N (it is N times the loss's); the fork also ignores the loss weight, which
    equals dL = 1, the default. A sequence with no label is skipped; one whose labels cannot fit
    gets dx = y dL.

    prototxt: ``ctc_loss_param { blank_index: -1 preprocess_collapse_repeated: false
    ctc_merge_repeated: true output_delay: 0 loss_calculation_t: 0 }`` (output_delay other than
    0 is refused; loss_calculation_t changes no result). Bottoms: x (T, N, C), indicators (T, N),
    labels (T, N). Top: the loss ().
    """
    exact_num_bottom_blobs = 3

    def layer_setup(self, bottom, top):
        p = self.layer_param.ctc_loss_param
        if p.output_delay:
            raise self.error("ctc_loss_param.output_delay is not supported")

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 3:
            raise self.error("scores must be T x N x C, got %s" % (bottom[0].shape,), ShapeError)
        T, N, C = bottom[0].shape
        for b in bottom[1:]:
            if b.shape[:2] != (T, N) or b.count != T * N:
                raise self.error("indicators and labels must be T x N = %d x %d, got %s"
                                 % (T, N, b.shape), ShapeError)
        blank = self.layer_param.ctc_loss_param.blank_index
        self.blank = blank if blank >= 0 else C - 1
        top[0].reshape(())

    def _l_prime(self, z):
        p = self.layer_param.ctc_loss_param
        if p.preprocess_collapse_repeated:
            z = [v for i, v in enumerate(z) if i == 0 or v != z[i - 1]]
        C = self.prob.shape[2]
        if any(v < 0 or v >= C or v == self.blank for v in z):
            raise self.error("target label outside [0, %d) or equal to the blank" % C)
        lp = [self.blank]
        for v in z:
            lp += [v, self.blank]
        return np.asarray(lp)

    def _recursion(self, logy, lp, merge):
        """log alpha (T x U) of the label sequence ``lp`` over the log-probabilities ``logy``."""
        T, U = logy.shape[0], lp.size
        stay = np.full(U, merge) | (lp == self.blank)
        skip = np.zeros(U, bool)
        skip[2:] = (lp[2:] != self.blank) & ~(merge & (lp[2:] == lp[:-2]))
        a = np.full((T, U), -np.inf)
        a[0, 0] = logy[0, lp[0]]
        if U > 1:
            a[0, 1] = logy[0, lp[1]]
        for t in range(1, T):
            prev = a[t - 1]
            terms = np.stack([np.where(stay, prev, -np.inf),
                              np.concatenate([[-np.inf], prev[:-1]]),
                              np.where(skip, np.concatenate([[-np.inf] * 2, prev[:-2]]),
                                       -np.inf)])
            a[t] = _logsumexp(terms, axis=0) + logy[t, lp]
        return a

    def forward_cpu(self, bottom, top):
        p = self.layer_param.ctc_loss_param
        x = bottom[0].data.astype(np.float64)
        T, N, C = x.shape
        e = np.exp(x - x.max(axis=2, keepdims=True))
        self.prob = e / e.sum(axis=2, keepdims=True)
        self.lengths = _lengths(bottom[1].data.reshape(T, N), T)
        targets = _targets(bottom[2].data.reshape(T, N), N)
        self.post, total = [], 0.0
        for n in range(N):
            if not targets[n]:
                self.post.append(None)
                continue
            tn = int(self.lengths[n])
            lp = self._l_prime(targets[n])
            with np.errstate(divide="ignore"):
                logy = np.log(self.prob[:tn, n])
            a = self._recursion(logy, lp, p.ctc_merge_repeated)
            # beta by running the recursion on the reversed problem
            b = self._recursion(logy[::-1], lp[::-1], p.ctc_merge_repeated)[::-1, ::-1]
            ab = a + b - logy[:, lp]  # alpha_t(u) beta_t(u) with y counted once
            logp = _logsumexp(ab[0])
            total -= logp
            if not np.isfinite(logp):
                self.post.append(np.zeros((tn, C)))
                continue
            post = np.zeros((tn, C))
            for c in np.unique(lp):
                post[:, c] = np.exp(_logsumexp(ab[:, lp == c], axis=1) - logp)
            self.post.append(post)
        top[0].data[...] = total / N

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[1] or propagate_down[2]:
            raise self.error("CTCLoss cannot propagate to the indicators or labels")
        if not propagate_down[0]:
            return
        d = np.zeros_like(self.prob)
        for n, post in enumerate(self.post):
            if post is not None:
                tn = post.shape[0]
                d[:tn, n] = self.prob[:tn, n] - post
        bottom[0].diff[...] = d * float(top[0].diff)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("CTCGreedyDecoder")
class CTCGreedyDecoderLayer(Layer):
    """Best-path CTC decoding (the fork's CTCGreedyDecoder).

    For each sequence: the arg max class at every step (the first one on ties), repeated classes
    merged when ``ctc_merge_repeated``, blanks removed. score = -sum_t max_c x[t, n, c].
    accuracy = the share of sequences whose decoding starts with the whole target (the fork
    compares the target's length only).

    prototxt: ``ctc_decoder_param { blank_index: -1 ctc_merge_repeated: true }``.
    Bottoms: probabilities (T, N, C), indicators (T, N) [, targets (T, N)].
    Tops: sequences (N, T, 1, 1), -1 padded [, scores (N, 1, 1, 1)] [, accuracy (1, 1, 1, 1)]
    (with 3 bottoms: 2 tops = sequences, accuracy; 3 tops = sequences, scores, accuracy).
    """
    min_bottom_blobs = 2
    max_bottom_blobs = 3
    min_top_blobs = 1
    max_top_blobs = 3

    def layer_setup(self, bottom, top):
        self.score_top = self.acc_top = None
        if len(bottom) == 2:
            if len(top) > 2:
                raise self.error("with 2 bottoms the tops are sequences [, scores]")
            self.score_top = 1 if len(top) == 2 else None
        elif len(top) == 2:
            self.acc_top = 1
        elif len(top) == 3:
            self.score_top, self.acc_top = 1, 2

    def reshape(self, bottom, top):
        if bottom[0].num_axes != 3:
            raise self.error("probabilities must be T x N x C, got %s" % (bottom[0].shape,),
                             ShapeError)
        T, N, C = bottom[0].shape
        blank = self.layer_param.ctc_decoder_param.blank_index
        self.blank = blank if blank >= 0 else C - 1
        top[0].reshape(N, T, 1, 1)
        if self.score_top is not None:
            top[self.score_top].reshape(N, 1, 1, 1)
        if self.acc_top is not None:
            top[self.acc_top].reshape(1, 1, 1, 1)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        T, N, C = x.shape
        lengths = _lengths(bottom[1].data.reshape(T, N), T)
        best = x.argmax(axis=2)
        merge = self.layer_param.ctc_decoder_param.ctc_merge_repeated
        seqs = []
        for n in range(N):
            path = best[:lengths[n], n]
            keep = path != self.blank
            if merge:
                keep[1:] &= path[1:] != path[:-1]
            seqs.append(path[keep])
        top[0].data[...] = -1
        for n, s in enumerate(seqs):
            top[0].data[n, :s.size, 0, 0] = s
        if self.score_top is not None:
            mx = x.max(axis=2)
            top[self.score_top].data.reshape(-1)[...] = [
                -mx[:lengths[n], n].sum() for n in range(N)]
        if self.acc_top is not None:
            targets = _targets(bottom[2].data.reshape(T, N), N)
            hits = sum(1 for s, z in zip(seqs, targets) if len(s) >= len(z)
                       and list(s[:len(z)]) == z)
            top[self.acc_top].data[...] = hits / float(N)

    def backward_cpu(self, top, propagate_down, bottom):
        if any(propagate_down):
            raise self.error("CTCGreedyDecoder has no backward")
