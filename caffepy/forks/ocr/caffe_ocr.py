"""senlinuc/caffe_ocr's sequence layers (CRNN-style OCR nets): Junhyuk Oh's ``Lstm`` (and the
two-bottom form of his junhyukoh/caffe-lstm, with continuation flags), ``Reverse``,
``Transpose`` and the caffe_ocr forms of ``CTCGreedyDecoder`` (scores only; scores with N x L
labels and an edit-distance accuracy). Its ``WarpCTCLoss`` is in ``warpctc.py``.
"""
import numpy as np

from ...errors import ShapeError
from ...fillers import get_filler
from ...layers.base import Layer, register_layer, register_variant
from .ctc import CTCGreedyDecoderLayer


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@register_layer("Lstm")
class LstmLayer(Layer):
    """caffe_ocr's and CTPN's LSTM (Junhyuk Oh's caffe-lstm layer) over a T x N x ... input
    (I = the count of the axes after 1: CTPN feeds a W x H x N x C Transpose), state starting at 0
    for every batch. Gates in the order input, forget, output, cell input:
        a_t = x_t W_i^T + b (+ h_{t-1} W_h^T for t > 0)
        i, f, o = sigmoid(a[:H]), sigmoid(a[H:2H]) (0 at t = 0), sigmoid(a[2H:3H]); g = tanh(a[3H:])
        c_t = f c_{t-1} + i g;   h_t = o tanh(c_t)   (top: h, T x N x H)
    Backward through time (exact); with ``clipping_threshold`` > 0 the gate pre-activation
    gradients are clipped to [-threshold, threshold] at each step, as the fork. With a second
    (clip / continuation) bottom the layer is junhyukoh/caffe-lstm's form, ``ClipLstmLayer``.

    prototxt: ``lstm_param { num_output clipping_threshold: 0 weight_filler bias_filler
    batch_size: 1 }`` (batch_size is read and unused, as the fork). Params: W_i (4H, I),
    W_h (4H, H) (both from weight_filler), b (4H) (bias_filler).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.lstm_param
        if not p.num_output:
            raise self.error("lstm_param.num_output is required")
        if bottom[0].num_axes < 3:
            raise self.error("bottom must be T x N x ... (3 or more axes), got %s"
                             % (bottom[0].shape,), ShapeError)
        H, I = int(p.num_output), bottom[0].count_range(2)
        shapes = [(4 * H, I), (4 * H, H), (4 * H,)]
        if self.blobs:
            for i, (b, s) in enumerate(zip(self.blobs, shapes)):
                self.check_shape("parameter blob %d" % i, s, b.shape)
            if len(self.blobs) != 3:
                raise self.error("expected 3 parameter blobs, got %d" % len(self.blobs))
        else:
            self.blobs = [self.new_blob(s) for s in shapes]
            get_filler(p.weight_filler).fill(self.blobs[0])
            get_filler(p.weight_filler).fill(self.blobs[1])
            get_filler(p.bias_filler).fill(self.blobs[2])
        self.param_propagate_down = [True] * 3
        self.H, self.I = H, I

    def reshape(self, bottom, top):
        if bottom[0].num_axes < 3 or bottom[0].count_range(2) != self.I:
            raise self.error("bottom must be T x N x ... with %d values per step, got %s"
                             % (self.I, bottom[0].shape), ShapeError)
        top[0].reshape(bottom[0].shape[:2] + (self.H,))

    def forward_cpu(self, bottom, top):
        H = self.H
        T, N = bottom[0].shape[:2]
        x = bottom[0].data.reshape(T, N, self.I)
        wi, wh, b = (blob.data for blob in self.blobs)
        pre = x @ wi.T + b
        self.gates = np.empty((T, N, 4 * H), dtype=pre.dtype)
        self.c = np.empty((T, N, H), dtype=pre.dtype)
        h = top[0].data
        for t in range(T):
            a = pre[t] + (h[t - 1] @ wh.T if t else 0)
            gt = self.gates[t]
            gt[:, :3 * H] = _sigmoid(a[:, :3 * H])
            if t == 0:
                gt[:, H:2 * H] = 0
            gt[:, 3 * H:] = np.tanh(a[:, 3 * H:])
            prev = self.c[t - 1] if t else 0
            self.c[t] = gt[:, H:2 * H] * prev + gt[:, :H] * gt[:, 3 * H:]
            h[t] = gt[:, 2 * H:3 * H] * np.tanh(self.c[t])

    def backward_cpu(self, top, propagate_down, bottom):
        H = self.H
        clip = self.layer_param.lstm_param.clipping_threshold
        T, N = bottom[0].shape[:2]
        x, h = bottom[0].data.reshape(T, N, self.I), top[0].data
        wi, wh = self.blobs[0].data, self.blobs[1].data
        dh = top[0].diff.copy()
        dpre = np.zeros_like(self.gates)
        dc_next = 0
        for t in range(T - 1, -1, -1):
            g = self.gates[t]
            i, f, o, cand = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            tc = np.tanh(self.c[t])
            dc = dc_next + dh[t] * o * (1 - tc * tc)
            prev = self.c[t - 1] if t else np.zeros_like(tc)
            d = dpre[t]
            d[:, :H] = dc * cand * i * (1 - i)
            d[:, H:2 * H] = dc * prev * f * (1 - f) if t else 0
            d[:, 2 * H:3 * H] = dh[t] * tc * o * (1 - o)
            d[:, 3 * H:] = dc * i * (1 - cand * cand)
            if clip > 0:
                np.clip(d, -clip, clip, out=d)
            dc_next = dc * f
            if t:
                dh[t - 1] += d @ wh
        flat = dpre.reshape(-1, 4 * H)
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += flat.T @ x.reshape(-1, self.I)
        if self.param_propagate_down[1] and T > 1:
            self.blobs[1].diff[...] += dpre[1:].reshape(-1, 4 * H).T @ h[:-1].reshape(-1, H)
        if self.param_propagate_down[2]:
            self.blobs[2].diff[...] += flat.sum(axis=0)
        if propagate_down[0]:
            bottom[0].diff[...] = (dpre @ wi).reshape(bottom[0].shape)


@register_variant("Lstm", lambda lp: len(lp.bottom) == 2)
class ClipLstmLayer(LstmLayer):
    """Junhyuk Oh's Lstm in junhyukoh/caffe-lstm's last form (src/caffe/layers/lstm_layer.cpp):
    a sequence of T steps of N = ``lstm_param.batch_size`` streams as (T N) x ... rows, with a
    second bottom of T N continuation flags (``clip``, 0 at a sequence start). The state carries
    over from the previous forward (truncated BPTT): step 0 starts from the last forward's h_T,
    c_T (zeros before the first). At step t, stream n, with cont = clip[t N + n] != 0:

        a = x W_i^T + b (+ h_{t-1} W_h^T where cont)
        i, o = sigmoid(a[:H]), sigmoid(a[2H:3H]);  f = sigmoid(a[H:2H]) where cont, else 0
        c_t = f c_{t-1} + i tanh(a[3H:]);  h_t = o tanh(c_t)

    Backward through the T steps, none across the batch boundary; ``clipping_threshold`` > 0
    clips the gate gradients as the fork. The fork adds h_{t-1}'s term to dW_h where cont is 0
    too (where the forward did not use it); caffepy adds the derivative's terms only. prototxt:
    ``lstm_param { num_output batch_size: 1 clipping_threshold: 0 weight_filler bias_filler }``.
    Bottoms: x ((T N) x ...), clip (T N values). Top: (T N) x H. Params as the one-bottom Lstm.
    """
    exact_num_bottom_blobs = 2

    def layer_setup(self, bottom, top):
        p = self.layer_param.lstm_param
        if not p.num_output:
            raise self.error("lstm_param.num_output is required")
        self.N = int(p.batch_size)
        H, I = int(p.num_output), bottom[0].count_range(1)
        shapes = [(4 * H, I), (4 * H, H), (4 * H,)]
        if self.blobs:
            if len(self.blobs) != 3:
                raise self.error("expected 3 parameter blobs, got %d" % len(self.blobs))
            for i, (b, s) in enumerate(zip(self.blobs, shapes)):
                self.check_shape("parameter blob %d" % i, s, b.shape)
        else:
            self.blobs = [self.new_blob(s) for s in shapes]
            for b, f in zip(self.blobs, (p.weight_filler, p.weight_filler, p.bias_filler)):
                get_filler(f).fill(b)
        self.param_propagate_down = [True] * 3
        self.H, self.I = H, I
        self.h_last = self.c_last = None

    def reshape(self, bottom, top):
        rows = bottom[0].shape[0] if bottom[0].num_axes else 0
        if self.N <= 0 or rows % self.N or bottom[0].count_range(1) != self.I:
            raise self.error("bottom %s must be (T x %d) rows of %d values"
                             % (bottom[0].shape, self.N, self.I), ShapeError)
        if bottom[1].count != rows:
            raise self.error("clip %s must hold one flag per row (%d)" % (bottom[1].shape, rows),
                             ShapeError)
        self.T = rows // self.N
        top[0].reshape(rows, self.H)

    def _cont(self, bottom):
        return bottom[1].data.reshape(self.T, self.N, 1) != 0

    def forward_cpu(self, bottom, top):
        H, T, N = self.H, self.T, self.N
        x = bottom[0].data.reshape(T, N, self.I)
        wi, wh, b = (blob.data for blob in self.blobs)
        cont = self._cont(bottom)
        if self.h_last is None or self.h_last.shape != (N, H):
            self.h_last = np.zeros((N, H), dtype=x.dtype)
            self.c_last = np.zeros((N, H), dtype=x.dtype)
        self.h0, self.c0 = self.h_last, self.c_last
        pre = x @ wi.T + b
        self.gates = np.empty((T, N, 4 * H), dtype=pre.dtype)
        self.c = np.empty((T, N, H), dtype=pre.dtype)
        h = top[0].data.reshape(T, N, H)
        for t in range(T):
            h_prev, c_prev = (h[t - 1], self.c[t - 1]) if t else (self.h0, self.c0)
            a = pre[t] + np.where(cont[t], h_prev @ wh.T, 0)
            g = self.gates[t]
            g[:, :3 * H] = _sigmoid(a[:, :3 * H])
            g[:, H:2 * H] *= cont[t]
            g[:, 3 * H:] = np.tanh(a[:, 3 * H:])
            self.c[t] = g[:, H:2 * H] * c_prev + g[:, :H] * g[:, 3 * H:]
            h[t] = g[:, 2 * H:3 * H] * np.tanh(self.c[t])
        self.h_last, self.c_last = h[T - 1].copy(), self.c[T - 1].copy()

    def backward_cpu(self, top, propagate_down, bottom):
        H, T, N = self.H, self.T, self.N
        clip = self.layer_param.lstm_param.clipping_threshold
        x, h = bottom[0].data.reshape(T, N, self.I), top[0].data.reshape(T, N, H)
        wi, wh = self.blobs[0].data, self.blobs[1].data
        cont = self._cont(bottom)
        dh = top[0].diff.reshape(T, N, H).copy()
        dpre = np.zeros_like(self.gates)
        dc_next = 0
        for t in range(T - 1, -1, -1):
            g = self.gates[t]
            i, f, o, cand = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            c_prev = self.c[t - 1] if t else self.c0
            tc = np.tanh(self.c[t])
            dc = dc_next + dh[t] * o * (1 - tc * tc)
            d = dpre[t]
            d[:, :H] = dc * cand * i * (1 - i)
            d[:, H:2 * H] = dc * c_prev * f * (1 - f) * cont[t]
            d[:, 2 * H:3 * H] = dh[t] * tc * o * (1 - o)
            d[:, 3 * H:] = dc * i * (1 - cand * cand)
            if clip > 0:
                np.clip(d, -clip, clip, out=d)
            dc_next = dc * f
            if t:
                dh[t - 1] += (d @ wh) * cont[t]
        h_prev = np.concatenate([self.h0[None], h[:-1]]) * cont
        if self.param_propagate_down[0]:
            self.blobs[0].diff[...] += dpre.reshape(-1, 4 * H).T @ x.reshape(-1, self.I)
        if self.param_propagate_down[1]:
            self.blobs[1].diff[...] += dpre.reshape(-1, 4 * H).T @ h_prev.reshape(-1, H)
        if self.param_propagate_down[2]:
            self.blobs[2].diff[...] += dpre.reshape(-1, 4 * H).sum(axis=0)
        if propagate_down[1]:
            raise self.error("cannot back-propagate to the clip flags")
        if propagate_down[0]:
            bottom[0].diff[...] = (dpre @ wi).reshape(bottom[0].shape)

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("Reverse")
class ReverseLayer(Layer):
    """caffe_ocr's (ChWick's) Reverse: the order along ``axis`` reversed (the time axis of a
    bidirectional LSTM); dx = dy reversed back. prototxt: ``reverse_param { axis: 0 }``."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        self.axis = bottom[0].canonical_axis_index(self.layer_param.reverse_param.axis)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = np.flip(bottom[0].data, axis=self.axis)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = np.flip(top[0].diff, axis=self.axis)


@register_layer("Transpose")
class TransposeLayer(Layer):
    """caffe_ocr's Transpose: top axis i is bottom axis dim[i] (numpy's transpose);
    dx = dy transposed back. prototxt: ``transpose_param { dim: 3 dim: 0 dim: 2 dim: 1 }`` (a
    permutation of the bottom's axes)."""
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        dims = [int(d) for d in self.layer_param.transpose_param.dim]
        if sorted(dims) != list(range(bottom[0].num_axes)):
            raise self.error("transpose_param.dim %s is not a permutation of the %d axes"
                             % (dims, bottom[0].num_axes), ShapeError)
        self.dims = dims
        top[0].reshape(tuple(bottom[0].shape[d] for d in dims))

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data.transpose(self.dims)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff.transpose(np.argsort(self.dims))


def _edit_distance(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return int(d[-1])


@register_variant("CTCGreedyDecoder",
                  lambda lp: len(lp.bottom) == 1 or (len(lp.bottom) == 2 and len(lp.top) == 1))
class OcrGreedyDecoderLayer(CTCGreedyDecoderLayer):
    """caffe_ocr's CTCGreedyDecoder forms (its decoder keeps ChWick's name with other blobs):
      scores (T, N, C) -> sequences (N, T, 1, 1): best class per step (first on ties), repeats
        merged, blanks removed, -1 padded, every sequence of length T;
      scores, labels (N, L) -> accuracy (1, 2, 1, 1) = [1 - mean_n ed_n / max(|s_n|, |z_n|),
        share of exact matches], z_n the labels up to the first negative without the blank
        (pairs both empty add 0 to the mean).
    The blank is ``blank_index``; unset, 0 (caffe_ocr's default). With 2 bottoms whose second is
    T x N (ChWick's sequence indicators), the layer is ChWick's decoder.
    """
    min_bottom_blobs = 1

    def layer_setup(self, bottom, top):
        T, N = bottom[0].shape[:2] if bottom[0].num_axes >= 2 else (0, 0)
        self.ocr = len(bottom) == 1 or not (bottom[1].count == T * N and bottom[1].shape[0] == T)
        if not self.ocr:
            return super(OcrGreedyDecoderLayer, self).layer_setup(bottom, top)
        if len(bottom) == 2 and bottom[1].shape[0] != N:
            raise self.error("labels must be N x L with N = %d, got %s" % (N, bottom[1].shape),
                             ShapeError)

    def reshape(self, bottom, top):
        if not self.ocr:
            return super(OcrGreedyDecoderLayer, self).reshape(bottom, top)
        if bottom[0].num_axes != 3:
            raise self.error("scores must be T x N x C, got %s" % (bottom[0].shape,), ShapeError)
        T, N, C = bottom[0].shape
        p = self.layer_param.ctc_decoder_param
        blank = p.blank_index if p.HasField("blank_index") else 0
        self.blank = blank if blank >= 0 else C - 1
        top[0].reshape((N, T, 1, 1) if len(bottom) == 1 else (1, 2, 1, 1))

    def forward_cpu(self, bottom, top):
        if not self.ocr:
            return super(OcrGreedyDecoderLayer, self).forward_cpu(bottom, top)
        best = bottom[0].data.argmax(axis=2)
        merge = self.layer_param.ctc_decoder_param.ctc_merge_repeated
        seqs = []
        for path in best.T:
            keep = path != self.blank
            if merge:
                keep[1:] &= path[1:] != path[:-1]
            seqs.append([int(v) for v in path[keep]])
        if len(bottom) == 1:
            top[0].data[...] = -1
            for n, s in enumerate(seqs):
                top[0].data[n, :len(s), 0, 0] = s
            return
        lab = bottom[1].data.reshape(len(seqs), -1)
        ratio, exact = 0.0, 0
        for s, row in zip(seqs, lab):
            z = []
            for v in row:
                if v < 0:
                    break
                if int(v + 0.5) != self.blank:
                    z.append(int(v + 0.5))
            if not s and not z:
                continue
            ed = _edit_distance(z, s)
            ratio += ed / float(max(len(s), len(z)))
            exact += ed == 0
        top[0].data.reshape(-1)[...] = [1 - ratio / len(seqs), exact / float(len(seqs))]
